"""Wire models: msgspec Structs that are the JSON of the REST API (docs/rest.md).

Request models forbid unknown fields and carry the documented ranges as ``Meta`` constraints, so one
``msgspec.convert``/``decode`` validates a request whether it came from HTTP, the CLI or Python.
Response models are what every client returns and what ``--json`` prints.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any, Literal

import msgspec
import msgspec.inspect
from msgspec import UNSET, Meta, Struct, UnsetType

# --- ranges (docs/rest.md) ------------------------------------------------------------------------
MAX_BATCH_ENQUEUE = 1000
MAX_POLL_BATCH = 100
MAX_WAIT_MS = 20000
MAX_TTL_MS = 1_209_600_000
MIN_TTL_MS = 1000
MAX_VISIBILITY_MS = 43_200_000
"""The longest lease (12 h): the ``visibility_ms`` setting, a poll's override and the ``ms`` of
``extend-lease``."""
MAX_ATTEMPTS = 1000
MAX_BACKOFF_BASE_MS = 3_600_000
MAX_BACKOFF_MS = 86_400_000
MIN_RETENTION_MS = 60_000
MIN_DEDUP_WINDOW_MS = 1000
MAX_DEDUP_WINDOW_MS = 604_800_000
MAX_PAYLOAD_BYTES = 1_048_576
MIN_RATE_LIMIT_PER_S = 0.00001
"""The smallest rate limit other than 0 (off): about one message a day. Below it a token bucket
would ask callers to wait for ages (or for longer than a float can say)."""
HMAC_SECRET_MIN_BYTES = 16
MAX_INT64 = 2**63 - 1
"""The largest integer a database column holds (signed 64-bit): every unbounded integer of a
request is capped here, so a larger one is a ValidationError rather than an overflow inside the
database driver."""
MAX_FLOAT = sys.float_info.max
"""Any finite number: infinity would be stored, and then written as JSON null."""
MAX_ID = MAX_INT64
"""The largest message id."""
# `$` in Python's re also matches before a final newline; this lookahead ends the string in both
# Python and the ECMA-262 dialect of the OpenAPI schema.
END_OF_TEXT = r"(?![\s\S])"
QUEUE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}" + END_OF_TEXT

# What each pattern means, for error messages people can act on.
PATTERN_HINTS = {
    QUEUE_NAME_PATTERN: "1-80 letters, digits, '_' or '-', starting with a letter or digit",
}

QueueName = Annotated[str, Meta(pattern=QUEUE_NAME_PATTERN)]
NonNegInt = Annotated[int, Meta(ge=0, le=MAX_INT64)]

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
# 0 or at least MIN_RATE_LIMIT_PER_S: a gap no constraint can say, checked in __post_init__.
RateLimitPerS = Annotated[float, Meta(
    ge=0, le=MAX_FLOAT, description="Enqueues per second (a token bucket); 0 = off",
    extra={"default": 0.0, "range": f"0 (off), or ≥ {MIN_RATE_LIMIT_PER_S:.5f}"})]
Order = Annotated[Literal["fifo", "lifo"], Meta(
    description="Order within one priority", extra={"default": "fifo"})]
Archive = Annotated[bool, Meta(
    description="Keep acked messages in an archive", extra={"default": False})]
# docs/rest.md counts the minimum in bytes (UTF-8), which a schema cannot say:
# rules.check_hmac_secret checks it.
HmacSecret = Annotated[str, Meta(
    max_length=1024,
    description="Secret (at least 16 bytes of UTF-8) for signed enqueues and deliveries; "
                "write-only, never returned",
    extra={"default": None, "range": f"≥ {HMAC_SECRET_MIN_BYTES} bytes, ≤ 1024 characters"})]

Priority = Annotated[int, Meta(ge=-1000, le=1000)]
DelayMs = Annotated[int, Meta(ge=0, le=MAX_TTL_MS)]
TtlMs = Annotated[int, Meta(ge=MIN_TTL_MS, le=MAX_TTL_MS)]
IDEMPOTENCY_KEY_PATTERN = r"^[\x20-\x7e]+" + END_OF_TEXT
PATTERN_HINTS[IDEMPOTENCY_KEY_PATTERN] = "printable ASCII"
IdempotencyKey = Annotated[
    str, Meta(min_length=1, max_length=128, pattern=IDEMPOTENCY_KEY_PATTERN)
]
AttrKey = Annotated[str, Meta(min_length=1, max_length=64)]
AttrValue = Annotated[str, Meta(max_length=1024)]
Attributes = Annotated[dict[AttrKey, AttrValue], Meta(max_length=10)]
MessageId = Annotated[int, Meta(ge=1, le=MAX_ID)]
Token = Annotated[str, Meta(min_length=1, max_length=128)]
ErrorText = Annotated[str, Meta(max_length=4096)]
LeaseMs = Annotated[int, Meta(ge=0, le=MAX_VISIBILITY_MS)]
# W3C Trace Context (docs/rest.md, "Trace context"): a traceparent of version 00's form, neither id
# all zeros (invalid by the W3C rules), version ff forbidden; a tracestate of printable ASCII.
TRACEPARENT_PATTERN = (
    r"^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}" + END_OF_TEXT
)
PATTERN_HINTS[TRACEPARENT_PATTERN] = (
    "a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lower case, "
    "ids not all zeros"
)
TRACESTATE_PATTERN = r"^[\x20-\x7e]*" + END_OF_TEXT
PATTERN_HINTS[TRACESTATE_PATTERN] = "printable ASCII (a W3C tracestate)"
TRACESTATE_MAX = 512
Traceparent = Annotated[str, Meta(
    min_length=55, max_length=55, pattern=TRACEPARENT_PATTERN,
    description="The producer's W3C traceparent: a consumer's span links to it")]
Tracestate = Annotated[str, Meta(
    max_length=TRACESTATE_MAX, pattern=TRACESTATE_PATTERN,
    description="The producer's W3C tracestate (only with a traceparent)")]

class _Request(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of request bodies: unknown fields are rejected, never ignored."""


# --- queues -------------------------------------------------------------------------------------
class QueueSettings(_Request, kw_only=True):
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
    stats: Stats | UnsetType = UNSET


class QueueList(Struct):
    """Body of ``GET /queues``."""

    queues: list[Queue]


# --- messages -----------------------------------------------------------------------------------
class MessageIn(_Request, kw_only=True):
    """One message to enqueue. ``payload`` is any JSON value, kept as the exact JSON text."""

    payload: msgspec.Raw
    priority: Priority = 0
    delay_ms: DelayMs = 0
    ttl_ms: TtlMs | None = None
    idempotency_key: IdempotencyKey | None = None
    attributes: Attributes | None = None
    traceparent: Traceparent | None = None
    tracestate: Tracestate | None = None

    def __post_init__(self) -> None:
        if self.tracestate is not None and self.traceparent is None:
            raise ValueError("tracestate must come with a traceparent")


class MessageBatchIn(_Request):
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


class MessageList(Struct):
    """A list of messages (poll, peek, DLQ list)."""

    messages: list[Message]


SCAN_SOURCES = ("queue", "dlq", "archive")
"""What a scan reads: the queue's messages, its DLQ's, or the archive of its acked messages."""
MAX_SCAN_LIMIT = 1000

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


# --- ack / nack / extend ------------------------------------------------------------------------
class AckIn(_Request):
    """One ack."""

    id: MessageId
    token: Token


class AckBatchIn(_Request):
    """A batch of acks."""

    acks: Annotated[list[AckIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


class NackIn(_Request, kw_only=True):
    """One nack; ``delay_ms`` overrides the backoff, ``error`` is kept as ``last_error``."""

    id: MessageId
    token: Token
    delay_ms: DelayMs | None = None
    error: ErrorText | None = None


class NackBatchIn(_Request):
    """A batch of nacks."""

    nacks: Annotated[list[NackIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


AckStatus = Literal["acked", "lease_lost", "not_found"]
NackStatus = Literal["requeued", "dead_lettered", "lease_lost", "not_found"]


class ItemResult(Struct, omit_defaults=True):
    """Per-item outcome of an ack, nack or extend-lease (``extended``: with lease_expires_at)."""

    id: int
    status: str
    lease_expires_at: int | UnsetType = UNSET


class ResultList(Struct):
    """Body of an ack, nack or batch extend-lease response."""

    results: list[ItemResult]


class ExtendLeaseIn(_Request):
    """Body of ``extend-lease``."""

    id: MessageId
    token: Token
    ms: LeaseMs


class ExtendLeaseBatchIn(_Request):
    """A batch of extend-leases (a keep-alive of many held messages)."""

    extends: Annotated[list[ExtendLeaseIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


class LeaseExtended(Struct):
    """Result of ``extend-lease``."""

    id: int
    lease_expires_at: int


# --- counts -------------------------------------------------------------------------------------
class Purged(Struct):
    """Result of a purge."""

    purged: int


class Requeued(Struct):
    """Result of a DLQ requeue."""

    requeued: Annotated[int, Meta(description="messages moved back to the queue")]
    left: Annotated[int, Meta(description=(
        "messages that would have moved but stay in the DLQ: the queue holds its max_depth"
    ))] = 0


class Removed(Struct):
    """Result of a compaction."""

    removed: int


class RequeueIn(_Request):
    """Optional body of ``dlq/requeue``: which ids (default all)."""

    ids: Annotated[list[MessageId], Meta(max_length=10000)] | None = None


# --- API keys -----------------------------------------------------------------------------------
Scope = Literal["produce", "consume", "admin"]
KEY_NAME_MAX = 100
# No control characters: `keys list` prints names to a terminal, where ESC or BEL would act.
KEY_NAME_PATTERN = r"^[^\x00-\x1f\x7f]{1," + str(KEY_NAME_MAX) + "}" + END_OF_TEXT
PATTERN_HINTS[KEY_NAME_PATTERN] = "1-100 characters, none of them a control character"


class KeyCreate(_Request, kw_only=True):
    """Body of ``POST /keys``: what the new key may do (``queue``: bind it to one queue)."""

    name: Annotated[str, Meta(pattern=KEY_NAME_PATTERN)] | None = None
    queue: QueueName | None = None
    scopes: Annotated[list[Scope], Meta(min_length=1, max_length=3)]

    def __post_init__(self) -> None:
        if len(set(self.scopes)) != len(self.scopes):
            raise ValueError("scopes must not repeat a scope")


class ApiKey(Struct, kw_only=True):
    """An API key as listed: never the key or its hash."""

    id: str
    name: str | None
    queue: str | None
    scopes: list[str]
    created_at: int
    last_used_at: int | None


class KeyCreated(ApiKey, kw_only=True):
    """Body of ``POST /keys``'s answer: the key itself, shown this once."""

    key: str


class KeyList(Struct):
    """Body of ``GET /keys``."""

    keys: list[ApiKey]


class Health(Struct):
    """Body of ``/healthz``."""

    status: str


class Readiness(Struct):
    """Body of ``/readyz`` when ready (200: the database answers at the newest schema).

    ``overloaded``: the server process that answered refuses enqueues now (backpressure,
    ``overload_reasons`` names the measures past their threshold: ``pending_writes``,
    ``wal_bytes``, ``commit_ms``) while it still serves polls, acks, nacks and extends, so it
    stays ready. ``reaper_leader``: that process runs the reaper for the database.
    """

    status: str
    overloaded: bool = False
    overload_reasons: list[str] = msgspec.field(default_factory=list)
    reaper_leader: bool = False
