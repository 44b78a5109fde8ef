"""Maintenance: the reaper (expired messages, spent idempotency records, ended last leases)
and compaction.

The reaper runs at most once per ``reap_interval_ms``: a server runs it on a timer, and every
poll asks for it too (the embedded Client has no timer). Each run is bounded, so it never holds
the write lock for long.
"""

from __future__ import annotations

from sqew.backends.base import Tx
from sqew.core.delivering import dead_letter_ended, queue_row
from sqew.core.writer import Op

REAP_LIMIT = 1000
"""Most expired messages (and, separately, idempotency records) one run removes per queue."""
COMPACT_STEP = 10_000


class Reap(Op[int]):
    """Remove expired messages and tombstones, and dead-letter messages whose last allowed
    lease ended (so stats, peek and the DLQ agree without waiting for the next poll)."""

    __slots__ = ("notify",)

    def __init__(self) -> None:
        self.notify: tuple[str, ...] = ()

    def run(self, tx: Tx, now: int) -> int:
        removed = 0
        changed: list[str] = []
        for q in tx.list_queues():
            reaped = tx.reap_messages(q.id, now, REAP_LIMIT)
            tx.add_counters(q.id, depth=-reaped, expired_total=reaped)
            removed += reaped
            dlq = dead_letter_ended(tx, q, now)
            if dlq is not None:
                changed.append(dlq)
        self.notify = tuple(changed)  # read by the writer after the commit
        return removed + tx.reap_dedup(None, now, REAP_LIMIT)


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
    """When the next reap is due (epoch ms), shared by the timer and the polls."""

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self._last = 0

    def due(self, now: int) -> bool:
        """Whether a reap is due at ``now``; if so, the next one is due an interval later."""
        if now - self._last < self.interval_ms and now >= self._last:
            return False
        self._last = now
        return True
