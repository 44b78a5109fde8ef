"""Messages on the wire: what an enqueue takes and answers, and a message as it is read back
(stored, leased, scanned)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from sqew.models.fields import (
    Attributes,
    DelayMs,
    IdempotencyKey,
    Priority,
    Request,
    Traceparent,
    Tracestate,
    TtlMs,
)
from sqew.models.limits import MAX_BATCH_ENQUEUE


class MessageIn(Request, kw_only=True):
    """One message to enqueue. ``payload`` is any JSON value, kept as the exact JSON text."""

    payload: msgspec.Raw
    priority: Priority = 0
    delay_ms: DelayMs = 0
    ttl_ms: TtlMs | None = None
    idempotency_key: IdempotencyKey | None = None
    attributes: Attributes | None = None
    traceparent: Traceparent | None = None
    tracestate: Tracestate | None = None

    json_schema_rules: ClassVar[dict[str, Any]] = {
        "if": {"required": ["tracestate"], "properties": {"tracestate": {"type": "string"}}},
        "then": {"required": ["traceparent"], "properties": {"traceparent": {"type": "string"}}},
    }
    """What ``__post_init__`` checks across fields, as JSON Schema (the OpenAPI document adds it
    to the model's schema)."""

    def __post_init__(self) -> None:
        if self.tracestate is not None and self.traceparent is None:
            raise ValueError("tracestate must come with a traceparent")


class MessageBatchIn(Request):
    """Body of a batch enqueue."""

    messages: Annotated[list[MessageIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


class EnqueueResult(Struct):
    """Result of enqueueing one message."""

    message_id: int
    duplicate: bool


class EnqueueBatchResult(Struct):
    """Result of a batch enqueue, in input order."""

    messages: list[EnqueueResult]


OriginQueue = Annotated[
    str, Meta(description="The queue a dead-lettered message came from (only on a DLQ's messages).")
]


# dict=True: a client keeps the payload's text as sent beside the decoded ``payload``, in an
# attribute that is not a field: never encoded (sqew.payloads).
class Message(Struct, kw_only=True, dict=True):
    """A stored message. ``payload`` is the decoded JSON value (raw JSON on the server side)."""

    id: int
    queue: str
    payload: Any
    priority: int
    attributes: dict[str, str]
    attempts: int
    enqueued_at: int
    available_at: int
    expires_at: int
    last_error: str | None
    origin_queue: OriginQueue | UnsetType = UNSET
    traceparent: Annotated[str, Meta(description=(
        "The producer's W3C traceparent (only when it sent one)"))] | UnsetType = UNSET
    tracestate: Annotated[str, Meta(description=(
        "The producer's W3C tracestate (only when it sent one)"))] | UnsetType = UNSET


class LeasedMessage(Message, kw_only=True):
    """A message leased by a poll: ``token`` acks or nacks it until ``lease_expires_at``."""

    token: str
    lease_expires_at: int
    signature: str | UnsetType = UNSET
    first_leased_at: Annotated[int, Meta(description=(
        "When the message was first leased, ms since the epoch (kept by later leases; "
        "a requeue from a DLQ starts it again)"))] | UnsetType = UNSET


class MessageList(Struct):
    """A list of messages (poll, peek, DLQ list)."""

    messages: list[Message]


SCAN_SOURCES = ("queue", "dlq", "archive")
"""What a scan reads: the queue's messages, its DLQ's, or the archive of its acked messages."""

MessageState = Annotated[
    str,
    Meta(description="ready, delayed or leased (source=queue); dead (dlq); archived (archive)"),
]


class ScannedMessage(Message, kw_only=True, omit_defaults=True):
    """A message as a scan (export) sees it: the message object plus its ``state``.

    An archived message has no expiry of its own: its ``available_at`` is when it was acked
    and its ``expires_at`` when retention removes it from the archive (acked + the queue's
    ``retention_ms``).
    """

    state: MessageState
    idempotency_key: Annotated[str, Meta(description=(
        "The key the message was enqueued with, while the queue remembers it (within "
        "dedup_window_ms of the enqueue)"))] | UnsetType = UNSET


class ScanPage(Struct, omit_defaults=True):
    """One page of a scan: messages by id ascending; ``next_after_id`` is the ``after_id`` of
    the next page, null when this page was the last (it was not full)."""

    messages: list[ScannedMessage]
    next_after_id: int | None
    high_water_id: Annotated[int | None, Meta(description=(
        "Only when no max_id was given: the largest id in the source as this page was read "
        "(null: empty). Pass it as max_id to the following pages for a snapshot that ends "
        "even while the queue grows."))] | UnsetType = UNSET


class LeasedMessageList(Struct):
    """Body of a poll response."""

    messages: list[LeasedMessage]
