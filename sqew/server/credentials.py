"""The API key a request presents: its one ``Authorization: Bearer <key>`` header, read
without echoing the key in any error (each refusal an ``Unauthorized``)."""

from __future__ import annotations

from sqew import errors
from sqew.core import keys

MISSING = "this server requires an API key: send `Authorization: Bearer <key>`"
SCHEME = "the Authorization header must be `Bearer <key>`"
MALFORMED = "the Authorization header holds no well-formed API key (sqew_<id>_<secret>)"
WRONG = "the API key is not valid (unknown, wrong or revoked)"


def credentials_of(values: list[bytes]) -> bytes:
    """What follows ``Bearer`` in the one Authorization header (never echoed in errors)."""
    if len(values) != 1:
        raise errors.Unauthorized(f"send one Authorization header, not {len(values)}")
    scheme, _, credentials = values[0].strip().partition(b" ")
    if scheme.lower() != b"bearer":
        raise errors.Unauthorized(SCHEME)
    return credentials.strip()


def well_formed_key(credentials: bytes) -> str:
    """The well-formed key ``credentials`` hold (Unauthorized if they hold none)."""
    try:
        key = credentials.decode("ascii")
    except UnicodeDecodeError:
        raise errors.Unauthorized(MALFORMED) from None
    if keys.key_id_of(key) is None:
        raise errors.Unauthorized(MALFORMED)
    return key
