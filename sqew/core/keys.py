"""API keys: minting, argon2id hashing, and what a key may do (its ``Principal``).

A key is ``sqew_<id>_<secret>``: ``id`` (16 hex digits) is public — listings and revocation
name it, and a presented key is looked up by it — and ``secret`` is 32 random bytes
(base64url). Only the argon2id hash of the whole key is stored, so the database, a backup or
a log of it never yields a working key. Verifying a hash is deliberately slow (tens of ms):
callers cache what they verified (``sqew.server.authenticator``) and verify away from the
event loop.

Scopes (docs/rest.md, "Auth"): ``produce`` (enqueue), ``consume`` (poll, ack, nack, extend-lease,
peek, get), ``admin`` (everything, keys included). A key bound to a queue reaches that queue and its
DLQ only; what needs no queue (creating queues, keys) needs an unbound key.

An **SQS key** (docs/sqs.md, "Authentication") is an AWS-style pair: an access key id
(``SQEW`` and 16 characters of AWS's alphabet, 20 in all) and a 40-character secret access
key. Verifying an AWS Signature Version 4 needs the secret itself (an HMAC is computed with
it), so it is stored as it is, in the ``hash`` column marked ``SQS_SECRET``: the database's
permissions protect it, as they protect queues' HMAC secrets (docs/security.md).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import argon2

from sqew import errors, models
from sqew.backends.base import KeyRow, Tx
from sqew.core import rules
from sqew.core.delivering import queue_row
from sqew.core.writer import Op

PREFIX = "sqew_"
ID_BYTES = 8
SECRET_BYTES = 32
_KEY = re.compile(r"sqew_([0-9a-f]{16})_[A-Za-z0-9_-]{43}")
SQS_ID_PREFIX = "SQEW"
SQS_SECRET = "sqs-secret:"
"""What the stored ``hash`` of an SQS key starts with (the secret follows): never an argon2
hash, which starts with ``$``."""
_SQS_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # AWS's access key ids: base32
_SQS_ID = re.compile(f"{SQS_ID_PREFIX}[{_SQS_ID_ALPHABET}]{{16}}")

Need = Literal["read", "produce", "consume", "admin"]
"""What an operation needs of a key: a scope, or ``read`` (any scope: a queue's settings and
stats, the list of queues a key reaches)."""

# argon2id with OWASP's recommended minimum (19 MiB, 2 passes, 1 lane): tens of ms and 19 MiB
# per verification. A key is 32 random bytes, so the hash guards against nothing a slower one
# would; the memory matters more, as a server may verify a few keys at once. Each hash records
# its parameters, so hashes made with others keep verifying.
_hasher = argon2.PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def mint() -> tuple[str, str]:
    """A new key: ``(id, key)``."""
    key_id = secrets.token_hex(ID_BYTES)
    return key_id, f"{PREFIX}{key_id}_{secrets.token_urlsafe(SECRET_BYTES)}"


def mint_sqs() -> tuple[str, str]:
    """A new SQS key: ``(access key id, secret access key)``."""
    key_id = SQS_ID_PREFIX + "".join(secrets.choice(_SQS_ID_ALPHABET) for _ in range(16))
    return key_id, base64.b64encode(secrets.token_bytes(30)).decode()


def minted(sqs: bool) -> tuple[str, str, Callable[[], str]]:
    """A new key, ``(id, key, what to store)``: the last is slow for a REST key (argon2, never
    on an event loop); an SQS key's secret is kept as it is, since it verifies a signature."""
    if sqs:
        key_id, key = mint_sqs()
        return key_id, key, lambda: SQS_SECRET + key
    key_id, key = mint()
    return key_id, key, lambda: hash_key(key)


def is_sqs_key_id(key_id: str) -> bool:
    """Whether ``key_id`` has the form of an SQS access key id."""
    return _SQS_ID.fullmatch(key_id) is not None


def sqs_secret(row: KeyRow) -> str | None:
    """The secret access key of an SQS key's row; None for a bearer key's."""
    return row.hash[len(SQS_SECRET):] if row.hash.startswith(SQS_SECRET) else None


def key_id_of(key: str) -> str | None:
    """The id inside a well-formed key, or None for anything else."""
    m = _KEY.fullmatch(key)
    return m.group(1) if m else None


def hash_key(key: str) -> str:
    """The argon2id hash of ``key`` (slow by design)."""
    return _hasher.hash(key)


def verify(stored_hash: str, key: str) -> bool:
    """Whether ``key`` matches ``stored_hash`` (slow by design; constant-time inside)."""
    try:
        return not stored_hash.startswith(SQS_SECRET) and _hasher.verify(stored_hash, key)
    except argon2.exceptions.VerificationError:
        return False
    except argon2.exceptions.InvalidHashError:
        return False


def digest(key: str) -> bytes:
    """A fast digest of ``key``: what a cache of verified keys is keyed by (never the key)."""
    return hashlib.sha256(key.encode()).digest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: a key's id, scopes and queue binding (None: every queue)."""

    key_id: str
    scopes: frozenset[str]
    queue: str | None = None

    def reaches(self, queue: str) -> bool:
        """Whether this key may act on ``queue`` at all (its queue or that queue's DLQ)."""
        return self.queue is None or queue in (self.queue, rules.dlq_name(self.queue))

    def allows(self, need: Need, queue: str | None) -> bool:
        """Whether this key may do what needs ``need`` on ``queue`` (None: no queue — only an
        unbound key may)."""
        if queue is None:
            if self.queue is not None and need != "read":
                return False
        elif not self.reaches(queue):
            return False
        elif need == "produce" and rules.is_dlq(queue):
            need = "admin"  # dead-lettering fills a DLQ; only an operator enqueues into one
        return need == "read" or need in self.scopes or "admin" in self.scopes

    @classmethod
    def of(cls, row: KeyRow) -> Principal:
        """The principal of a stored key."""
        return cls(row.id, frozenset(row.scopes.split(",")), row.queue)


def view(row: KeyRow) -> models.ApiKey:
    """A key as listed (never the key or its hash)."""
    return models.ApiKey(
        id=row.id, name=row.name, queue=row.queue, scopes=row.scopes.split(","),
        created_at=row.created_at, last_used_at=row.last_used_at,
        sqs=row.hash.startswith(SQS_SECRET),
    )


def new_row(spec: models.KeyCreate, key_id: str, key_hash: str) -> KeyRow:
    """The row of a new key (``created_at`` is set when it is stored)."""
    return KeyRow(
        id=key_id, name=spec.name, queue=spec.queue, scopes=",".join(sorted(spec.scopes)),
        hash=key_hash, created_at=0, last_used_at=None,
    )


# --- operations ---------------------------------------------------------------------------------
class CreateKey(Op[models.ApiKey]):
    """Store a new key's row; a bound key's queue must exist."""

    __slots__ = ("row",)

    def __init__(self, row: KeyRow) -> None:
        self.row = row

    def run(self, tx: Tx, now: int) -> models.ApiKey:
        if self.row.queue is not None:
            queue_row(tx, self.row.queue)
        row = self.row._replace(created_at=now)
        tx.insert_key(row)
        tx.set_auth_required(True)  # from now on, whatever becomes of the keys
        return view(row)


class RevokeKey(Op[None]):
    """Remove a key: it stops working at once here, and within the callers' cache lifetime
    elsewhere."""

    __slots__ = ("key_id",)

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id

    def run(self, tx: Tx, now: int) -> None:
        if not tx.delete_key(self.key_id):
            raise errors.NotFound(f"no API key with id '{self.key_id}'")


class OpenAccess(Op[None]):
    """Stop enforcing API keys on a database that has none left (the owner of the file's
    explicit act: a server then serves everyone who can reach it, on loopback)."""

    __slots__ = ()

    def run(self, tx: Tx, now: int) -> None:
        if tx.list_keys():
            raise errors.ValidationError(
                "the database still has API keys: revoke them first (`sqew keys list`)"
            )
        tx.set_auth_required(False)


class TouchKeys(Op[None]):
    """Record when keys were last used (batched by the caller: never a write per request)."""

    __slots__ = ("used",)

    def __init__(self, used: Sequence[tuple[str, int]]) -> None:
        self.used = used

    def run(self, tx: Tx, now: int) -> None:
        tx.touch_keys(self.used)
