"""HMAC signing (docs/rest.md, "Signed enqueues"): signed enqueues, and the signature of a
leased message.

A queue with an ``hmac_secret`` accepts an enqueue over HTTP only with a header

    X-Sqew-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>

whose ``t`` is within ``TOLERANCE_S`` of the service's clock. The body is the exact bytes of the
request (a batch ``{"messages": [...]}`` is signed as one body). A sender may give several
``v1=`` (signed with an old and a new secret while a queue's secret is being changed): one
match is enough.

A message leased from such a queue carries ``signature`` = hex HMAC-SHA256(secret, payload
text as stored), so a consumer can check it end to end (``verify_signature``).

Every failure is ``errors.InvalidSignature`` (401) saying which check failed; no message ever
holds the secret or the digest the server expected.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from sqew import errors, models, payloads

HEADER = "X-Sqew-Signature"
"""The request header of a signed enqueue."""
TOLERANCE_S = 300
"""How far (seconds) a signature's ``t`` may be from the service's clock, either way."""
MAX_SIGNATURES = models.SIGNATURE_MAX_V1
"""Most ``v1=`` elements one header may hold (more is malformed)."""

_FORMAT = "t=<unix seconds>,v1=<64 lowercase hex digits>"
# The grammar, as the OpenAPI document states it (models.SIGNATURE_PATTERN); the rest of this
# module's patterns only say which part of a header that breaks it is wrong.
_HEADER = re.compile(models.SIGNATURE_PATTERN)
_T = re.compile(r"t=(0|[1-9][0-9]{0,11})")  # up to year ~33658: a bounded int() always
_V1 = re.compile(r"v1=([0-9a-f]{64})")


class Proof(NamedTuple):
    """What a transport gives an enqueue to check against the queue's secret.

    Attributes:
        header: the ``X-Sqew-Signature`` header as received, None when there was none
            (repeated headers joined with ``,``, as HTTP allows, which is malformed).
        body: the exact raw request body the signature covers.
    """

    header: str | None
    body: bytes


def _mac(secret: str, data: bytes) -> str:
    return hmac.new(secret.encode(), data, hashlib.sha256).hexdigest()


def sign(secret: str, payload: str) -> str:
    """The ``signature`` of a leased message: hex HMAC-SHA256 of its payload text."""
    return _mac(secret, payload.encode())


def digest(secret: str, timestamp: str | int, body: bytes) -> str:
    """The ``v1`` of a request: hex HMAC-SHA256(secret, ``"<t>." + body``)."""
    return _mac(secret, str(timestamp).encode() + b"." + body)


def header(secret: str | Sequence[str], body: bytes, timestamp: int | None = None) -> str:
    """The ``X-Sqew-Signature`` value signing ``body`` now (or at ``timestamp``).

    Args:
        secret: the queue's ``hmac_secret``, or several (one ``v1=`` each: while a queue's
            secret changes, a request signed with both passes before and after).
        body: the exact request body that will be sent.
        timestamp: unix seconds (default: now, by the system clock).
    """
    t = int(time.time()) if timestamp is None else timestamp
    secrets = [secret] if isinstance(secret, str) else list(secret)
    return ",".join([f"t={t}", *(f"v1={digest(s, t, body)}" for s in secrets)])


def parse(value: str) -> tuple[str, list[str]]:
    """The ``t`` (as written) and the ``v1`` digests of a header value.

    Raises:
        sqew.errors.InvalidSignature: anything but ``t=`` first, then 1 to ``MAX_SIGNATURES``
            ``v1=`` elements, comma-separated without spaces (no other element, no repeats of
            ``t``, ``t`` in decimal without leading zeros, each ``v1`` 64 lowercase hex digits).
    """
    if _HEADER.match(value) is None:
        raise _malformed(_fault(value.split(",")))
    t, *v1 = (part.partition("=")[2] for part in value.split(","))
    return t, v1


def check_form(value: str) -> None:
    """Refuse a header that is not of the form a signature has, whatever the queue.

    Raises:
        sqew.errors.InvalidSignature: as ``parse``.
    """
    parse(value)


def _fault(parts: list[str]) -> str:
    """What is wrong with a header's elements, in words (it breaks the grammar)."""
    for part in parts:
        if _V1.fullmatch(part) is None and _T.fullmatch(part) is None:
            return "an element is not t=<unix seconds> or v1=<64 lowercase hex digits>"
    times = sum(_T.fullmatch(part) is not None for part in parts)
    if times == 0:
        return "it has no t=<unix seconds>"
    if times > 1:
        return "t= is given more than once"
    if _T.fullmatch(parts[0]) is None:
        return "t=<unix seconds> must come first"
    return f"it needs 1 to {MAX_SIGNATURES} v1= elements, not {len(parts) - 1}"


def verify(secret: str, proof: Proof, now_ms: int, queue: str) -> None:
    """Check a signed enqueue to ``queue`` against its secret at the service's time ``now_ms``.

    Raises:
        sqew.errors.InvalidSignature: the header is missing or malformed, its ``t`` more than
            ``TOLERANCE_S`` before or after ``now_ms``, or no ``v1`` matches the body.
    """
    if proof.header is None:
        raise _invalid("missing", f"queue '{queue}' takes signed enqueues only: send an "
                       f"{HEADER} header ({_FORMAT}, the HMAC-SHA256 of \"<t>.\" + the body)")
    t, candidates = parse(proof.header)
    now_s = now_ms // 1000
    skew = int(t) - now_s
    if skew < -TOLERANCE_S:
        raise _invalid("stale", f"the {HEADER} timestamp is stale: {-skew} s before the "
                       f"server's time (t={now_s}); at most {TOLERANCE_S} s is allowed")
    if skew > TOLERANCE_S:
        raise _invalid("future", f"the {HEADER} timestamp is from the future: {skew} s after "
                       f"the server's time (t={now_s}); at most {TOLERANCE_S} s is allowed")
    expected = digest(secret, t, proof.body).encode()
    # Every candidate is compared, in constant time each: how many matched is not observable.
    matched = False
    for candidate in candidates:
        matched |= hmac.compare_digest(expected, candidate.encode())
    if not matched:
        raise _invalid("mismatch", f"the {HEADER} header does not match the request: sign "
                       "\"<t>.\" + the exact body sent with the queue's hmac_secret")


def verify_signature(message: Any, secret: str) -> bool:
    """Whether a leased message's ``signature`` is its payload's, under ``secret``.

    The signature covers the payload text as the producer sent it (and the queue stored it).
    A ``sqew.Client``'s leased messages keep that text beside the decoded ``payload``;
    a message built otherwise (say decoded from ``--json`` output) is checked against its
    payload encoded again as compact JSON, which matches only if the producer sent it so
    (``sqew.Client`` and the CLI do). The comparison takes constant time.

    Args:
        message: a ``sqew.LeasedMessage`` from ``Client.poll``, anything with
            ``signature`` and ``payload``, or a mapping with those keys (a leased message of
            the REST API's JSON, decoded: its payload is checked encoded as compact JSON).
        secret: the queue's ``hmac_secret``.

    Returns:
        False when the message carries no signature (its queue has no secret) or it does
        not match.
    """
    if isinstance(message, Mapping):  # a leased message as JSON, decoded (a dict)
        signature = message.get("signature")
        text = payloads.compact(message.get("payload"))
    else:
        signature = getattr(message, "signature", None)
        text = payloads.text_of(message)
    if not isinstance(signature, str):
        return False
    expected = sign(secret, text)
    return hmac.compare_digest(expected.encode(), signature.encode())


def _invalid(reason: str, message: str) -> errors.InvalidSignature:
    """The error, its ``details`` naming the header and the failed check in one word
    (``missing``, ``malformed``, ``stale``, ``future``, ``mismatch``) for programs."""
    return errors.InvalidSignature(
        message, details=[{"field": HEADER, "in": "header", "message": reason}]
    )


def _malformed(why: str) -> errors.InvalidSignature:
    return _invalid("malformed", f"malformed {HEADER} header: {why}; expected {_FORMAT}")
