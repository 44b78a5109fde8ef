"""8 consumers long-polling one queue over HTTP while producers enqueue thousands of messages:
each message is acked exactly once, none is lost, none is delivered to two consumers."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqew

PRODUCERS = 2
PER_PRODUCER = 1500
CONSUMERS = 8
DEADLINE_S = 90


def test_eight_long_polling_consumers_and_two_producers(
    start_server: Callable[..., Any],
) -> None:
    server = start_server()
    admin = sqew.Client(server.url)
    admin.create_queue("q", visibility_ms=120_000)  # no redelivery during the test
    produced = threading.Event()
    acked: list[list[int]] = [[] for _ in range(CONSUMERS)]
    delivered: list[list[tuple[int, int]]] = [[] for _ in range(CONSUMERS)]  # (id, attempts)
    deadline = time.monotonic() + DEADLINE_S

    def produce(p: int) -> None:
        with sqew.Client(server.url) as c:
            n = p * PER_PRODUCER
            while n < (p + 1) * PER_PRODUCER:
                if n % 3 == 0:  # singles and batches of 50, interleaved
                    c.enqueue("q", {"n": n})
                    n += 1
                else:
                    top = min(n + 50, (p + 1) * PER_PRODUCER)
                    c.enqueue_batch("q", [{"payload": {"n": i}} for i in range(n, top)])
                    n = top

    def consume(k: int) -> None:
        with sqew.Client(server.url) as c:
            while time.monotonic() < deadline:
                got = c.poll("q", batch=1 + k % 10, wait_ms=1000)
                if not got:
                    if produced.is_set() and c.stats("q").ready == 0:
                        return
                    continue
                delivered[k] += [(m.id, m.attempts) for m in got]
                results = c.ack_batch("q", [(m.id, m.token) for m in got])
                assert [r.status for r in results] == ["acked"] * len(got)
                acked[k] += [m.payload["n"] for m in got]

    with ThreadPoolExecutor(CONSUMERS + PRODUCERS) as pool:
        consumers = [pool.submit(consume, k) for k in range(CONSUMERS)]
        producers = [pool.submit(produce, p) for p in range(PRODUCERS)]
        for f in producers:
            f.result(timeout=DEADLINE_S)
        produced.set()
        for f in consumers:
            f.result(timeout=DEADLINE_S)

    total = PRODUCERS * PER_PRODUCER
    counts = Counter(n for per in acked for n in per)
    assert sorted(counts) == list(range(total))  # none lost
    assert set(counts.values()) == {1}  # none acked twice
    deliveries = Counter(i for per in delivered for i, _ in per)
    assert len(deliveries) == total and set(deliveries.values()) == {1}  # none delivered twice
    assert {a for per in delivered for _, a in per} == {1}
    assert sum(1 for per in acked if per) >= 2  # the work really was shared
    stats = admin.stats("q")
    assert (stats.ready, stats.leased, stats.delayed) == (0, 0, 0)
    assert stats.enqueued_total == stats.acked_total == total
    admin.close()


def test_concurrent_writes_that_fail_fail_alone(start_server: Callable[..., Any]) -> None:
    # Concurrent requests share the writer's transactions (group commit); a request that fails
    # (unknown queue, payload over the limit) must not take the others of its group with it.
    server = start_server()
    with sqew.Client(server.url) as admin:
        admin.create_queue("q", max_payload_bytes=100)

    def send(i: int) -> str:
        with sqew.Client(server.url) as c:
            kind = ("ok", "missing", "large")[i % 3]
            try:
                if kind == "ok":
                    c.enqueue("q", {"i": i})
                elif kind == "missing":
                    c.enqueue("nope", {"i": i})
                else:
                    c.enqueue("q", "x" * 200)
            except sqew.SqewError as exc:
                return f"{kind}:{exc.code}"
            return f"{kind}:ok"

    with ThreadPoolExecutor(24) as pool:
        outcomes = Counter(pool.map(send, range(600)))
    assert outcomes == {"ok:ok": 200, "missing:QueueNotFound": 200,
                        "large:PayloadTooLarge": 200}
    with sqew.Client(server.url) as admin:
        stats = admin.stats("q")
        assert stats.ready == stats.enqueued_total == 200
