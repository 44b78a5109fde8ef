"""``Client.metrics()``: every queue's depths and counters, DLQs included, equal to its stats.

On a database file the Client reads them itself; over HTTP they are part of ``/metrics``. Either
way one reading of every queue (``QueueService.all_stats``) must say what ``stats`` says of each.
"""

from __future__ import annotations

from metrics_support import labels_of, parse, queue_view, stats_view

import sqew
from sqew.core.clock import ManualClock


def test_every_queue_and_dlq_as_its_stats_say(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("fifo", max_attempts=1)
    client.create_queue("lifo", order="lifo")
    client.create_queue("empty")
    for i in range(4):
        client.enqueue("fifo", i)
    client.enqueue("fifo", "later", delay_ms=60_000)
    client.enqueue("fifo", "short", ttl_ms=1_000)
    client.enqueue("fifo", "once", idempotency_key="k")
    client.enqueue("fifo", "once", idempotency_key="k")  # a duplicate: not counted as enqueued
    for priority in (1, 5, 3):
        client.enqueue("lifo", priority, priority=priority)
    clock.advance(500)
    leased = client.poll("fifo", batch=2)
    client.ack("fifo", leased[0].id, leased[0].token)
    client.nack("fifo", leased[1].id, leased[1].token)  # max_attempts 1: to the DLQ
    client.poll("lifo")
    clock.advance(1_500)  # "short" expired; the oldest ready message is 2 s old

    samples = parse(client.metrics())
    names = {"fifo", "fifo.dlq", "lifo", "lifo.dlq", "empty", "empty.dlq"}
    assert labels_of(samples, "sqew_queue_ready", "queue") == names
    for name in sorted(names):
        assert queue_view(samples, name) == stats_view(client.stats(name)), name
    fifo = queue_view(samples, "fifo")
    assert (fifo["ready"], fifo["delayed"], fifo["leased"], fifo["dlq"]) == (3, 1, 0, 1)
    assert fifo["oldest_ready_age_ms"] == 2_000
    assert (fifo["enqueued_total"], fifo["acked_total"], fifo["dead_lettered_total"]) == (7, 1, 1)
    assert queue_view(samples, "lifo")["leased"] == 1
    assert ("sqew_build_info", (("version", sqew.__version__),)) in samples
