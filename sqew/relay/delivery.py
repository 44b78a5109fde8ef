"""One delivery of the relay: the POST a message becomes, and what its answer means
(docs/consumers.md, "The relay's contract").

The body is the payload's JSON text exactly as the producer sent it. Headers:

- ``Content-Type: application/json`` (every sqew payload is a JSON value);
- ``X-Sqew-Message-Id``, ``X-Sqew-Attempts`` (this delivery's attempt, from 1) and
  ``X-Sqew-Enqueued-At`` (unix milliseconds, as the REST API's ``enqueued_at``);
- ``X-Sqew-Attr-<name>: <value>`` per attribute, name and value percent-encoded as UTF-8
  (RFC 3986: every byte but letters, digits and ``-._~`` becomes ``%XX``), so any attribute
  travels in a valid header and ``urllib.parse.unquote`` gives it back;
- ``traceparent`` (and ``tracestate``): the producer's trace context kept with the message,
  else a new trace;
- on a queue with an ``hmac_secret``, ``X-Sqew-Signature: t=<unix seconds>,v1=<hex
  HMAC-SHA256(secret, "<t>." + body)>``: the signed-enqueue scheme (``verify_delivery``).
"""

from __future__ import annotations

import email.utils
import secrets
import time
from collections.abc import Mapping
from urllib.parse import quote

import httpx

from sqew import errors, models, payloads
from sqew.core import signing
from sqew.worker import Reject

ATTR_PREFIX = "X-Sqew-Attr-"
"""The header of attribute ``name`` is ``ATTR_PREFIX + quote(name)``."""

RETRY_AFTER_MAX_MS = models.MAX_TTL_MS
"""The longest ``Retry-After`` honoured: a nack's ``delay_ms`` cannot be longer."""


class Unsigned(Exception):
    """A message of a signed queue, and no ``hmac_secret`` to sign its delivery with."""


def encode(text: str) -> str:
    """``text`` as a header-safe token (percent-encoded UTF-8, only ``-._~`` kept besides
    letters and digits)."""
    return quote(text, safe="")


def request_headers(m: models.LeasedMessage, body: bytes,
                    hmac_secret: str | None) -> dict[str, str]:
    """The headers of ``m``'s delivery with ``body`` (its payload's text).

    Raises:
        Unsigned: ``m`` carries a signature (its queue has a secret) and ``hmac_secret`` is None.
        sqew.Reject: ``m``'s signature does not match ``hmac_secret`` (an altered or forged
            message is not vouched for).
    """
    headers = {
        "Content-Type": "application/json",
        "X-Sqew-Message-Id": str(m.id),
        "X-Sqew-Attempts": str(m.attempts),
        "X-Sqew-Enqueued-At": str(m.enqueued_at),
    }
    for name, value in m.attributes.items():
        headers[ATTR_PREFIX + encode(name)] = encode(value)
    if isinstance(m.traceparent, str):
        headers["traceparent"] = m.traceparent
        if isinstance(m.tracestate, str):
            headers["tracestate"] = m.tracestate
    else:
        headers["traceparent"] = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    if isinstance(m.signature, str):
        if hmac_secret is None:
            raise Unsigned(f"queue '{m.queue}' signs its messages: give the relay its "
                           "hmac_secret (--hmac-secret, SQEW_HMAC_SECRET) to sign deliveries")
        if not signing.verify_signature(m, hmac_secret):
            raise Reject("its signature does not match the hmac_secret: not delivered")
        headers[signing.HEADER] = signing.header(hmac_secret, body)
    return headers


def body_of(m: models.LeasedMessage) -> bytes:
    """The payload's JSON text as the producer sent it, as bytes."""
    return payloads.text_of(m).encode()


def retry_after_ms(response: httpx.Response, now: float | None = None) -> int | None:
    """The answer's ``Retry-After`` in milliseconds (seconds or an HTTP date), clamped to
    0 … ``RETRY_AFTER_MAX_MS``; None when it has none or it is unreadable."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        seconds = float(int(value[:12]))  # (more digits than that are clamped below anyway)
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT, whatever it says
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return int(max(0.0, min(seconds * 1000, RETRY_AFTER_MAX_MS)))


def verify_delivery(headers: Mapping[str, str], body: bytes, hmac_secret: str,
                    now: float | None = None) -> bool:
    """Whether a delivery's ``X-Sqew-Signature`` signs ``body`` with ``hmac_secret`` within
    300 s of ``now`` (the receiver's side; a constant-time comparison).

    Args:
        headers: the request's headers (looked up as ``X-Sqew-Signature`` or in lower case).
        body: the exact bytes of the request body.
        hmac_secret: the queue's secret.
        now: unix seconds (default: the system clock).
    """
    value = headers.get(signing.HEADER) or headers.get(signing.HEADER.lower())
    if not value:
        return False
    now_ms = int((time.time() if now is None else now) * 1000)
    try:
        signing.verify(hmac_secret, signing.Proof(value, body), now_ms, "relay")
    except errors.InvalidSignature:
        return False
    return True

