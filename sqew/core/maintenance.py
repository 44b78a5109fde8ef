"""Maintenance: the reaper (expired messages, spent idempotency records, ended last leases,
archived messages past retention) and compaction.

Who reaps: in a server, the one process per database that holds the ``reaper`` lead
(``Backend.try_lead``) runs it on a timer (``sqew.server.background``); the others do not. The
embedded Client (the CLI) has no timer: its polls and reads run the reaper once due, and only
when they can take the lead at that moment, so with a server running on the file the bulk of
the work stays the server's. Correctness never waits for it: a claim skips expired messages
and sweeps its own queue's ended leases, so an expired message is never delivered, reaped or
not. Each run is bounded, so it never holds the write lock for long.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from sqew import errors
from sqew.backends.base import Backend, Lead, Tx
from sqew.core.delivering import dead_letter_ended, queue_row
from sqew.core.writer import Op

REAP_LIMIT = 1000
"""Most expired messages (and, separately, idempotency records, and archived messages looked
at) one run handles per queue."""
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

    def describe(self) -> str:
        """The counts in words (a log line)."""
        return (f"{self.expired} expired messages, {self.tombstones} idempotency records and "
                f"{self.archived} archived messages removed, {self.dead_lettered} "
                "dead-lettered")


class Reap(Op[Reaped]):
    """Remove expired messages, tombstones and archived messages past retention (a bounded
    number per queue), and dead-letter messages whose last allowed lease ended (so stats, peek
    and the DLQ agree without waiting for the next poll)."""

    __slots__ = ("notify",)

    def __init__(self) -> None:
        self.notify: tuple[str, ...] = ()

    def queues(self) -> tuple[str, ...] | None:
        return None  # every queue's

    def run(self, tx: Tx, now: int) -> Reaped:
        expired = archived = dead = 0
        changed: list[str] = []
        for q in tx.list_queues():
            reaped = tx.reap_messages(q.id, now, REAP_LIMIT)
            if reaped:
                tx.add_counters(q.id, depth=-reaped, expired_total=reaped)
            expired += reaped
            if q.archive:  # (an archive switched off later is left to compaction)
                archived += tx.reap_archive_head(q.id, now - q.retention_ms, REAP_LIMIT)
            dlq, moved = dead_letter_ended(tx, q, now)
            dead += moved
            if dlq is not None:
                changed.append(dlq)
        self.notify = tuple(changed)  # read by the writer after the commit
        return Reaped(expired, tx.reap_dedup(None, now, REAP_LIMIT), archived, dead)


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
            lead = backend.try_lead(ROLE)
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
