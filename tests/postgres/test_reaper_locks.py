"""A reaper run is a transaction per queue, each locking only that queue's row and its DLQ's
(``sqew.core.maintenance.reap``): a queue whose row another transaction holds makes the run
wait at that queue alone. The queues before it are reaped and committed meanwhile, and the
writes of every other queue go on; the run finishes once the row is let go, with the totals
of the whole run.

Before, one transaction locked every queue's row for the whole run: every replica's writes
waited for it.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pg_support
import pytest

import sqew
from sqew.backends import open_backend
from sqew.core.clock import ManualClock
from sqew.core.maintenance import Reaped
from sqew.core.service import QueueService
from sqew.core.writer import WriteObserver, run_sync

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

WAIT_S = 30
"""The bound of every wait (each ends on an event long before)."""


class Transactions(WriteObserver):
    """Counts the reaper's write transactions as they end; ``wait_for(n)`` until ``n`` did."""

    def __init__(self) -> None:
        self.ended = 0
        self._cond = threading.Condition()

    def transaction(self, seconds: float) -> None:
        with self._cond:
            self.ended += 1
            self._cond.notify_all()

    def wait_for(self, n: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.ended >= n, WAIT_S)


def test_a_reaper_run_locks_one_queue_at_a_time(pg_url: str) -> None:
    clock = ManualClock()
    server = pg_support.cluster().server
    dbname = pg_url.rsplit("/", 1)[1]
    client = sqew.LocalClient(pg_url, clock=clock, reap_interval_ms=10**9)
    observer = Transactions()
    reaper = QueueService(open_backend(pg_url), clock=clock, reap_when_due=False,
                          observer=observer)
    outcome: dict[str, Any] = {}
    try:
        client.create_queue("a", max_attempts=1)
        client.create_queue("b")
        client.enqueue("a", {"n": 0})
        client.enqueue_batch("a", [{"payload": i, "ttl_ms": 1000} for i in range(2)])
        client.enqueue_batch("b", [{"payload": i, "ttl_ms": 1000} for i in range(3)])
        assert len(client.poll("a", visibility_ms=1000)) == 1  # its last allowed lease
        clock.advance(2000)  # both queues' TTLs and a's lease ended: work in each

        with contextlib.closing(server.connect(dbname)) as holder, \
                contextlib.closing(server.connect(dbname)) as watch, \
                ThreadPoolExecutor(max_workers=1) as pool:
            holder.execute("BEGIN")
            holder.execute("SELECT id FROM queues WHERE name = 'b' FOR UPDATE")

            def run() -> None:
                outcome["reaped"] = run_sync(reaper.reap())

            thread = threading.Thread(target=run)
            thread.start()
            # The run goes by name through the queues with work: a, then b, whose row is held.
            assert observer.wait_for(1), "a's transaction never ended"
            pg_support.until_a_lock_wait(watch, "the reaper", WAIT_S)  # for b's row

            # a's share is committed while the run waits for b ...
            a = client.stats("a")
            assert (a.ready, a.leased, a.dlq, a.expired_total, a.dead_lettered_total) == (
                0, 0, 1, 2, 1)
            # ... and its run locks nothing of a's: a write to a goes through now.
            enqueued = pool.submit(client.enqueue, "a", {"n": 1}).result(timeout=WAIT_S)
            assert enqueued.duplicate is False
            assert thread.is_alive() and client.stats("b").expired_total == 0

            holder.execute("COMMIT")  # b's row let go: the run goes on to its end
            thread.join(WAIT_S)
            assert not thread.is_alive()
        assert outcome["reaped"] == Reaped(expired=5, tombstones=0, archived=0, dead_lettered=1)
        b = client.stats("b")
        assert (b.ready, b.expired_total) == (0, 3)
        assert client.stats("a").ready == 1
    finally:
        client.close()
        reaper.close()


def test_a_reaper_run_skips_idempotency_records_an_enqueue_holds(pg_url: str) -> None:
    """The idempotency records' share of a run locks no queue, so it must not wait for a
    record another transaction holds (an enqueue reusing an expired key): that could close a
    cycle. It skips it; a later run takes it."""
    clock = ManualClock()
    server = pg_support.cluster().server
    dbname = pg_url.rsplit("/", 1)[1]
    client = sqew.LocalClient(pg_url, clock=clock, reap_interval_ms=10**9)
    reaper = QueueService(open_backend(pg_url), clock=clock, reap_when_due=False)
    try:
        client.create_queue("q", dedup_window_ms=1000)
        client.enqueue_batch("q", [{"payload": i, "idempotency_key": f"k{i}"} for i in range(3)])
        clock.advance(2000)  # every key's window ended
        # (the holder closes before the pool waits for its thread: a run that waited for k0
        # fails the test, then ends)
        with ThreadPoolExecutor(max_workers=1) as pool, \
                contextlib.closing(server.connect(dbname)) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT key FROM dedup WHERE key = 'k0' FOR UPDATE")
            reaped = pool.submit(lambda: run_sync(reaper.reap())).result(timeout=WAIT_S)
            assert reaped.tombstones == 2  # k1 and k2; k0 held
            holder.execute("COMMIT")
        assert run_sync(reaper.reap()).tombstones == 1
    finally:
        client.close()
        reaper.close()
