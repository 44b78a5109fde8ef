"""Many processes on one SQLite file: every message is delivered and acked exactly once.

Two producer processes enqueue 4000 uniquely-numbered messages (singles and batches) while four
consumer processes (batch 1 and batch 10) poll and ack them. The visibility timeout is long, so
no lease expires during the test: a message acked twice or never would be a real fault.
"""

from __future__ import annotations

import collections
from pathlib import Path

import sqew

from .support import Procs, finish, wait_for

TOTAL = 4000
PRODUCERS = 2
CONSUMER_BATCHES = (1, 10, 1, 10)
DEADLINE_S = 60

PRODUCER = r"""
import sys, sqew
db, queue, who, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = sqew.Client(db)
# Chunk sizes cycle through singles and batches of varied size.
sizes = [1, 25, 1, 1, 100, 7, 1, 50]
i = step = 0
while i < count:
    n = min(sizes[step % len(sizes)], count - i)
    step += 1
    if n == 1:
        client.enqueue(queue, {"id": f"{who}-{i}"})
    else:
        results = client.enqueue_batch(
            queue, [{"payload": {"id": f"{who}-{j}"}} for j in range(i, i + n)])
        assert len(results) == n and not any(r.duplicate for r in results), results
    i += n
client.close()
"""

CONSUMER = r"""
import os, sys, time, sqew
db, queue, batch, marker, limit, ready = (
    sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), sys.argv[6])
client = sqew.Client(db)
open(ready, "w").close()  # the test starts the producers once every consumer is up
deadline = time.monotonic() + limit
while True:
    if time.monotonic() > deadline:
        print("DEADLINE", flush=True)
        sys.exit(3)
    msgs = client.poll(queue, batch=batch, wait_ms=100)
    if msgs:
        if batch == 1:
            for m in msgs:
                client.ack(queue, m.id, m.token)
                print(m.payload["id"], flush=True)
        else:
            results = client.ack_batch(queue, [(m.id, m.token) for m in msgs])
            for m, r in zip(msgs, results, strict=True):
                assert r.id == m.id, (r, m)
                print(m.payload["id"] if r.status == "acked" else f"NOT-ACKED {r}", flush=True)
        continue
    if os.path.exists(marker):
        s = client.stats(queue)
        if s.ready == 0 and s.leased == 0 and s.delayed == 0:
            break
client.close()
"""


def test_four_consumers_two_producers_each_message_acked_exactly_once(
    tmp_path: Path, procs: Procs
) -> None:
    db = str(tmp_path / "mp.db")
    client = sqew.Client(db)
    client.create_queue("jobs", visibility_ms=60000)
    marker = tmp_path / "producers-done"

    outputs = [tmp_path / f"consumer-{n}.out" for n in range(len(CONSUMER_BATCHES))]
    ready = [tmp_path / f"consumer-{n}.ready" for n in range(len(CONSUMER_BATCHES))]
    consumers = [
        procs.python(CONSUMER, db, "jobs", str(batch), str(marker), str(DEADLINE_S), str(flag),
                     stdout=out)
        for batch, out, flag in zip(CONSUMER_BATCHES, outputs, ready, strict=True)
    ]
    wait_for(lambda: all(f.exists() for f in ready), 30, "the consumers to start")
    per_producer = TOTAL // PRODUCERS
    producers = [
        procs.python(PRODUCER, db, "jobs", f"p{n}", str(per_producer)) for n in range(PRODUCERS)
    ]
    for proc in producers:
        code, _, err = finish(proc, DEADLINE_S)
        assert code == 0, err
    marker.touch()
    for proc in consumers:
        code, _, err = finish(proc, DEADLINE_S)
        assert code == 0, err

    lines = [line for out in outputs for line in out.read_text().splitlines()]
    assert [line for line in lines if line[:1] != "p"] == []  # no NOT-ACKED, no DEADLINE
    counts = collections.Counter(lines)
    twice = {k: v for k, v in counts.items() if v > 1}
    expected = {f"p{n}-{i}" for n in range(PRODUCERS) for i in range(per_producer)}
    assert twice == {}
    assert set(counts) - expected == set()
    assert expected - set(counts) == set(), f"{len(expected - set(counts))} never acked"

    stats = client.stats("jobs")
    assert (stats.ready, stats.leased, stats.delayed) == (0, 0, 0)
    assert stats.enqueued_total == TOTAL
    assert stats.acked_total == TOTAL
    assert client.stats("jobs.dlq").ready == 0
    client.close()

