"""The one SQLAlchemy ``MetaData`` of sqew; Alembic migrations create exactly this.

Message states live in columns, not a state enum:
- ready / delayed: ``lease_expires_at IS NULL`` (ready when ``available_at <= now``);
- leased: ``lease_expires_at`` set (an expired lease is swept back to ready or to the DLQ).
The claim index is partial on unleased rows and split by ``lifo`` so that both orders are an
index walk: a row sits in exactly one of the two, so an insert maintains one claim index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from sqew.backends.columns import ARCHIVED, INSERTED
from sqew.backends.rows import MessageRow

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# sqlite_autoincrement: ids are never reused, so an idempotency hit never names another message.
Id = BigInteger().with_variant(Integer(), "sqlite")

queues = Table(
    "queues",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("name", String(100), nullable=False, unique=True),
    Column("parent_id", Id, ForeignKey("queues.id", ondelete="CASCADE"), nullable=True),
    Column("visibility_ms", BigInteger, nullable=False),
    Column("max_attempts", Integer, nullable=False),
    Column("backoff_base_ms", BigInteger, nullable=False),
    Column("backoff_max_ms", BigInteger, nullable=False),
    Column("retention_ms", BigInteger, nullable=False),
    Column("dedup_window_ms", BigInteger, nullable=False),
    Column("max_payload_bytes", Integer, nullable=False),
    Column("max_depth", BigInteger, nullable=False),
    Column("rate_limit_per_s", Float, nullable=False),
    Column("lifo", Boolean, nullable=False),
    Column("archive", Boolean, nullable=False),
    Column("hmac_secret", Text, nullable=True),
    Column("created_at", BigInteger, nullable=False),
    # maintained counters (never COUNT(*) on the hot path)
    Column("depth", BigInteger, nullable=False, server_default=text("0")),
    Column("enqueued_total", BigInteger, nullable=False, server_default=text("0")),
    Column("acked_total", BigInteger, nullable=False, server_default=text("0")),
    Column("nacked_total", BigInteger, nullable=False, server_default=text("0")),
    Column("dead_lettered_total", BigInteger, nullable=False, server_default=text("0")),
    Column("expired_total", BigInteger, nullable=False, server_default=text("0")),
    # enqueue token bucket (rate_limit_per_s)
    Column("rl_tokens", Float, nullable=False, server_default=text("0")),
    Column("rl_at", BigInteger, nullable=False, server_default=text("0")),
    # Bumped by every commit that may have made a message of the queue ready (``Tx.notify``
    # on SQLite): what other processes' long polls watch.
    Column("wakeups", BigInteger, nullable=False, server_default=text("0")),
    # What the SQS endpoint keeps of a queue that sqew's settings have no field for (tags,
    # queue-level delay and receive wait): a JSON object, null when there is nothing.
    Column("sqs", Text, nullable=True),
    # The queue this one dead-letters into, by name; null: its own ``<name>.dlq``.
    Column("dead_letter_target", String(100), nullable=True),
    # Paused delivery (docs/rest.md#pause-and-resume): enqueues go on, claims take nothing.
    Column("paused", Boolean, nullable=False, server_default=text("false")),
    sqlite_autoincrement=True,
)

MESSAGES_QUEUE_KEY = ForeignKeyConstraint(
    ["queue_id"], ["queues.id"], ondelete="CASCADE"
).ddl_if(dialect="sqlite")
"""A message's queue exists: on SQLite by this key, on PostgreSQL by the writes themselves.

PostgreSQL checks a foreign key with a query per inserted row (a trigger), a sixth of a single
enqueue's time in the database; SQLite's check is a lookup. Every write that puts a message in
a queue locks that queue's row first (the lock order of every write: ``Tx.lock_queues``, or the
enqueue's count on the row), and deleting a queue deletes its messages itself
(``Tx.delete_queue``), so no message outlives its queue on either."""

messages = Table(
    "messages",
    metadata,
    Column("id", Id, primary_key=True, autoincrement=True),
    Column("queue_id", Id, nullable=False),
    Column("payload", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("attributes", Text, nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("enqueued_at", BigInteger, nullable=False),
    Column("available_at", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("token", String(64), nullable=True),
    Column("last_error", Text, nullable=True),
    Column("lifo", Boolean, nullable=False),
    Column("origin_queue", String(100), nullable=True),
    # The producer's W3C trace context (docs/rest.md#trace-context), returned on delivery.
    Column("traceparent", String(55), nullable=True),
    Column("tracestate", String(512), nullable=True),
    # A message with a group is delivered only when no earlier message of its group is left
    # in its queue (``sql_sqs.GROUP_HEAD``): the message groups of SQS's FIFO queues.
    Column("group_id", String(128), nullable=True),
    # When the message was first leased (SQS's ApproximateFirstReceiveTimestamp); null until
    # then. Set by the claim, kept by later leases, cleared by a requeue from a DLQ.
    Column("first_leased_at", BigInteger, nullable=True),
    MESSAGES_QUEUE_KEY,
    sqlite_autoincrement=True,
)

Index(
    "ix_messages_claim_fifo",
    messages.c.queue_id,
    messages.c.priority.desc(),
    messages.c.available_at,
    messages.c.id,
    messages.c.expires_at,
    sqlite_where=text("lease_expires_at IS NULL AND lifo = 0"),
    postgresql_where=text("lease_expires_at IS NULL AND lifo = false"),
)
Index(
    "ix_messages_claim_lifo",
    messages.c.queue_id,
    messages.c.priority.desc(),
    messages.c.id.desc(),
    messages.c.available_at,
    messages.c.expires_at,
    sqlite_where=text("lease_expires_at IS NULL AND lifo = 1"),
    postgresql_where=text("lease_expires_at IS NULL AND lifo = true"),
)
Index(
    "ix_messages_leased",
    messages.c.queue_id,
    messages.c.lease_expires_at,
    sqlite_where=text("lease_expires_at IS NOT NULL"),
    postgresql_where=text("lease_expires_at IS NOT NULL"),
)
Index("ix_messages_expiry", messages.c.queue_id, messages.c.expires_at)
Index(
    "ix_messages_group",
    messages.c.queue_id,
    messages.c.group_id,
    messages.c.id,
    sqlite_where=text("group_id IS NOT NULL"),
    postgresql_where=text("group_id IS NOT NULL"),
)

dedup = Table(
    "dedup",
    metadata,
    Column("queue_id", Id, ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(128), nullable=False),
    Column("message_id", BigInteger, nullable=False),
    Column("expires_at", BigInteger, nullable=False),
    UniqueConstraint("queue_id", "key"),
)
Index("ix_dedup_expires_at", dedup.c.expires_at)
# A scan (export) pages by message id and reports each message's key: without this, every page
# would read all of the queue's idempotency records (a Spark write keys every row).
Index("ix_dedup_message", dedup.c.queue_id, dedup.c.message_id)

archive = Table(
    "archive",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=False),
    Column("queue_id", Id, ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    Column("payload", Text, nullable=False),
    Column("priority", Integer, nullable=False),
    Column("attributes", Text, nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("enqueued_at", BigInteger, nullable=False),
    Column("acked_at", BigInteger, nullable=False),
    Column("last_error", Text, nullable=True),
    Column("traceparent", String(55), nullable=True),
    Column("tracestate", String(512), nullable=True),
)
Index("ix_archive_queue_id", archive.c.queue_id, archive.c.id)

api_keys = Table(
    "api_keys",
    metadata,
    # The public part of a key (``sqew_<id>_<secret>``): what listings and revocation name.
    Column("id", String(32), primary_key=True),
    Column("name", String(100), nullable=True),
    # A key bound to a queue reaches that queue and its DLQ only (null: every queue).
    Column("queue", String(100), nullable=True),
    Column("scopes", String(64), nullable=False),  # comma-separated, sorted
    Column("hash", Text, nullable=False),  # argon2id of the whole key; never the key
    Column("created_at", BigInteger, nullable=False),
    Column("last_used_at", BigInteger, nullable=True),
)


# A message move task (the SQS endpoint's StartMessageMoveTask, docs/sqs.md): its state is here
# so that every replica sees it; the reaper's leader moves its messages.
move_tasks = Table(
    "move_tasks",
    metadata,
    Column("handle", String(64), primary_key=True),
    Column("source", String(100), nullable=False),  # a queue's name
    Column("destination", String(100), nullable=True),  # null: each message's origin queue
    Column("max_per_s", Integer, nullable=True),  # null: as fast as the steps go
    Column("status", String(16), nullable=False),  # RUNNING, COMPLETED, CANCELLED, FAILED
    Column("moved", BigInteger, nullable=False),
    Column("to_move", BigInteger, nullable=False),
    Column("started_at", BigInteger, nullable=False),
    Column("stepped_at", BigInteger, nullable=False),  # the last step's time (the rate's)
    Column("failure_reason", Text, nullable=True),
)
Index("ix_move_tasks_source", move_tasks.c.source, move_tasks.c.started_at)


meta = Table(
    "meta",
    metadata,
    # Settings of the whole database: ``auth_required`` ("1" once a key was ever made).
    Column("name", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)


def include_object(dialect: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's ``include_object`` filter for a database of ``dialect``: the objects of the
    metadata that database has (``MESSAGES_QUEUE_KEY`` is SQLite's only)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        return dialect == "sqlite" or obj is not MESSAGES_QUEUE_KEY

    return include


def _check_columns() -> None:
    """Refuse to load if the statements' column lists (``columns``, from the row types) are not
    these tables' columns in these tables' order: they are declared there, once, so that a
    statement needs no SQLAlchemy."""
    set_by_enqueue = tuple(c.name for c in messages.columns if c.name not in _NOT_INSERTED)
    archived = tuple(c.name for c in archive.columns if c.name != "acked_at")
    read = set(MessageRow._fields) <= set(messages.columns.keys())
    if (set_by_enqueue, archived, read) != (INSERTED, ARCHIVED, True):
        raise RuntimeError("sqew.backends.columns disagrees with the schema")


_NOT_INSERTED = ("id", "attempts", "lease_expires_at", "token", "last_error", "origin_queue",
                 "first_leased_at")
_check_columns()
