"""Maintenance: the reaper (expired messages, spent idempotency records, ended last leases,
archived messages past retention) and compaction.

Who reaps: in a server, the one process per database that holds the ``reaper`` lead
(``Backend.try_lead``) runs it on a timer (``sqew.server.background``); the others do not. The
embedded Client (the CLI) has no timer: its polls and reads run the reaper once due, and only
when they can take the lead at that moment, so with a server running on the file the bulk of
the work stays the server's. Correctness never waits for it: a claim skips expired messages
and sweeps its own queue's ended leases, so an expired message is never delivered, reaped or
not. Each run is bounded, and a sequence of short transactions, one per queue with work,
each locking only that queue's row and its DLQ's (``reap``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import NamedTuple

from sqew import errors
from sqew.backends.base import Backend, Lead, Tx
from sqew.core.delivering import dead_letter_ended, lock_set, queue_row
from sqew.core.writer import Op, Writer

REAP_LIMIT = 1000
"""Most expired messages (and, separately, archived messages looked at) one run handles per
queue, and most idempotency records it removes in all."""
COMPACT_STEP = 10_000
ROLE = "reaper"
"""The lead (``Backend.try_lead``) of the process that reaps."""
log = logging.getLogger("sqew.reaper")


class Reaped(NamedTuple):
    """What one reaper run did, by kind."""

    expired: int = 0
    """Messages past their ``expires_at`` (TTL, retention, a DLQ's retention) removed."""
    tombstones: int = 0
    """Idempotency records past their window removed."""
    archived: int = 0
    """Archived (acked) messages past the queue's ``retention_ms`` removed."""
    dead_lettered: int = 0
    """Messages whose last allowed lease ended, moved to their DLQ."""

    @property
    def total(self) -> int:
        """Everything the run removed or moved."""
        return self.expired + self.tombstones + self.archived + self.dead_lettered

    def plus(self, other: Reaped) -> Reaped:
        """Both runs' counts, kind by kind."""
        return Reaped(*(a + b for a, b in zip(self, other, strict=True)))

    def describe(self) -> str:
        """The counts in words (a log line)."""
        return (f"{self.expired} expired messages, {self.tombstones} idempotency records and "
                f"{self.archived} archived messages removed, {self.dead_lettered} "
                "dead-lettered")


class ReapQueue(Op[Reaped]):
    """One queue's share of a reaper run: remove its expired messages and archived messages
    past retention (a bounded number of each), and dead-letter its messages whose last allowed
    lease ended (so stats, peek and the DLQ agree without waiting for the next poll).

    Its transaction locks only this queue's row and its DLQ's, or its named dead-letter
    target's (``lock_set``), which the dead-lettering writes: the writes of every other queue
    go on meanwhile.
    """

    __slots__ = ("notify", "queue")

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.notify: tuple[str, ...] = ()  # the DLQ, when messages moved there

    def lock_names(self, tx: Tx) -> tuple[str, ...] | None:
        return lock_set(tx, self.queue)

    def run(self, tx: Tx, now: int) -> Reaped:
        q = tx.get_queue(self.queue)
        if q is None:  # removed since the run listed it
            return Reaped()
        expired = tx.reap_messages(q.id, now, REAP_LIMIT)
        if expired:
            tx.add_counters(q.id, depth=-expired, expired_total=expired)
        archived = 0
        if q.archive:  # (an archive switched off later is left to compaction)
            archived = tx.reap_archive_head(q.id, now - q.retention_ms, REAP_LIMIT)
        dlq, dead = dead_letter_ended(tx, q, now)
        self.notify = (dlq,) if dlq is not None else ()  # read by the writer after the commit
        return Reaped(expired=expired, archived=archived, dead_lettered=dead)


class ReapDedup(Op[Reaped]):
    """The idempotency records past their window, of every queue (a bounded number): one
    statement on the index of their expiry (per queue it would walk the records of each).

    It writes no queue's row, and locks none; records an enqueue holds at that moment (giving
    an expired key again) are left to the next run, not waited for (on PostgreSQL:
    ``PostgresTx.reap_dedup``).
    """

    __slots__ = ()

    def run(self, tx: Tx, now: int) -> Reaped:
        return Reaped(tombstones=tx.reap_dedup(None, now, REAP_LIMIT))


async def reap(writer: Writer, queues: Iterable[str]) -> Reaped:
    """One reaper run: the share of each of ``queues`` (``Tx.queues_to_reap``: those with
    work) in a write of its own (``ReapQueue``), then the idempotency records (``ReapDedup``),
    one after another, never two at once.

    A run over every queue in one transaction would lock every queue's row for all of it
    (PostgreSQL: every replica's writes wait); short transactions let the writes of other
    queues in between (on SQLite too, whose write lock is the whole file's), and a queue with
    nothing to reap costs no transaction at all. In a group commit each write joins one group,
    with whatever else is written then. A failure ends the run; what was committed stays.
    """
    total = Reaped()
    for name in queues:
        total = total.plus(await writer.write(ReapQueue(name)))
    return total.plus(await writer.write(ReapDedup()))


class Probe(Op[None]):
    """An empty write: a group with nothing to do (backpressure measures its commit)."""

    __slots__ = ()

    def run(self, tx: Tx, now: int) -> None:
        return None


class Compact(Op[int]):
    """Remove all of a queue's expired messages and spent idempotency records, and the
    archived messages acked more than the queue's ``retention_ms`` ago.

    The archive is kept bounded here, not by the reaper: the archive has no index on
    ``acked_at``, so finding its old rows walks a queue's whole archive, too much for a
    timer that runs every second but fine for an explicit compaction.
    """

    __slots__ = ("queue",)

    def __init__(self, queue: str) -> None:
        self.queue = queue

    def run(self, tx: Tx, now: int) -> int:
        q = queue_row(tx, self.queue)
        removed = 0
        while True:
            reaped = tx.reap_messages(q.id, now, COMPACT_STEP)
            tx.add_counters(q.id, depth=-reaped, expired_total=reaped)
            tombstones = tx.reap_dedup(q.id, now, COMPACT_STEP)
            archived = tx.reap_archive(q.id, now - q.retention_ms, COMPACT_STEP)
            removed += reaped + tombstones + archived
            if not reaped and not tombstones and not archived:
                return removed


class ReapSchedule:
    """When the next reap is due (epoch ms), and whether this process may run it.

    Args:
        interval_ms: ``reap_interval_ms``.
        when_due: polls and reads reap once due (``lead_if_due``); False where a timer
            reaps (a server's, in the process that leads).
    """

    def __init__(self, interval_ms: int, *, when_due: bool = True) -> None:
        self.interval_ms = interval_ms
        self.when_due = when_due
        self._last = 0

    def due(self, now: int) -> bool:
        """Whether a reap is due at ``now``; if so, the next one is due an interval later."""
        if now - self._last < self.interval_ms and now >= self._last:
            return False
        self._last = now
        return True

    def lead_if_due(self, backend: Backend, now: int) -> Lead | None:
        """The reaper's lead, to hold while a poll or read reaps, if they reap, a reap is due
        at ``now`` and no other process leads; else None (release it after the reap)."""
        if not self.when_due or not self.due(now):
            return None
        try:
            lead = backend.try_lead(ROLE, brief=True)
        except errors.SqewError as exc:  # a read-only directory: the call goes on
            log.info("reaping skipped: %s", exc.message)
            return None
        if lead is None:
            log.debug("reaping left to the process that leads the reaper")
        return lead


def log_reaped(reaped: Reaped) -> None:
    """A line per reaper run that did something (with its counts); at debug otherwise."""
    level = logging.INFO if reaped.total else logging.DEBUG
    if log.isEnabledFor(level):
        log.log(level, "reaper: %s", reaped.describe(), extra=reaped._asdict())
