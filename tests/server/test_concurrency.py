"""Concurrent consumers and producers over real HTTP: each message acked exactly once.

The same kind of load on one server process (8 long-polling consumers, 2 producers), across
the two processes of ``sqew serve --workers 2``, and on two separate servers sharing one file
(a long poll on one woken by an enqueue on the other); consumers that abandon leases (a
redelivery never overlaps the lease it replaces); concurrent writes that fail (they fail alone,
not their group commit); a slow client holding up no one.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

import sqew

from .support import LOG_WAITS, port_of, read_response, request_head, serve

DEADLINE_S = 90


def produce(url: str, first: int, count: int) -> None:
    """Enqueue payloads ``{"n": first..first+count-1}``: every third a single, else batches."""
    with sqew.Client(url) as c:
        n, end = first, first + count
        while n < end:
            if n % 3 == 0:
                c.enqueue("q", {"n": n})
                n += 1
            else:
                top = min(n + 40, end)
                c.enqueue_batch("q", [{"payload": {"n": i}} for i in range(n, top)])
                n = top


PRODUCERS = 2


PER_PRODUCER = 1500


CONSUMERS = 8


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
        producers = [pool.submit(produce, server.url, p * PER_PRODUCER, PER_PRODUCER)
                     for p in range(PRODUCERS)]
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


def test_consumers_across_two_worker_processes(tmp_path: Path) -> None:
    producers, per_producer, consumers = 2, 1000, 6
    total = producers * per_producer
    with serve(tmp_path / "w.db", "--workers", "2") as server:
        with sqew.Client(server.url) as admin:
            admin.create_queue("q", visibility_ms=120_000)  # no redelivery in this test
        produced = threading.Event()
        deadline = time.monotonic() + DEADLINE_S
        acked: list[list[int]] = [[] for _ in range(consumers)]

        def consume(k: int) -> None:
            with sqew.Client(server.url) as c:
                while time.monotonic() < deadline:
                    got = c.poll("q", batch=1 + 3 * k, wait_ms=1000)
                    if not got:
                        if produced.is_set() and c.stats("q").ready == 0:
                            return
                        continue
                    results = c.ack_batch("q", [(m.id, m.token) for m in got])
                    assert [r.status for r in results] == ["acked"] * len(got)
                    acked[k] += [m.payload["n"] for m in got]

        with ThreadPoolExecutor(consumers + producers) as pool:
            waiting = [pool.submit(consume, k) for k in range(consumers)]
            sending = [pool.submit(produce, server.url, p * per_producer, per_producer)
                       for p in range(producers)]
            for f in sending:
                f.result(timeout=DEADLINE_S)
            produced.set()
            for f in waiting:
                f.result(timeout=DEADLINE_S)
        counts = Counter(n for per in acked for n in per)
        assert sorted(counts) == list(range(total))  # none lost
        assert set(counts.values()) == {1}  # none delivered (so none acked) twice
        with sqew.Client(server.url) as admin:
            stats = admin.stats("q")
        assert (stats.ready, stats.leased, stats.delayed) == (0, 0, 0)
        assert stats.enqueued_total == stats.acked_total == total


def test_two_servers_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    sqew.LocalClient(db).close()  # create the file once, before two servers race to
    with (
        ThreadPoolExecutor(1) as pool, serve(db) as a, serve(db, env=LOG_WAITS) as b,
        sqew.Client(a.url) as ca, sqew.Client(b.url) as cb,
    ):
        ca.create_queue("q", visibility_ms=120_000)
        # A poll waiting on B is woken by an enqueue through A (another process): it answers
        # within half its wait, which only a poll left waiting misses.
        wait_ms = 15_000
        waiting = pool.submit(cb.poll, "q", wait_ms=wait_ms)
        b.until_parked("q", 1)
        sent = ca.enqueue("q", "through a").message_id
        got = waiting.result(timeout=wait_ms / 1000 / 2)
        assert [(m.id, m.payload) for m in got] == [(sent, "through a")]
        cb.ack("q", got[0].id, got[0].token)
        # Both serve the same queue: consumers on both, each message once.
        ids = [r.message_id for r in
               ca.enqueue_batch("q", [{"payload": i} for i in range(200)])]
        seen: list[int] = []
        for _ in range(100):
            batch = ca.poll("q", batch=7) + cb.poll("q", batch=5)
            if not batch:
                break
            seen += [m.id for m in batch]
            for m in batch:
                (ca if m.id % 2 else cb).ack("q", m.id, m.token)
        assert sorted(seen) == ids
        assert ca.stats("q").acked_total == 201


def test_abandoned_leases_are_redelivered_only_after_they_expire(
    start_server: Callable[..., Any],
) -> None:
    # Consumers drop (never ack) every message with n % 7 == 0 the first time they get it.
    # The lease runs out after 1 s and another consumer gets it; each message ends acked
    # once, and a redelivery's lease starts no earlier than the one it replaces ended.
    server = start_server()
    visibility, total, consumers = 1000, 700, 6
    with sqew.Client(server.url) as admin:
        admin.create_queue("q", visibility_ms=visibility, max_attempts=5)
    deliveries: list[tuple[int, int, int]] = []  # (id, attempts, lease_expires_at)
    acked: list[int] = []
    lock = threading.Lock()
    produced = threading.Event()
    deadline = time.monotonic() + DEADLINE_S

    def consume(k: int) -> None:
        with sqew.Client(server.url) as c:
            while time.monotonic() < deadline:
                got = c.poll("q", batch=5, wait_ms=500)
                with lock:
                    deliveries.extend((m.id, m.attempts, m.lease_expires_at) for m in got)
                keep = [m for m in got if m.payload["n"] % 7 or m.attempts > 1]
                if keep:
                    results = c.ack_batch("q", [(m.id, m.token) for m in keep])
                    assert [r.status for r in results] == ["acked"] * len(keep)
                    with lock:
                        acked.extend(m.payload["n"] for m in keep)
                with lock:
                    done = len(acked) == total
                if done or (not got and produced.is_set() and _drained(c)):
                    return

    with ThreadPoolExecutor(consumers + 1) as pool:
        waiting = [pool.submit(consume, k) for k in range(consumers)]
        pool.submit(produce, server.url, 0, total).result(timeout=DEADLINE_S)
        produced.set()
        for f in waiting:
            f.result(timeout=DEADLINE_S)

    assert sorted(acked) == list(range(total))
    by_id: dict[int, list[tuple[int, int]]] = {}
    for msg_id, attempts, expires in deliveries:
        by_id.setdefault(msg_id, []).append((attempts, expires))
    redelivered = {i: sorted(d) for i, d in by_id.items() if len(d) > 1}
    assert len(redelivered) == len([n for n in range(total) if n % 7 == 0])
    for leases in redelivered.values():
        assert [a for a, _ in leases] == [1, 2]
        (_, first_end), (_, second_end) = leases
        assert second_end - visibility >= first_end  # leased again only after it expired
    with sqew.Client(server.url) as admin:
        stats = admin.stats("q")
    assert (stats.ready, stats.leased, stats.dlq, stats.acked_total) == (0, 0, 0, total)


def _drained(c: sqew.Client) -> bool:
    stats = c.stats("q")
    return stats.ready == stats.leased == stats.delayed == 0


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


def test_a_slow_client_does_not_hold_up_others(start_server: Callable[..., Any]) -> None:
    # A client trickling its request body in keeps one connection busy; everyone else is
    # served meanwhile (the event loop never blocks on a request's body).
    server = start_server()
    with sqew.Client(server.url) as c:
        c.create_queue("q")
        body = b'{"payload": "slow"}'
        with socket.create_connection(("127.0.0.1", port_of(server.url)), timeout=10) as slow:
            slow.sendall(request_head("POST", "/queues/q/messages", length=len(body)) + body[:5])
            for i in range(50):
                c.enqueue("q", i)
            assert c.stats("q").ready == 50
            slow.sendall(body[5:])
            assert read_response(slow).status == 201
        assert c.stats("q").ready == 51
        assert httpx.get(f"{server.url}/healthz", timeout=10).json() == {"status": "ok"}
