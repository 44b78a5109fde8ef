"""``sqew.Worker`` with an ``async def`` handler, on every target: the handler runs on the
worker's event loop, and every message still ends acked or in the DLQ as it decided, none
handled twice at once, at most ``concurrency`` at once; a long handler keeps its lease; the
drain waits for the handlers under way; the handler can use a ``sqew.AsyncClient``."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from targets import Target

import sqew
from sqew import models
from tests.worker.test_worker import DEADLINE_S, Watch, running, until


def test_every_message_ends_as_its_async_handler_decided(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("jobs", max_attempts=2, backoff_base_ms=0, backoff_max_ms=0)
    ids = [r.message_id for r in client.enqueue_batch(
        "jobs", [{"payload": n} for n in range(40)])]
    failing = {ids[n] for n in range(40) if n % 10 == 3}
    rejected = {ids[n] for n in range(40) if n % 10 == 4}
    watch = Watch()
    loops: set[int] = set()

    async def handle(m: models.LeasedMessage) -> None:
        loops.add(id(asyncio.get_running_loop()))
        with watch.handling(m):
            await asyncio.sleep(0.005)  # handlers overlap on the one loop
            if m.id in failing:
                raise ValueError(f"no good: {m.payload}")
            if m.id in rejected:
                raise sqew.Reject(f"never: {m.payload}")

    worker = sqew.Worker(client, "jobs", handle, concurrency=4, wait_ms=100)
    with running(worker):
        until(lambda: client.stats("jobs").acked_total == 32
              and client.stats("jobs").dlq == 8, "every message acked or dead-lettered")
    dead = {m.id: m for m in client.dlq_list("jobs")}
    assert set(dead) == failing | rejected
    assert all(dead[i].attempts == 2 and dead[i].last_error == "ValueError: no good: "
               f"{dead[i].payload}" for i in failing)
    assert all(dead[i].attempts == 1 and dead[i].last_error == f"never: {dead[i].payload}"
               for i in rejected)
    assert watch.overlaps == [] and 1 < watch.most_at_once <= 4
    assert len(loops) == 1
    assert (worker.processed, worker.failed, worker.rejected, worker.lost) == (32, 8, 4, 0)
    assert worker.in_flight == 0


def test_a_long_async_handler_keeps_its_lease(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("slow", visibility_ms=1000)
    msg_id = client.enqueue("slow", "long job").message_id
    other = realtime_target.connect(realtime_target.clock)
    go_on = threading.Event()
    calls: list[int] = []

    async def handle(m: models.LeasedMessage) -> None:
        calls.append(m.id)
        while not go_on.is_set():
            await asyncio.sleep(0.02)

    worker = sqew.Worker(client, "slow", handle, wait_ms=100)
    with running(worker):
        until(lambda: calls == [msg_id], "the handler")
        # Three leases' worth of heartbeats while another consumer keeps asking for it.
        until(lambda: other.poll("slow") == [] and worker.lease_extensions >= 9,
              "heartbeats")
        go_on.set()
        until(lambda: client.stats("slow").acked_total == 1, "the ack")
    assert calls == [msg_id] and worker.processed == 1 and worker.lost == 0


def test_stop_lets_async_handlers_under_way_finish(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("jobs")
    client.enqueue_batch("jobs", [{"payload": n} for n in range(5)])
    started = threading.Semaphore(0)
    go_on = threading.Event()

    class Handler:  # an object whose __call__ is async is an async handler too
        async def __call__(self, m: models.LeasedMessage) -> None:
            started.release()
            while not go_on.is_set():
                await asyncio.sleep(0.01)

    worker = sqew.Worker(client, "jobs", Handler(), concurrency=2, wait_ms=100)
    with running(worker) as thread:
        assert started.acquire(timeout=DEADLINE_S) and started.acquire(timeout=DEADLINE_S)
        worker.stop()
        assert worker.stopping and thread.is_alive()  # two handlers still run
        go_on.set()
        thread.join(DEADLINE_S)
    stats = client.stats("jobs")
    assert (stats.acked_total, stats.leased, stats.ready) == (2, 0, 3)
    assert worker.processed == 2


def test_an_async_handler_can_use_an_async_client(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with sqew.Client(db) as client:
        client.create_queue("jobs")
        client.create_queue("done")
        client.enqueue_batch("jobs", [{"payload": n} for n in range(6)])

        async def handle(m: models.LeasedMessage) -> None:
            async with sqew.AsyncClient(db) as results:  # on the worker's loop
                await results.enqueue("done", m.payload * 10)

        worker = sqew.Worker(client, "jobs", handle, concurrency=3, wait_ms=100)
        with running(worker):
            until(lambda: client.stats("done").ready == 6, "the results")
        assert sorted(m.payload for m in client.peek("done")) == [0, 10, 20, 30, 40, 50]
        assert client.stats("jobs").acked_total == 6


def test_a_handler_must_be_callable(tmp_path: Path) -> None:
    with sqew.Client(tmp_path / "w.db") as client:
        with pytest.raises(TypeError, match="must be callable"):
            sqew.Worker(client, "jobs", 3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="concurrency"):
            sqew.Worker(client, "jobs", print, concurrency=0)
