"""Who is calling (``Authenticator``): an API key verified once with argon2, then cached.

**Cost.** A key is verified with argon2 once (on the database threads, a few at a time, the
clean ones first: ``sqew.server.verifications``) and then kept in a bounded LRU
cache keyed by ``keys.digest(key)`` with the stored hash. A cached key older than ``CONFIRM_S``
is re-confirmed with a primary-key read (the row must still be there with the same hash; no
argon2), so a key revoked anywhere stops working within a second in every process; a key in
use is re-confirmed in the background from ``REFRESH_S`` on, so that requests do not wait for
it. Concurrent requests with the same key share one verification or confirmation
(``sqew.server.single_flight``). ``last_used_at`` is written in batches by a background task,
at most once a minute per key (``sqew.server.key_uses``). The header is read by
``sqew.server.credentials``.

**Failed attempts** (no key, a malformed, unknown, wrong or revoked one) are counted per
client (``attempts.client_of``: an address, IPv6 by /64), a leaky bucket of
``auth_failures_per_minute`` (``attempts.FailureLimit``); beyond it the client is answered 429
``RateLimited`` before any key work, whatever key it sends. Wrong secrets for a real key id
count per key id too: beyond the allowance, that id is answered 429 before any argon2 work
unless the key is cached (its holders keep working here while its id is attacked). A key to
verify counts as failed from the start, for its client and its id, and is taken back once
valid: neither has more verifications under way than it may fail.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from litestar.handlers import BaseRouteHandler
from litestar.types import Scope

from sqew import errors
from sqew.backends.base import KeyRow
from sqew.core import keys
from sqew.server import preflight
from sqew.server.attempts import FailureLimit, client_of
from sqew.server.credentials import MISSING, WRONG, credentials_of, well_formed_key
from sqew.server.key_uses import KeyUses
from sqew.server.metrics import Metrics
from sqew.server.route_access import Access
from sqew.server.service_handle import ServiceHandle
from sqew.server.single_flight import SingleFlight
from sqew.server.verifications import Verifications
from sqew.settings import Settings

log = logging.getLogger("sqew.server")

CONFIRM_S = 1.0
"""A cached key older than this is confirmed again with its row (a revocation's reach)."""
KEYS_CHECK_S = 1.0
"""How long 'a key exists (or not)' is believed before the database is asked again."""
REFRESH_S = 0.8
"""Past this age a key in use (or the 'a key exists' answer) is read again in the background,
so that under steady traffic no request waits for a confirmation."""
TOUCH_EVERY_S = 60.0
"""A key's ``last_used_at`` is written at most this often (per process)."""

_AUTHORIZATION = b"authorization"
_SQS = b"sqs:"  # an SQS key's cache entry: this, then its access key id


@dataclass(slots=True)
class _Entry:
    """A verified key in the cache."""

    principal: keys.Principal
    hash: str  # the stored hash it was verified against: a new row under the id is not it
    confirmed: float  # time.monotonic() when its row was last read (before the read)
    touched: float = -math.inf  # time.monotonic() when its use was last queued for recording


class Authenticator:
    """Who is calling, per request, for one app (one per process).

    Args:
        settings: the server settings (which keys are required, the cache, the limits).
        metrics: the app's metrics (verifications are counted).
        serving: the service once started, and the database threads (argon2 runs there).
    """

    def __init__(self, settings: Settings, metrics: Metrics, serving: ServiceHandle) -> None:
        s = settings
        self._serving = serving
        # Beyond loopback without --insecure, keys are required whatever the database says:
        # the refusal to start open holds while serving too (keys switched off on the file).
        self._exposed = not s.insecure and not preflight.is_loopback(s.host)
        self._required = s.require_auth or self._exposed
        self._metrics: Access = "admin" if s.metrics_auth else "open"
        self._size = s.auth_cache_size
        self._cache: OrderedDict[bytes, _Entry] = OrderedDict()
        self._once: SingleFlight[_Entry | None] = SingleFlight()  # per key digest
        self._once_any: SingleFlight[bool] = SingleFlight()
        self._verifications = Verifications(metrics)
        self._failures = FailureLimit(s.auth_failures_per_minute)  # per client
        self._by_key = FailureLimit(s.auth_failures_per_minute)  # per key id (real ones)
        self._any: bool | None = None  # None: not read yet
        self._checked = -math.inf  # when _any was last read (monotonic)
        self._changes = 0  # keys minted or revoked in this process: reads begun before are stale
        self.uses = KeyUses(serving)
        """When each key was last used, recorded in batches."""

    # --- per request ----------------------------------------------------------------------------
    def need_of(self, handler: BaseRouteHandler) -> Access:
        """What ``handler`` needs (see the module's docstring)."""
        access: Access | None = handler.opt.get("access")
        if access == "metrics":
            return self._metrics
        if access is None:  # Litestar's own handlers: its OPTIONS answers are harmless
            return "open" if handler.http_methods == {"OPTIONS"} else "admin"  # type: ignore[attr-defined]
        return access

    async def enforced(self) -> bool:
        """Whether API keys are enforced now: what ``authenticate`` goes by."""
        now = time.monotonic()
        if self._required:
            return True
        return bool(self._any) if now - self._checked < REFRESH_S else (
            await self._keys_exist(now))

    async def authenticate(self, scope: Scope) -> keys.Principal | None:
        """The principal of the request's key; None when keys are not enforced.

        Raises:
            sqew.errors.RateLimited: too many failed attempts from the client, or with the
                key's id.
            sqew.errors.Unauthorized: no key, or not a valid one.
        """
        # The common cases (keys known to be enforced or not, a key confirmed recently) take
        # no await and no call they can spare: this runs before every request.
        now = time.monotonic()
        if not self._required and (
            not self._any if now - self._checked < REFRESH_S else not await self._keys_exist(now)
        ):
            return None
        client = scope.get("client")
        address = client_of(client[0]) if client else ""
        wait = self._failures.wait(address, now)
        if wait is not None:
            raise errors.RateLimited(
                "too many failed API key attempts from this address; retry after "
                f"{math.ceil(wait)} s", retry_after=wait,
            )
        values = [v for k, v in scope["headers"] if k == _AUTHORIZATION]
        if not values:  # counted too: anonymous floods are limited like guessing
            self._failed(address)
            raise errors.Unauthorized(MISSING)
        try:
            credentials = credentials_of(values)
            # The SHA-256 of the key's ASCII bytes is keys.digest(key); hashing the bytes as
            # they came spares a cached key the decoding and the pattern match (only
            # well-formed keys are ever cached, so a hit is one).
            digest = hashlib.sha256(credentials).digest()
            entry = self._cache.get(digest)
            if entry is not None and now - entry.confirmed < REFRESH_S:
                self._cache.move_to_end(digest)
                if now - entry.touched >= TOUCH_EVERY_S:
                    self._note_use(entry, now)
                return entry.principal
            key = well_formed_key(credentials) if entry is None else ""
        except errors.Unauthorized:
            self._failed(address)
            raise
        if entry is not None:
            got = await self._confirmed(digest, entry, now)
            if got is None:
                self._failed(address)
        else:
            self._check_key_id(key, now)
            got = await self._verified(digest, key, address, now)
        if got is None:
            raise errors.Unauthorized(WRONG)
        if now - got.touched >= TOUCH_EVERY_S:
            self._note_use(got, now)
        return got.principal

    async def _confirmed(self, digest: bytes, entry: _Entry, now: float) -> _Entry | None:
        """A cached key due for confirmation: still valid (None: revoked)."""
        self._cache.move_to_end(digest)
        confirm = functools.partial(self._confirm, digest, entry)
        if now - entry.confirmed < CONFIRM_S:  # confirm it ahead: no request waits for it
            self._once.start(digest, confirm)
            return entry
        return await self._once(digest, confirm)

    def _check_key_id(self, key: str, now: float) -> None:
        """Refuse a key to verify whose id failed too often lately (whatever the client)."""
        key_id = keys.key_id_of(key)
        wait = None if key_id is None else self._by_key.wait(key_id, now)
        if wait is not None:
            raise errors.RateLimited(
                f"too many failed attempts with API key {key_id}; retry after "
                f"{math.ceil(wait)} s", retry_after=wait,
            )

    async def _verified(self, digest: bytes, key: str, address: str, now: float
                        ) -> _Entry | None:
        """A well-formed key not in the cache, verified (None: not a valid key).

        The attempt counts as failed from the start, and is taken back once the key proves
        valid: counted only after its argon2 verification, an address sending many wrong
        keys at once (one per connection) had every one of them verified before the first
        failure was counted; so it has no more verifications under way than it may fail.
        """
        self._failures.fail(address, now)
        got = await self._once(digest, functools.partial(self._verify, digest, key, address))
        if got is not None:
            self._failures.forgive(address, time.monotonic())
        elif self._failures.wait(address, time.monotonic()) is not None:
            self._warn(address)
        return got

    def _failed(self, address: str) -> None:
        """Count a failed attempt of ``address`` (a warning when that uses up its allowance)."""
        if self._failures.fail(address, time.monotonic()):
            self._warn(address)

    @staticmethod
    def _warn(address: str) -> None:
        log.warning("too many failed API key attempts from %s: answering 429 for a while",
                    address or "an unknown address")

    async def _verify(self, digest: bytes, key: str, address: str) -> _Entry | None:
        """A key not in the cache: its row, then argon2 on the database threads (counted as
        a failure of its key id until it proves valid)."""
        key_id = keys.key_id_of(key)
        assert key_id is not None  # well_formed_key checked the form
        row, read_at = await self._row(key_id)
        changes = self._changes
        if row is None:
            return None
        now = time.monotonic()
        self._check_key_id(key, now)  # again: checked and counted with no await in between
        # The client's level holds this attempt already: more is a failure still counted.
        suspect = (self._failures.level(address, now) > 1.0
                   or self._by_key.level(key_id, now) > 0.0)
        self._by_key.fail(key_id, now)
        verify = functools.partial(keys.verify, row.hash, key)
        check = functools.partial(self._serving.offload, verify)
        if not await self._verifications.verify(check, suspect=suspect):
            return None
        self._by_key.forgive(key_id, time.monotonic())
        if changes != self._changes:  # revoked here meanwhile, perhaps: read the row again
            again, read_at = await self._row(key_id)
            if again is None or not hmac.compare_digest(again.hash, row.hash):
                return None
        return self._keep(digest, row, read_at, -math.inf)

    async def _confirm(self, digest: bytes, entry: _Entry) -> _Entry | None:
        """A cached key whose row was read more than CONFIRM_S ago: is it still there?"""
        row, read_at = await self._row(entry.principal.key_id)
        if row is None or not hmac.compare_digest(row.hash, entry.hash):
            self._cache.pop(digest, None)
            return None
        return self._keep(digest, row, read_at, entry.touched)

    async def _row(self, key_id: str) -> tuple[KeyRow | None, float]:
        """The key's row, read after every mint or revocation this process has begun."""
        while True:
            changes, read_at = self._changes, time.monotonic()
            row = await self._serving.service.find_key(key_id)
            if changes == self._changes:
                return row, read_at

    def _keep(self, digest: bytes, row: KeyRow, read_at: float, touched: float) -> _Entry:
        entry = _Entry(keys.Principal.of(row), row.hash, read_at, touched)
        self._cache[digest] = entry
        self._cache.move_to_end(digest)
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return entry

    async def _keys_exist(self, now: float) -> bool:
        """Whether keys are enforced (a key exists), as read at most KEYS_CHECK_S ago; read
        again in the background from REFRESH_S on."""
        if now - self._checked < KEYS_CHECK_S:
            self._once_any.start(None, self._check)
            return bool(self._any)
        return await self._once_any(None, self._check)

    async def _check(self) -> bool:
        """Whether keys are enforced, from the database (a change is logged)."""
        while True:
            changes, read_at = self._changes, time.monotonic()
            found = await self._serving.service.auth_required()
            if changes == self._changes:
                break
        if found != self._any:
            _log_auth_change(found, was=self._any)
        self._any, self._checked = found, read_at
        return found

    def _note_use(self, entry: _Entry, now: float) -> None:
        """Queue the key's use for recording (called at most once per TOUCH_EVERY_S)."""
        entry.touched = now
        self.uses.note(entry.principal.key_id)

    # --- SQS keys (SigV4 signatures: sqew.server.sqs_auth) -------------------------------------
    def check_client(self, address: str, key_id: str | None = None) -> None:
        """Refuse a client (or an SQS key id not cached) that failed too often lately, as a
        bearer key's attempt is refused.

        Raises:
            sqew.errors.RateLimited: beyond the allowance.
        """
        now = time.monotonic()
        wait = self._failures.wait(address, now)
        if wait is None and key_id is not None and _SQS + key_id.encode() not in self._cache:
            wait = self._by_key.wait(key_id, now)
        if wait is not None:
            raise errors.RateLimited("too many failed attempts to authenticate; retry after "
                                     f"{math.ceil(wait)} s", retry_after=wait)

    def failed(self, address: str, key_id: str | None = None) -> None:
        """Count a failed attempt of ``address`` (and against ``key_id``, a real key's)."""
        self._failed(address)
        if key_id is not None:
            self._by_key.fail(key_id, time.monotonic())

    async def sqs_key(self, key_id: str) -> tuple[keys.Principal, str] | None:
        """The principal and secret of the SQS key ``key_id`` (None: no such key), cached and
        confirmed as bearer keys are, so a revoked key stops working within a second."""
        now = time.monotonic()
        digest = _SQS + key_id.encode()  # never a SHA-256 (32 bytes): no bearer key's entry
        entry = self._cache.get(digest)
        got: _Entry | None
        if entry is None:
            row, read_at = await self._row(key_id)
            ok = row is not None and keys.sqs_secret(row) is not None
            got = self._keep(digest, row, read_at, -math.inf) if row and ok else None
        elif now - entry.confirmed < REFRESH_S:
            self._cache.move_to_end(digest)
            got = entry
        else:
            got = await self._confirmed(digest, entry, now)
        if got is None:
            return None
        if now - got.touched >= TOUCH_EVERY_S:
            self._note_use(got, now)
        return got.principal, got.hash[len(keys.SQS_SECRET):]

    # --- keys minted and revoked here -----------------------------------------------------------
    def minted(self) -> None:
        """A key was stored by this process: enforce keys from now on."""
        self._changes += 1
        if self._any is not True:
            _log_auth_change(True, was=self._any)
        self._any, self._checked = True, time.monotonic()

    def revoked(self, key_id: str) -> None:
        """A key was removed by this process: it stops working here now."""
        self._forget(lambda p: p.key_id == key_id)

    def queue_deleted(self, queue: str) -> None:
        """A queue was deleted by this process, and with it the keys bound to it: they stop
        working here now (a new queue of the same name must not be reachable with them)."""
        self._forget(lambda p: p.queue == queue)

    def _forget(self, gone: Callable[[keys.Principal], bool]) -> None:
        self._changes += 1  # a read of a key begun before is stale
        self._checked = -math.inf  # it may have been the last one
        for digest in [d for d, e in self._cache.items() if gone(e.principal)]:
            del self._cache[digest]

    # --- recording uses -------------------------------------------------------------------------
    def start(self) -> None:
        """Start recording uses in the background (on the server's loop, after startup)."""
        self.uses.start()

    async def stop(self) -> None:
        """Stop recording uses in the background, and record what is left."""
        await self.uses.stop()


def _log_auth_change(required: bool, was: bool | None) -> None:
    """Say that keys are now enforced, or no longer (not at a process's first read: what it
    serves with is in its start log)."""
    if was is None:
        return
    if required:
        log.info("API keys are required on this database from now on",
                 extra={"event": "auth_required"})
    else:
        log.warning("API keys are not required on this database: anyone who can reach this "
                    "server may use it (a server beyond loopback without --insecure still "
                    "requires them)", extra={"event": "auth_not_required"})
