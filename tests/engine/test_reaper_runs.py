"""A reaper run's transactions (``sqew.core.maintenance.reap``): one per queue with work (found
by one statement, ``Tx.queues_to_reap``), then one for the idempotency records of every queue;
a queue with nothing to reap has none, and a run with nothing to do writes only that last one.
The same on SQLite and PostgreSQL (the statement is the backends' shared SQL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqew
from sqew import models
from sqew.backends import open_backend
from sqew.core.clock import ManualClock
from sqew.core.maintenance import Reaped
from sqew.core.service import QueueService
from sqew.core.writer import WriteObserver, run_sync


class Transactions(WriteObserver):
    """Counts write transactions."""

    def __init__(self) -> None:
        self.ended = 0

    def transaction(self, seconds: float) -> None:
        self.ended += 1


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, or a fresh database on the tests' PostgreSQL server."""
    if request.param == "sqlite":
        yield str(tmp_path / "r.db")
        return
    import targets

    store = targets.postgres(tmp_path)
    yield store.url
    store.drop()


def test_a_run_writes_only_for_the_queues_with_work(target: str) -> None:
    clock = ManualClock()
    client = sqew.LocalClient(target, clock=clock, reap_interval_ms=10**9)
    observer = Transactions()
    reaper = QueueService(open_backend(target), clock=clock, reap_when_due=False,
                          observer=observer)

    def run() -> tuple[Reaped, int]:
        before = observer.ended
        reaped = run_sync(reaper.reap())
        return reaped, observer.ended - before

    try:
        for name in ("idle1", "idle2"):
            client.create_queue(name)
            client.enqueue(name, {"stays": True})
        client.create_queue("ttl")
        client.enqueue("ttl", 1, ttl_ms=1000)
        client.create_queue("last", max_attempts=1)
        client.enqueue("last", 2)
        assert len(client.poll("last", visibility_ms=1000)) == 1
        client.create_queue("kept", archive=True, retention_ms=models.MIN_RETENTION_MS)
        client.enqueue("kept", 3)
        (m,) = client.poll("kept")
        client.ack("kept", m.id, m.token)
        client.create_queue("keyed", dedup_window_ms=models.MIN_DEDUP_WINDOW_MS)
        client.enqueue("keyed", 4, idempotency_key="k")  # the message stays; its record ends
        assert run() == (Reaped(), 1)  # nothing due yet: the idempotency records' write alone

        clock.advance(max(models.MIN_RETENTION_MS, models.MIN_DEDUP_WINDOW_MS) + 1000)
        # ttl, last and kept have work (keyed's record is not a queue's work): 3 + 1 writes.
        assert run() == (Reaped(expired=1, tombstones=1, archived=1, dead_lettered=1), 4)
        assert run() == (Reaped(), 1)  # all done
        stats: dict[str, Any] = {q: client.stats(q) for q in ("idle1", "idle2", "keyed")}
        assert [s.ready for s in stats.values()] == [1, 1, 1]
        assert client.stats("last").dlq == 1
    finally:
        client.close()
        reaper.close()
