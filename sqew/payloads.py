"""A message's payload as it was sent: the exact JSON text, kept beside the decoded value.

The server stores a payload as the text the producer sent and answers with that text. A
client decodes it for its user (``message.payload``) and keeps the text too (``keep_text``:
an attribute that is not a field, never encoded), so that whatever shows the payload as data —
``--json``, an export, a Spark read, ``sqew.verify_signature`` — shows the bytes that were sent
(``{"a": 2.50}`` stays ``{"a": 2.50}``, never ``{"a":2.5}``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import msgspec

from sqew.models.typeinfo import build_now

M = TypeVar("M")
_TEXT = "_sqew_payload_text"
_encode = msgspec.json.Encoder().encode


class RawPayload(msgspec.Struct):
    """A message (or an enqueue's body) read again for its payload's exact text, the other
    fields ignored."""

    payload: msgspec.Raw = msgspec.Raw(b"")


class RawPayloads(msgspec.Struct):
    """An answer of messages (or a batch enqueue's body) read again for the payloads' text."""

    messages: list[RawPayload] = []


build_now([RawPayloads])  # threads share a Client (see models.typeinfo)


def keep_text(message: Any, text: str) -> None:
    """Keep ``text`` as ``message``'s payload as sent, beside its decoded ``payload``."""
    message.__dict__[_TEXT] = text


def text_of(message: Any) -> str:
    """The JSON text of a message's payload as sent: the kept text, the raw text of a payload
    not decoded, else (a message made by hand) its value encoded compactly."""
    kept = getattr(message, "__dict__", {}).get(_TEXT)
    if isinstance(kept, str):
        return kept
    return compact(message.payload)


def compact(payload: Any) -> str:
    """A payload's JSON text: raw text as it is, a decoded value encoded compactly."""
    if isinstance(payload, msgspec.Raw):
        return bytes(payload).decode()
    return _encode(payload).decode()


def as_sent(messages: Iterable[M]) -> list[M]:
    """Copies of ``messages`` whose ``payload`` is the text as sent (``msgspec.Raw``): encoded,
    they are what the REST API answered."""
    return [
        msgspec.structs.replace(m, payload=msgspec.Raw(text_of(m).encode()))  # type: ignore[type-var]
        for m in messages
    ]
