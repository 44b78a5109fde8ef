"""Two ``sqew serve`` replicas on one PostgreSQL database: producers and
consumers on both at once, every message delivered and acked exactly once; a long poll on one
replica is woken by an enqueue on the other (LISTEN/NOTIFY)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from cli_support import Server

import sqew
from sqew.errors import SqewError

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

PER_PRODUCER = 1000  # messages per replica's producer
CHUNK = 25  # per enqueue_batch
CONSUMERS = 2  # per replica
DEADLINE_S = 120  # the whole exchange, on a loaded 2-core machine


def test_two_replicas_deliver_every_message_exactly_once(
    pg_url: str, serve: Callable[..., Server]
) -> None:
    a, b = serve(pg_url), serve(pg_url)
    with sqew.Client(a.url) as admin:
        # A long lease: a message leased twice (by any consumer, on either replica) would be
        # delivered twice within the test; none may be.
        admin.create_queue("jobs", visibility_ms=600_000)
    expected = {(src, i) for src in "ab" for i in range(PER_PRODUCER)}
    deliveries: list[tuple[str, int, int]] = []  # (src, n, message id)
    statuses: Counter[str] = Counter()
    enqueued_ids: list[int] = []
    lock = threading.Lock()
    deadline = time.monotonic() + DEADLINE_S

    def produce(url: str, src: str) -> None:
        with sqew.Client(url) as client:
            for start in range(0, PER_PRODUCER, CHUNK):
                results = client.enqueue_batch("jobs", [
                    {"payload": {"src": src, "n": n}}
                    for n in range(start, min(start + CHUNK, PER_PRODUCER))])
                with lock:
                    enqueued_ids.extend(r.message_id for r in results)

    def consume(url: str) -> None:
        with sqew.Client(url) as client:
            while time.monotonic() < deadline:
                with lock:
                    if len(deliveries) >= len(expected):
                        return
                got = client.poll("jobs", batch=10, wait_ms=500)
                if not got:
                    continue
                with lock:
                    deliveries.extend((m.payload["src"], m.payload["n"], m.id) for m in got)
                results = client.ack_batch("jobs", [(m.id, m.token) for m in got])
                with lock:
                    statuses.update(r.status for r in results)

    with ThreadPoolExecutor(max_workers=2 + 2 * CONSUMERS) as pool:
        consumers = [pool.submit(consume, srv.url) for srv in (a, b) for _ in range(CONSUMERS)]
        producers = [pool.submit(produce, a.url, "a"), pool.submit(produce, b.url, "b")]
        for f in producers:
            f.result()
        for f in consumers:
            f.result()

    assert len(enqueued_ids) == len(set(enqueued_ids)) == len(expected)
    per_message = Counter((src, n) for src, n, _ in deliveries)
    assert set(per_message) == expected  # every message delivered …
    assert [k for k, times in per_message.items() if times > 1] == []  # … exactly once
    assert sorted(i for _, _, i in deliveries) == sorted(enqueued_ids)
    assert statuses == Counter({"acked": len(expected)})  # every ack took
    for srv in (a, b):  # both replicas see the same, settled queue
        with sqew.Client(srv.url) as client:
            stats = client.stats("jobs")
        assert (stats.ready, stats.leased, stats.delayed) == (0, 0, 0)
        assert (stats.enqueued_total, stats.acked_total) == (len(expected), len(expected))


def test_a_long_poll_on_one_replica_wakes_on_an_enqueue_on_the_other(
    pg_url: str, serve: Callable[..., Server]
) -> None:
    # One waiting poll at most on A: a second long poll there is refused while the first
    # waits, which is how the test sees that the first is parked.
    a, b = serve(pg_url, max_waiting_polls="1"), serve(pg_url)
    wait_ms = 20_000  # the most a poll may wait (docs/rest.md)
    with sqew.Client(a.url) as on_a, sqew.Client(b.url) as on_b:
        on_a.create_queue("wake")
        assert on_a.poll("wake", wait_ms=50) == []  # A now listens (opened by a first wait)
        with ThreadPoolExecutor(max_workers=1) as pool:
            def long_poll() -> tuple[list[Any], float]:
                with sqew.Client(a.url) as client:
                    while True:
                        started = time.monotonic()
                        try:
                            got = client.poll("wake", wait_ms=wait_ms)
                        except SqewError as exc:  # a probe held A's one slot a moment
                            if "max_waiting_polls" not in str(exc):
                                raise
                            continue
                        return got, time.monotonic() - started

            waiting = pool.submit(long_poll)
            _until_parked(on_a, waiting)
            sent = on_b.enqueue("wake", {"hello": "from b"})
            got, waited_s = waiting.result(timeout=wait_ms / 1000 + 30)
    assert [(m.id, m.payload) for m in got] == [(sent.message_id, {"hello": "from b"})]
    assert waited_s < wait_ms / 1000  # it returned with the message, not at the end of its wait


def _until_parked(client: sqew.Client, waiting: Any) -> None:
    """Return once the server holds one long poll: a probe long poll is refused (the server
    allows one at a time). Fails if the poll under test ended first or never parks."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert not waiting.done(), waiting.result()
        try:
            probe = client.poll("wake", wait_ms=1)
        except SqewError as exc:
            if "max_waiting_polls" in str(exc):
                return
            raise
        assert probe == []
    raise AssertionError("the long poll under test never waited")
