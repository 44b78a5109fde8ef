"""Queues on the wire: the settings (each declared once, here), a queue, its stats.

``QueueSettings`` is both what ``POST /queues`` and ``PATCH /queues/{q}`` take and the one
declaration of every setting: its range, meaning and default (``sqew.queue_settings`` reads
them for the service's defaults, the queue view and the CLI's options).
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from sqew.models.fields import QueueName, Request
from sqew.models.limits import (
    HMAC_SECRET_MAX_LENGTH,
    HMAC_SECRET_MIN_BYTES,
    MAX_ATTEMPTS,
    MAX_BACKOFF_BASE_MS,
    MAX_BACKOFF_MS,
    MAX_DEDUP_WINDOW_MS,
    MAX_FLOAT,
    MAX_INT64,
    MAX_PAYLOAD_BYTES,
    MAX_TTL_MS,
    MAX_VISIBILITY_MS,
    MIN_DEDUP_WINDOW_MS,
    MIN_RATE_LIMIT_PER_S,
    MIN_RETENTION_MS,
)

# --- queue settings: each declared once, here ---------------------------------------------------
# Name (the field of QueueSettings), range (the Meta constraints), meaning (the description,
# which the OpenAPI schema and the CLI's help show) and default (Meta.extra["default"]). The
# default sits in `extra` rather than as the field's default because QueueSettings is also the
# PATCH body, where a missing field means "unchanged" (UNSET), not "the default"; a separate
# defaults Struct would list every name a second time. Meta.extra["range"] words a range the
# constraints cannot say alone. Everything else (SETTING_NAMES, rules.DEFAULTS, the queue view,
# the CLI's `queue add/update` options and their help) is derived from these declarations.
VisibilityMs = Annotated[int, Meta(
    ge=0, le=MAX_VISIBILITY_MS, description="Lease length of a poll, in ms",
    extra={"default": 30_000})]
MaxAttempts = Annotated[int, Meta(
    ge=1, le=MAX_ATTEMPTS, description="Deliveries before a message is dead-lettered",
    extra={"default": 5})]
BackoffBaseMs = Annotated[int, Meta(
    ge=0, le=MAX_BACKOFF_BASE_MS, description="First retry delay after a nack, in ms",
    extra={"default": 1000})]
BackoffMaxMs = Annotated[int, Meta(
    ge=0, le=MAX_BACKOFF_MS, description="Largest retry delay after a nack, in ms",
    extra={"default": 900_000, "range": f"≥ backoff_base_ms, ≤ {MAX_BACKOFF_MS}"})]
RetentionMs = Annotated[int, Meta(
    ge=MIN_RETENTION_MS, le=MAX_TTL_MS, description="Default message TTL, in ms",
    extra={"default": 345_600_000})]
DedupWindowMs = Annotated[int, Meta(
    ge=MIN_DEDUP_WINDOW_MS, le=MAX_DEDUP_WINDOW_MS,
    description="How long an idempotency key is remembered, in ms",
    extra={"default": 300_000})]
MaxPayloadBytes = Annotated[int, Meta(
    ge=1, le=MAX_PAYLOAD_BYTES, description="Largest payload, in bytes",
    extra={"default": 262_144})]
MaxDepth = Annotated[int, Meta(
    ge=0, le=MAX_INT64, description="Most messages held (a quota); 0 = unlimited",
    extra={"default": 0})]
# 0 or at least MIN_RATE_LIMIT_PER_S: checked in __post_init__, said to JSON Schema by anyOf.
RateLimitPerS = Annotated[float, Meta(
    ge=0, le=MAX_FLOAT, description="Enqueues per second (a token bucket); 0 = off",
    extra_json_schema={"anyOf": [{"maximum": 0}, {"minimum": MIN_RATE_LIMIT_PER_S}]},
    extra={"default": 0.0, "range": f"0 (off), or ≥ {MIN_RATE_LIMIT_PER_S:.5f}"})]
Order = Annotated[Literal["fifo", "lifo"], Meta(
    description="Order within one priority", extra={"default": "fifo"})]
POLL_ORDERS: tuple[str, ...] = ("priority", "shuffle")
"""A poll's ``order``: ``priority`` (the head of the queue's delivery order) or ``shuffle``
(random ready messages among the first of that order: docs/rest.md)."""
Archive = Annotated[bool, Meta(
    description="Keep acked messages in an archive", extra={"default": False})]
# The minimum counts bytes of UTF-8 (rules.check_hmac_secret), which JSON Schema cannot say: its
# minLength counts characters, and 16 characters are always at least 16 bytes. So the document
# states the bound every client can keep (16 characters); the server also takes a shorter secret
# of multi-byte characters that reaches 16 bytes, as its description says.
HmacSecret = Annotated[str, Meta(
    max_length=HMAC_SECRET_MAX_LENGTH,
    extra_json_schema={"minLength": HMAC_SECRET_MIN_BYTES},
    description=f"Secret of at least {HMAC_SECRET_MIN_BYTES} bytes of UTF-8 (any "
                f"{HMAC_SECRET_MIN_BYTES} characters are) and at most {HMAC_SECRET_MAX_LENGTH} "
                "characters, for signed enqueues and deliveries; write-only, never returned",
    extra={"default": None, "range": f"≥ {HMAC_SECRET_MIN_BYTES} bytes, "
                                     f"≤ {HMAC_SECRET_MAX_LENGTH} characters"})]


# --- queues -------------------------------------------------------------------------------------
class QueueSettings(Request, kw_only=True):
    """Queue settings; every field optional (UNSET = keep current / use default)."""

    visibility_ms: VisibilityMs | UnsetType = UNSET
    max_attempts: MaxAttempts | UnsetType = UNSET
    backoff_base_ms: BackoffBaseMs | UnsetType = UNSET
    backoff_max_ms: BackoffMaxMs | UnsetType = UNSET
    retention_ms: RetentionMs | UnsetType = UNSET
    dedup_window_ms: DedupWindowMs | UnsetType = UNSET
    max_payload_bytes: MaxPayloadBytes | UnsetType = UNSET
    max_depth: MaxDepth | UnsetType = UNSET
    rate_limit_per_s: RateLimitPerS | UnsetType = UNSET
    order: Order | UnsetType = UNSET
    archive: Archive | UnsetType = UNSET
    hmac_secret: HmacSecret | UnsetType | None = UNSET

    def __post_init__(self) -> None:
        # msgspec turns a ValueError here into a ValidationError wherever the model is built
        # (an HTTP body, a Client call, the CLI), like a Meta constraint.
        rate = self.rate_limit_per_s
        if not isinstance(rate, UnsetType) and 0 < rate < MIN_RATE_LIMIT_PER_S:
            raise ValueError(
                f"rate_limit_per_s must be 0 (off) or at least {MIN_RATE_LIMIT_PER_S:.5f}"
            )


class QueueCreate(QueueSettings, kw_only=True):
    """Body of ``POST /queues``."""

    name: QueueName


class Stats(Struct, kw_only=True):
    """Counters and depths of one queue (``GET /queues/{q}/stats``)."""

    queue: str
    ready: int
    delayed: int
    leased: int
    dlq: int
    oldest_ready_age_ms: int | None
    enqueued_total: int
    acked_total: int
    nacked_total: int
    dead_lettered_total: int
    expired_total: int
    paused: bool = False
    """Delivery paused: polls return nothing until the queue is resumed."""


class Queue(Struct, kw_only=True):
    """A queue object: its name, its DLQ's name (null for a DLQ) and its settings."""

    name: str
    dlq: str | None
    visibility_ms: int
    max_attempts: int
    backoff_base_ms: int
    backoff_max_ms: int
    retention_ms: int
    dedup_window_ms: int
    max_payload_bytes: int
    max_depth: int
    rate_limit_per_s: float
    order: str
    archive: bool
    created_at: int
    paused: bool = False
    """Delivery paused (``POST /queues/{q}/pause``): enqueues go on, polls return nothing."""
    stats: Stats | UnsetType = UNSET
    dead_letter_target: Annotated[str, Meta(description=(
        "The queue this one dead-letters into, when it names one other than its own dlq "
        "(set over the SQS endpoint's RedrivePolicy)"))] | UnsetType = UNSET


class QueueList(Struct):
    """Body of ``GET /queues``."""

    queues: list[Queue]
