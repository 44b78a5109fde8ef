"""The rows of the storage contract (``sqew.backends.base``): what its statements take and return,
in column order."""

from __future__ import annotations

from typing import NamedTuple


class QueueRow(NamedTuple):
    """A row of the ``queues`` table, in column order."""

    id: int
    name: str
    parent_id: int | None
    visibility_ms: int
    max_attempts: int
    backoff_base_ms: int
    backoff_max_ms: int
    retention_ms: int
    dedup_window_ms: int
    max_payload_bytes: int
    max_depth: int
    rate_limit_per_s: float
    lifo: bool
    archive: bool
    hmac_secret: str | None
    created_at: int
    depth: int
    enqueued_total: int
    acked_total: int
    nacked_total: int
    dead_lettered_total: int
    expired_total: int
    rl_tokens: float
    rl_at: int
    dead_letter_target: str | None
    """The queue this one dead-letters into (None: its own ``<name>.dlq``)."""
    paused: bool
    """Delivery paused: polls claim nothing, enqueues go on."""


class QueueLimits(NamedTuple):
    """What an enqueue needs of its queue (``Tx.reserve``): a narrow row is a cheaper read."""

    id: int
    name: str
    max_payload_bytes: int
    retention_ms: int
    lifo: bool
    max_depth: int
    rate_limit_per_s: float
    depth: int
    rl_tokens: float
    rl_at: int
    hmac_secret: str | None
    """Checked against an HTTP enqueue's signature (``sqew.core.signing``), read here, in the
    enqueue's transaction, so a secret just changed applies to the next enqueue."""


class ClaimQueue(NamedTuple):
    """What a poll needs of its queue (``Tx.claim_by_name``): its messages are handed out
    under its name and signed with its HMAC secret; a narrow row is a cheaper answer."""

    id: int
    name: str
    hmac_secret: str | None
    paused: bool
    """A paused queue's claim takes nothing (and a long poll waits for its resume)."""

    @classmethod
    def of(cls, q: QueueRow) -> ClaimQueue:
        """The part of a queue's whole row that a poll needs."""
        return cls(q.id, q.name, q.hmac_secret, bool(q.paused))


class QueueCounts(NamedTuple):
    """A queue's maintained counters and its live counts (``Tx.all_counts``): what its stats
    need, narrow, since a metrics scrape reads it for every queue."""

    id: int
    name: str
    parent_id: int | None
    depth: int
    enqueued_total: int
    acked_total: int
    nacked_total: int
    dead_lettered_total: int
    expired_total: int
    paused: bool
    leased: int
    """Messages under a live lease."""
    delayed: int
    """Unleased messages not available yet."""
    expired: int
    """Expired messages not reaped yet."""
    ending: int
    """Messages whose last allowed lease ended: the next poll (or the reaper) moves them to
    the DLQ (none in a DLQ)."""
    oldest: int | None
    """When the oldest ready message became ready: its ``available_at``, or the end of its
    lease for a message whose lease ended (with attempts left)."""


class LiveCounts(NamedTuple):
    """A queue's counts at a moment (``Tx.counts``): the fields of ``QueueCounts`` that are
    not columns of its row."""

    leased: int
    delayed: int
    expired: int
    ending: int
    oldest: int | None


class MessageRow(NamedTuple):
    """A message as read back: the fields a message object needs, plus lease fields."""

    id: int
    queue_id: int
    payload: str
    priority: int
    attributes: str | None
    attempts: int
    enqueued_at: int
    available_at: int
    expires_at: int
    last_error: str | None
    token: str | None
    lease_expires_at: int | None
    origin_queue: str | None
    """The queue a dead-lettered message came from (None outside a DLQ)."""
    traceparent: str | None
    """The producer's W3C trace context, when it sent one (docs/rest.md#trace-context)."""
    tracestate: str | None
    first_leased_at: int | None
    """When the message was first leased (None: never, or not since a requeue from a DLQ)."""


class KeyRow(NamedTuple):
    """A row of the ``api_keys`` table: an API key's hash and what it may do."""

    id: str
    name: str | None
    queue: str | None
    scopes: str
    """Comma-separated, sorted."""
    hash: str
    created_at: int
    last_used_at: int | None


class NewMessage(NamedTuple):
    """A message to insert (``Tx.insert_messages``): the columns of ``messages`` that an
    enqueue sets, in the table's order (``schema.INSERTED``; ``attempts`` starts at 0, the
    lease columns empty)."""

    queue_id: int
    payload: str
    priority: int
    attributes: str | None
    """The attributes as a JSON object, or None."""
    enqueued_at: int
    available_at: int
    expires_at: int
    lifo: bool
    traceparent: str | None
    tracestate: str | None
    group_id: str | None
    """The message's ordered group (``sql_sqs.GROUP_HEAD``), or None."""


class MoveTaskRow(NamedTuple):
    """A row of the ``move_tasks`` table, in column order."""

    handle: str
    source: str
    destination: str | None
    max_per_s: int | None
    status: str
    moved: int
    to_move: int
    started_at: int
    stepped_at: int
    failure_reason: str | None
