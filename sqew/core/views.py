"""Rows → wire models. Payloads stay raw JSON text (``msgspec.Raw``) all the way out."""

from __future__ import annotations

from typing import Any

import msgspec

from sqew import models, queue_settings
from sqew.backends.base import ClaimQueue, LiveCounts, MessageRow, QueueCounts, QueueRow
from sqew.core import rules, signing

_decode_attrs = msgspec.json.Decoder(dict[str, str]).decode


# The settings a queue object shows, each with the type its column is read as: all but the
# write-only hmac_secret, and `order`, which the table keeps as the `lifo` flag.
_SHOWN = tuple(
    (s.name, s.type) for s in queue_settings.SETTINGS
    if s.name in models.Queue.__struct_fields__ and s.name != "order"
)


def queue(row: QueueRow, stats: models.Stats | None = None) -> models.Queue:
    """A queue object (never the HMAC secret)."""
    settings: dict[str, Any] = {name: cast(getattr(row, name)) for name, cast in _SHOWN}
    q = models.Queue(
        name=row.name,
        dlq=None if row.parent_id is not None else rules.dlq_name(row.name),
        order="lifo" if row.lifo else "fifo",
        created_at=row.created_at,
        paused=bool(row.paused),
        **settings,
    )
    if stats is not None:
        q.stats = stats
    if row.dead_letter_target is not None:
        q.dead_letter_target = row.dead_letter_target
    return q


def message(row: MessageRow, queue_name: str) -> models.Message:
    """A stored message."""
    return models.Message(**_message_fields(row, queue_name))


def scanned(row: MessageRow, queue_name: str, state: str) -> models.ScannedMessage:
    """A message as a scan shows it, with its state."""
    return models.ScannedMessage(**_message_fields(row, queue_name), state=state)


def _message_fields(row: MessageRow, queue_name: str) -> dict[str, Any]:
    """The fields of a message object (``leased`` spells them out: a poll's hot path)."""
    return {
        "id": row.id,
        "queue": queue_name,
        "payload": msgspec.Raw(row.payload.encode()),
        "priority": row.priority,
        "attributes": _decode_attrs(row.attributes) if row.attributes else {},
        "attempts": row.attempts,
        "enqueued_at": row.enqueued_at,
        "available_at": row.available_at,
        "expires_at": row.expires_at,
        "last_error": row.last_error,
        "origin_queue": _origin(row),
        "traceparent": _unset_if_none(row.traceparent),
        "tracestate": _unset_if_none(row.tracestate),
    }


def leased(row: MessageRow, q: ClaimQueue) -> models.LeasedMessage:
    """A message just leased, signed when its queue has an HMAC secret."""
    m = models.LeasedMessage(
        id=row.id,
        queue=q.name,
        payload=msgspec.Raw(row.payload.encode()),
        priority=row.priority,
        attributes=_decode_attrs(row.attributes) if row.attributes else {},
        attempts=row.attempts,
        enqueued_at=row.enqueued_at,
        available_at=row.available_at,
        expires_at=row.expires_at,
        last_error=row.last_error,
        origin_queue=_origin(row),
        token=row.token or "",
        lease_expires_at=row.lease_expires_at or 0,
        first_leased_at=msgspec.UNSET if row.first_leased_at is None else row.first_leased_at,
    )
    if row.traceparent is not None:  # only when the producer sent trace context (docs/rest.md)
        m.traceparent = row.traceparent
        if row.tracestate is not None:
            m.tracestate = row.tracestate
    if q.hmac_secret:
        m.signature = signing.sign(q.hmac_secret, row.payload)
    return m


def _origin(row: MessageRow) -> str | msgspec.UnsetType:
    """A DLQ message's original queue; absent (not null) on other messages (docs/rest.md)."""
    return msgspec.UNSET if row.origin_queue is None else row.origin_queue


def _unset_if_none(value: str | None) -> str | msgspec.UnsetType:
    return msgspec.UNSET if value is None else value


def stats(
    row: QueueRow | QueueCounts, dlq_depth: int, counts: LiveCounts | QueueCounts, now: int, *,
    arriving: int = 0,
) -> models.Stats:
    """Stats from maintained counters plus the live ``counts``, as the next poll sees them:
    a message whose last allowed lease ended counts in the DLQ (``dlq_depth`` is the DLQ's
    own), not as ready; on a DLQ, ``arriving`` such messages of its queue count as ready."""
    c = counts
    return models.Stats(
        queue=row.name,
        ready=max(row.depth - c.leased - c.delayed - c.expired - c.ending, 0) + arriving,
        delayed=c.delayed,
        leased=c.leased,
        dlq=dlq_depth + c.ending,
        oldest_ready_age_ms=None if c.oldest is None else max(now - c.oldest, 0),
        enqueued_total=row.enqueued_total,
        acked_total=row.acked_total,
        nacked_total=row.nacked_total,
        dead_lettered_total=row.dead_lettered_total,
        expired_total=row.expired_total,
        paused=bool(row.paused),
    )
