"""Administering: queues (create, update, delete), removal, purges and the DLQ's requeue.

Each is an ``Op`` like the hot paths, so every writer runs it the same way; the reads that
go with them (stats, peek, listings) are plain functions of a read transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from sqew import errors, models, queue_settings
from sqew.backends.base import MessageRow, QueueRow, Tx
from sqew.core import rules, views
from sqew.core.delivering import dlq_of, queue_row
from sqew.core.writer import Op


def settings_columns(settings: models.QueueSettings, base: dict[str, Any]) -> dict[str, Any]:
    """Merge the fields set in ``settings`` over ``base``; the queue-table columns."""
    merged = dict(base)
    for name in queue_settings.SETTING_NAMES:
        value = getattr(settings, name)
        if value is not msgspec.UNSET:
            merged[name] = value
    rules.check_backoff(merged["backoff_base_ms"], merged["backoff_max_ms"])
    rules.check_hmac_secret(merged["hmac_secret"])
    order = merged.pop("order")
    merged["lifo"] = order == "lifo"
    return merged


# --- queues -------------------------------------------------------------------------------------
class CreateQueue(Op[models.Queue]):
    """Create a queue and its DLQ."""

    __slots__ = ("spec",)

    def __init__(self, spec: models.QueueCreate) -> None:
        self.spec = spec

    def run(self, tx: Tx, now: int) -> models.Queue:
        spec = self.spec
        values = settings_columns(spec, dict(rules.DEFAULTS))
        if tx.get_queue(spec.name) is not None:
            raise errors.QueueExists(f"queue '{spec.name}' already exists")
        qid = tx.insert_queue({"name": spec.name, "created_at": now, **values})
        dlq_values = settings_columns(models.QueueSettings(), dict(rules.DEFAULTS))
        tx.insert_queue(
            {"name": rules.dlq_name(spec.name), "parent_id": qid, "created_at": now,
             **dlq_values}
        )
        row = tx.get_queue_by_id(qid)
        assert row is not None
        return views.queue(row)


class UpdateQueue(Op[models.Queue]):
    """Change some settings of a queue; the others stay."""

    __slots__ = ("name", "settings")

    def __init__(self, name: str, settings: models.QueueSettings) -> None:
        self.name = name
        self.settings = settings

    def run(self, tx: Tx, now: int) -> models.Queue:
        row = queue_row(tx, self.name)
        current = {
            **{k: getattr(row, k) for k in rules.DEFAULTS if hasattr(row, k)},
            "order": "lifo" if row.lifo else "fifo",
        }
        values = settings_columns(self.settings, current)
        tx.update_queue(row.id, values)
        if bool(values["lifo"]) != bool(row.lifo):
            tx.set_messages_lifo(row.id, bool(values["lifo"]))
        updated = tx.get_queue_by_id(row.id)
        assert updated is not None
        return views.queue(updated)


class SetPaused(Op[models.Queue]):
    """Pause a queue's delivery (polls claim nothing; enqueues go on) or resume it; either
    is idempotent. A resume wakes the queue's waiting long polls."""

    __slots__ = ("name", "notify", "paused")

    def __init__(self, name: str, paused: bool) -> None:
        self.name = name
        self.paused = paused
        self.notify = () if paused else (name,)

    def run(self, tx: Tx, now: int) -> models.Queue:
        row = queue_row(tx, self.name)
        tx.update_queue(row.id, {"paused": self.paused})
        return views.queue(row._replace(paused=self.paused))


class DeleteQueue(Op[None]):
    """Remove a queue with its DLQ and all their messages, and revoke the keys bound to it."""

    __slots__ = ("name", "notify")

    def __init__(self, name: str) -> None:
        self.name = name
        self.notify = (name, rules.dlq_name(name))  # their waiters see QueueNotFound

    def run(self, tx: Tx, now: int) -> None:
        row = queue_row(tx, self.name)
        if row.parent_id is not None:
            raise errors.ValidationError(
                f"'{self.name}' is a dead-letter queue; it is removed with its queue"
            )
        tx.delete_queue(row.id)
        # A key bound to the queue goes with it: it would otherwise reach a new queue that
        # happens to get the same name.
        tx.delete_keys_of_queue(self.name)


# --- messages -----------------------------------------------------------------------------------
class RemoveMessage(Op[None]):
    """Delete one message by id, whatever its state."""

    __slots__ = ("msg_id", "queue")

    def __init__(self, queue: str, msg_id: int) -> None:
        self.queue = queue
        self.msg_id = msg_id

    def run(self, tx: Tx, now: int) -> None:
        q = queue_row(tx, self.queue)
        if not tx.delete_message(q.id, self.msg_id):
            raise errors.for_item("not_found", self.msg_id)
        tx.add_counters(q.id, depth=-1)


class Purge(Op[int]):
    """Delete every message of a queue (``dlq``: of its DLQ instead)."""

    __slots__ = ("dlq", "queue")

    def __init__(self, queue: str, *, dlq: bool = False) -> None:
        self.queue = queue
        self.dlq = dlq

    def run(self, tx: Tx, now: int) -> int:
        q = queue_row(tx, self.queue)
        if self.dlq:
            q = dlq_of(tx, q)
        n = tx.purge(q.id)
        tx.add_counters(q.id, depth=-n)
        return n


class RequeueDlq(Op[models.Requeued]):
    """Move DLQ messages (all or ``ids``) back to their queue, attempts reset to 0, as many
    as the queue's ``max_depth`` admits (the smallest ids first; the others stay in the DLQ
    and are counted as ``left``). Messages a consumer of the DLQ holds a live lease on stay
    until that lease ends; expired ones never move."""

    __slots__ = ("ids", "notify", "queue")

    def __init__(self, queue: str, ids: Sequence[int] | None) -> None:
        self.queue = queue
        self.ids = ids
        self.notify = (queue,)

    def run(self, tx: Tx, now: int) -> models.Requeued:
        q = queue_row(tx, self.queue)  # read under its lock: its depth now
        dlq = dlq_of(tx, q)
        room = max(q.max_depth - q.depth, 0) if q.max_depth else None
        n, left = tx.move_all(dlq.id, q, None if self.ids is None else list(self.ids), now,
                              room)
        tx.add_counters(dlq.id, depth=-n)
        tx.add_counters(q.id, depth=n)
        return models.Requeued(n, left)


# --- reads --------------------------------------------------------------------------------------
def stats(tx: Tx, row: QueueRow, now: int) -> models.Stats:
    """Depths and counters of a queue, as the next poll sees them (``views.stats``)."""
    if row.parent_id is None:
        dlq = tx.get_queue(rules.dlq_name(row.name))
        return views.stats(row, dlq.depth if dlq else 0, tx.counts(row.id, now), now)
    arriving = tx.counts(row.parent_id, now).ending
    return views.stats(row, 0, tx.counts(row.id, now), now, arriving=arriving)


def queue_stats(tx: Tx, queue: str, now: int) -> models.Stats:
    """``stats`` of the queue named ``queue``."""
    return stats(tx, queue_row(tx, queue), now)


def all_stats(tx: Tx, now: int) -> list[models.Stats]:
    """``stats`` of every queue, DLQs included, by name (``Tx.all_counts``: one statement)."""
    rows = tx.all_counts(now)
    dlq_depth = {row.parent_id: row.depth for row in rows if row.parent_id is not None}
    ending = {row.id: row.ending for row in rows}
    return [
        views.stats(row, dlq_depth.get(row.id, 0), row, now)
        if row.parent_id is None else
        views.stats(row, 0, row, now, arriving=ending[row.parent_id])
        for row in rows
    ]


def peek(tx: Tx, queue: str, limit: int, now: int) -> list[models.Message]:
    """The next ready messages in delivery order, untouched: what a poll would lease."""
    q = queue_row(tx, queue)
    max_attempts = q.max_attempts if q.parent_id is None else None
    rows = tx.peek(q.id, bool(q.lifo), now, limit, max_attempts)
    return [views.message(r, q.name) for r in rows]


def get_message(tx: Tx, queue: str, msg_id: int) -> models.Message:
    """One message of the queue by id."""
    q = queue_row(tx, queue)
    row = tx.get_message(q.id, msg_id)
    if row is None:
        raise errors.for_item("not_found", msg_id)
    return views.message(row, q.name)


def dlq_list(tx: Tx, queue: str, limit: int, after_id: int) -> list[models.Message]:
    """Messages of a queue's DLQ by id, after ``after_id``."""
    dlq = dlq_of(tx, queue_row(tx, queue))
    return [views.message(r, dlq.name) for r in tx.list_messages(dlq.id, after_id, limit)]


def scan(
    tx: Tx, queue: str, source: str, after_id: int, max_id: int | None, limit: int, now: int
) -> models.ScanPage:
    """One page of a queue's messages (``source``: ``queue``, its ``dlq`` or its ``archive``)
    by id, ``after_id < id <= max_id``, each with its state; nothing leased or changed.

    ``source=queue`` covers every unexpired message, leased ones included: an export is a
    snapshot of what the queue holds, not of what a poll would get. Without ``max_id`` the
    page also carries the source's highest id (its ``high_water_id``).
    """
    q = queue_row(tx, queue)
    # Idempotency records stay with the queue a message was enqueued to, a DLQ's parent.
    keys_of = q.parent_id if q.parent_id is not None else q.id
    if source == "dlq":
        q = dlq_of(tx, q)
    archive = source == "archive"
    # Read first, in the same transaction: the page never holds an id above the mark.
    high: int | msgspec.UnsetType | None = msgspec.UNSET
    if max_id is None:
        high = tx.high_water(q.id, archive)
        max_id = models.MAX_ID if high is None else high
    if archive:
        rows = tx.scan_archive(q.id, after_id, max_id, q.retention_ms, limit)
        page = [views.scanned(r, q.name, "archived") for r in rows]
    else:
        rows = tx.scan_messages(q.id, after_id, max_id, now, limit)
        last = q.max_attempts if q.parent_id is None else None
        page = [
            views.scanned(r, q.name, "dead" if source == "dlq" else _state(r, now, last))
            for r in rows
        ]
    if rows:
        keys = tx.idempotency_keys(keys_of, rows[0].id, rows[-1].id, now)
        for m in page:
            if m.id in keys:
                m.idempotency_key = keys[m.id]
    return models.ScanPage(page, rows[-1].id if len(rows) == limit else None, high)


def _state(row: MessageRow, now: int, max_attempts: int | None) -> str:
    """A queued message's state at ``now``, as the next poll sees it: a message whose lease
    ended is ready again, or ``dead`` if that was its last allowed attempt (``max_attempts``;
    None in a DLQ): the poll moves it to the DLQ."""
    if row.lease_expires_at is not None and row.lease_expires_at > now:
        return "leased"
    if row.lease_expires_at is not None:
        return "dead" if max_attempts is not None and row.attempts >= max_attempts else "ready"
    if row.available_at > now:
        return "delayed"
    return "ready"
