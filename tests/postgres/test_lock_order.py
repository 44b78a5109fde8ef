"""Two ``sqew serve`` replicas writing the same queues at once take their rows in one order
(queue rows first, by id; ``Tx.lock_queues``): PostgreSQL detects no deadlock between them.

Before, an ack (queue row, then the message's DELETE) and a transaction holding that
message's row (a nack, a claim expiring leases, a group commit of several operations) then
updating the queue's counters waited for each other until ``deadlock_timeout``; the write was
retried, so only the server's log showed it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pg_support
import pytest
from cli_support import Server

import sqew

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

ROUNDS = 60  # per worker
WORKERS = 3  # per replica
QUEUES = ("q1", "q2")
DEADLINE_S = 120


def test_replicas_writing_the_same_queues_never_deadlock(
    pg_url: str, serve: Callable[..., Server]
) -> None:
    log = pg_support.cluster().server.log
    seen = len(log.read_bytes())
    a, b = serve(pg_url), serve(pg_url)
    with sqew.Client(a.url) as admin:
        for name in QUEUES:
            # Short leases, expired while their holders still ack or nack them: claims expire
            # leases (message rows, then the counters) as acks of old tokens run.
            admin.create_queue(name, visibility_ms=20, max_attempts=3)
    deadline = time.monotonic() + DEADLINE_S

    def work(url: str, first: int) -> int:
        done = 0
        with sqew.Client(url) as client:
            for i in range(ROUNDS):
                if time.monotonic() > deadline:
                    break
                queue = QUEUES[(first + i) % 2]
                client.enqueue_batch(queue, [{"payload": {"i": i}} for _ in range(4)])
                got = client.poll(queue, batch=4)
                half = len(got) // 2
                if got[:half]:
                    client.ack_batch(queue, [(m.id, m.token) for m in got[:half]])
                if got[half:]:
                    client.nack_batch(
                        queue, [{"id": m.id, "token": m.token, "delay_ms": 0} for m in got[half:]]
                    )
                done += 1
        return done

    with ThreadPoolExecutor(max_workers=2 * WORKERS) as pool:
        futures = [pool.submit(work, srv.url, w) for srv in (a, b) for w in range(WORKERS)]
        rounds = sum(f.result() for f in futures)

    assert rounds > 0
    written = log.read_bytes()[seen:].decode(errors="replace")
    assert "deadlock detected" not in written, written[-3000:]
