"""``QueueService.all_stats``: every queue's stats in one statement, however many queues.

A metrics scrape reads it; with thousands of queues, statements per queue would make the scrape
as slow as thousands of ``stats`` calls. The backend's trace shows each statement it runs.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from sqew import models
from sqew.backends import open_backend
from sqew.core.clock import ManualClock
from sqew.core.service import QueueService
from sqew.core.writer import run_sync


def test_one_statement_for_every_queue_equal_to_each_queues_stats(tmp_path: Path) -> None:
    statements: list[str] = []
    clock = ManualClock()
    backend = open_backend(str(tmp_path / "q.db"), upgrade=True, trace=statements.append)
    service = QueueService(backend, clock=clock, reap_interval_ms=10**9)
    try:
        names = [f"q{i:02d}" for i in range(30)]
        for i, name in enumerate(names):
            order = "lifo" if i % 2 else "fifo"
            run_sync(service.create_queue(models.QueueCreate(name=name, order=order)))
            messages = [models.MessageIn(payload=msgspec.Raw(b"%d" % n), delay_ms=(n % 3) * 10_000)
                        for n in range(i)]
            if messages:
                run_sync(service.enqueue(name, messages))
        clock.advance(1_000)
        run_sync(service.poll("q29", batch=4))

        statements.clear()
        every = run_sync(service.all_stats())
        selects = [s for s in statements if s.lstrip().upper().startswith(("SELECT", "WITH"))]
        assert len(selects) == 1, statements

        assert [s.queue for s in every] == sorted([*names, *(f"{n}.dlq" for n in names)])
        for stats in every:
            assert stats == run_sync(service.stats(stats.queue)), stats.queue
        q29 = next(s for s in every if s.queue == "q29")
        assert (q29.ready, q29.delayed, q29.leased) == (6, 19, 4)
    finally:
        service.close()
