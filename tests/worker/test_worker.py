"""``sqew.Worker`` on every target (a file, a server in a thread, PostgreSQL): every message
ends acked or in the DLQ as the handler decided, none handled twice at once, long handlers
keep their leases through heartbeats, and ``stop()`` drains what is under way."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from targets import Target

import sqew
from sqew import models

DEADLINE_S = 20.0


def until(done: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Return once ``done()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@contextmanager
def running(worker: sqew.Worker) -> Iterator[threading.Thread]:
    """``worker.run()`` on a thread; stopped and joined when the block ends."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:  # handed to the test below
            failure.append(exc)

    thread = threading.Thread(target=run, name="test-worker")
    thread.start()
    try:
        yield thread
    finally:
        worker.stop()
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), "the worker did not return"
    if failure:
        raise failure[0]


class Watch:
    """Records what a handler sees: calls per message, and which run at the same time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[int] = set()
        self.calls: dict[int, int] = {}
        self.most_at_once = 0
        self.overlaps: list[int] = []

    @contextmanager
    def handling(self, m: models.LeasedMessage) -> Iterator[None]:
        with self.lock:
            if m.id in self.running:
                self.overlaps.append(m.id)
            self.running.add(m.id)
            self.calls[m.id] = self.calls.get(m.id, 0) + 1
            self.most_at_once = max(self.most_at_once, len(self.running))
        try:
            yield
        finally:
            with self.lock:
                self.running.discard(m.id)


def test_every_message_ends_acked_or_in_the_dlq(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("jobs", max_attempts=2, backoff_base_ms=0, backoff_max_ms=0)
    ids = [r.message_id for r in client.enqueue_batch(
        "jobs", [{"payload": n} for n in range(60)])]
    failing = {ids[n] for n in range(60) if n % 10 == 3}
    rejected = {ids[n] for n in range(60) if n % 10 == 4}
    watch = Watch()

    def handle(m: models.LeasedMessage) -> None:
        with watch.handling(m):
            time.sleep(0.002)  # long enough for handlers to overlap
            if m.id in failing:
                raise ValueError(f"no good: {m.payload}")
            if m.id in rejected:
                raise sqew.Reject(f"never: {m.payload}")

    worker = sqew.Worker(client, "jobs", handle, concurrency=4, wait_ms=100)
    with running(worker):
        until(lambda: _settled(client.stats("jobs"), len(failing) + len(rejected)),
              "every message acked or dead-lettered")
    stats = client.stats("jobs")
    assert (stats.acked_total, stats.dead_lettered_total) == (48, 12)
    dead = {m.id: m for m in client.dlq_list("jobs")}
    assert set(dead) == failing | rejected
    assert all(dead[i].attempts == 2 and dead[i].last_error == "ValueError: no good: "
               f"{dead[i].payload}" for i in failing)
    assert all(dead[i].attempts == 1 and dead[i].last_error == f"never: {dead[i].payload}"
               for i in rejected)
    assert watch.overlaps == []
    assert 1 < watch.most_at_once <= 4
    assert {i: watch.calls[i] for i in ids} == {i: 2 if i in failing else 1 for i in ids}
    assert (worker.processed, worker.failed, worker.rejected, worker.lost) == (48, 12, 6, 0)
    assert worker.in_flight == 0


def _settled(stats: models.Stats, dead: int) -> bool:
    return (stats.ready, stats.delayed, stats.leased, stats.dlq) == (0, 0, 0, dead)


def test_a_long_handler_keeps_its_lease(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("slow", visibility_ms=1000)
    msg_id = client.enqueue("slow", "long job").message_id
    other = realtime_target.connect(realtime_target.clock)
    watch = Watch()
    go_on = threading.Event()

    def handle(m: models.LeasedMessage) -> None:
        with watch.handling(m):
            assert go_on.wait(DEADLINE_S)

    worker = sqew.Worker(client, "slow", handle, wait_ms=100)
    with running(worker):
        until(lambda: watch.calls == {msg_id: 1}, "the handler")
        # Three leases' worth of time (heartbeats every third of the lease), while another
        # consumer keeps asking for the message.
        deadline = time.monotonic() + DEADLINE_S
        while worker.lease_extensions < 9:
            assert time.monotonic() < deadline, "no heartbeats"
            assert other.poll("slow") == []
            time.sleep(0.05)
        go_on.set()
        until(lambda: client.stats("slow").acked_total == 1, "the ack")
    assert watch.calls == {msg_id: 1}
    assert worker.processed == 1 and worker.lost == 0
    assert client.stats("slow").ready == 0


def test_stop_lets_handlers_under_way_finish(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("jobs")
    client.enqueue_batch("jobs", [{"payload": n} for n in range(5)])
    started = threading.Semaphore(0)
    go_on = threading.Event()

    def handle(m: models.LeasedMessage) -> None:
        started.release()
        assert go_on.wait(DEADLINE_S)

    worker = sqew.Worker(client, "jobs", handle, concurrency=2, wait_ms=100)
    with running(worker) as thread:
        assert started.acquire(timeout=DEADLINE_S) and started.acquire(timeout=DEADLINE_S)
        worker.stop()
        assert worker.stopping and thread.is_alive()  # two handlers still run
        go_on.set()
        thread.join(DEADLINE_S)
    stats = client.stats("jobs")
    assert (stats.acked_total, stats.leased, stats.ready) == (2, 0, 3)
    assert [m.attempts for m in client.peek("jobs")] == [0, 0, 0]  # never leased
    assert worker.processed == 2


def test_a_handler_past_the_drain_timeout_is_left_to_its_lease(tmp_path: Any) -> None:
    client = sqew.Client(tmp_path / "w.db")
    client.create_queue("jobs", visibility_ms=400)
    msg_id = client.enqueue("jobs", "stuck").message_id
    started, go_on = threading.Event(), threading.Event()

    def handle(m: models.LeasedMessage) -> None:
        started.set()
        go_on.wait(DEADLINE_S)

    worker = sqew.Worker(client, "jobs", handle, wait_ms=100, drain_timeout_s=0.1)
    try:
        with running(worker):
            assert started.wait(DEADLINE_S)
        assert worker.in_flight == 1 and worker.processed == 0
        # No more heartbeats: the lease runs out and another consumer gets the message.
        until(lambda: [m.id for m in client.poll("jobs")] == [msg_id], "the redelivery")
    finally:
        go_on.set()
        client.close()


def test_a_missing_queue_fails_the_run(tmp_path: Any) -> None:
    with sqew.Client(tmp_path / "w.db") as client, pytest.raises(sqew.errors.QueueNotFound):
        sqew.Worker(client, "nope", print).run()
