"""An SQS message in sqew's storage: the body as the payload, the rest in one reserved attribute.

A queue is the same queue over REST and SQS (docs/sqs.md). A body that is a JSON document is
stored as the payload itself, exactly as sent, so a REST consumer reads it as that JSON value;
any other body is stored as a JSON string, so REST reads it as a string. What sqew's messages
have no field for (that the body was text, typed message attributes, system attributes such as
``AWSTraceHeader``, a ``MessageGroupId``, a FIFO message's deduplication id) is kept as JSON
in the attribute ``sqew.sqs``, present only when there is something to keep. Read back over
SQS, a message gives its payload's JSON text as the body (or the text it was sent as), sqew's
plain attributes as ``String`` message attributes, and what the reserved attribute kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from sqew import errors, jsonlimits, models
from sqew.sqs.typed import Attribute

RESERVED = "sqew.sqs"
"""The attribute that keeps what sqew's messages have no field for (reserved: docs/sqs.md)."""

_decode = msgspec.json.decode
_encode = msgspec.json.encode


@dataclass
class Parts:
    """An SQS message's parts, as sent or as read back."""

    body: str
    attributes: dict[str, Attribute] = field(default_factory=dict)
    system: dict[str, Attribute] = field(default_factory=dict)
    group_id: str | None = None
    dedup_id: str | None = None


def to_message(
    parts: Parts, delay_ms: int, max_depth: int, idempotency_key: str | None = None,
) -> models.MessageIn:
    """The sqew message that stores ``parts``, delivered ``delay_ms`` from now, under
    ``idempotency_key`` if given; a JSON body is kept as JSON when REST clients can read it
    (no deeper than ``max_depth``, the server's ``max_json_depth``, and no number beyond every
    decoder's range: ``sqew.jsonlimits``)."""
    raw = parts.body.encode()
    kept: dict[str, Any] = {}
    if readable_json(raw, max_depth):
        payload = msgspec.Raw(raw)
    else:
        payload = msgspec.Raw(_encode(parts.body))
        kept["text"] = True
    if parts.attributes:
        kept["attrs"] = {name: a.to_stored() for name, a in parts.attributes.items()}
    if parts.system:
        kept["sys"] = {name: a.to_stored() for name, a in parts.system.items()}
    if parts.group_id is not None:
        kept["group"] = parts.group_id
    if parts.dedup_id is not None:
        kept["dedup"] = parts.dedup_id
    attributes = {RESERVED: _encode(kept).decode()} if kept else None
    return models.MessageIn(payload=payload, delay_ms=delay_ms, attributes=attributes,
                            idempotency_key=idempotency_key)


def readable_json(raw: bytes, max_depth: int) -> bool:
    """Whether ``raw`` is a JSON document that REST's enqueue would take as a payload."""
    # (no more brackets than ``max_depth``, in strings or not: not that deep, nothing to scan)
    if raw.count(b"[") + raw.count(b"{") > max_depth and jsonlimits.depth(raw) > max_depth:
        return False
    try:
        _decode(raw)
        jsonlimits.check_numbers(raw)
    except (msgspec.DecodeError, errors.ValidationError):
        return False
    return True


def from_message(message: models.Message) -> Parts:
    """The SQS parts of a stored message, whoever enqueued it (REST or SQS)."""
    plain = dict(message.attributes)
    kept = _kept(plain.pop(RESERVED, None))
    text = bytes(message.payload).decode()
    body = text
    if kept.get("text") is True:
        try:
            decoded = _decode(text)
        except msgspec.DecodeError:
            decoded = None
        if isinstance(decoded, str):
            body = decoded
    attributes = {name: Attribute("String", text=value) for name, value in plain.items()}
    attributes.update(_typed(kept.get("attrs")))
    group, dedup = kept.get("group"), kept.get("dedup")
    return Parts(body, attributes, _typed(kept.get("sys")),
                 group if isinstance(group, str) else None,
                 dedup if isinstance(dedup, str) else None)


def _kept(text: str | None) -> dict[str, Any]:
    """The reserved attribute's JSON object; empty when absent or not sqew's own (a REST
    producer may have set the attribute to anything)."""
    if text is None:
        return {}
    try:
        kept = _decode(text)
    except msgspec.DecodeError:
        return {}
    return kept if isinstance(kept, dict) else {}


def _typed(stored: Any) -> dict[str, Attribute]:
    if not isinstance(stored, dict):
        return {}
    out = {}
    for name, value in stored.items():
        attribute = Attribute.from_stored(value)
        if attribute is not None:
            out[name] = attribute
    return out
