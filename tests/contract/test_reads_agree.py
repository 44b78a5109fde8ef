"""Reads agree with each other and with the next poll: stats, peek, scan and poll count a
message whose lease ended the same way (ready again, or on its way to the DLQ after its last
allowed attempt), before any poll or reaper run has swept it."""

from __future__ import annotations

import sqew
from sqew.core.clock import ManualClock

# Each test reads less than the targets' reap interval (1 s) after its poll reaped: no reaper
# run sweeps the ended leases first.
LEASE_MS = 100
AFTER_LEASE_MS = 200


def states(client: sqew.Client, queue: str) -> dict[int, str]:
    return {m.id: m.state for m in client.scan(queue).messages}


def test_a_message_whose_lease_ended_is_ready_to_every_read(
    client: sqew.Client, clock: ManualClock
) -> None:
    client.create_queue("q", visibility_ms=LEASE_MS, max_attempts=3)
    first = client.enqueue("q", "first").message_id
    clock.advance(10)
    second = client.enqueue("q", "second").message_id
    (held,) = client.poll("q")
    assert held.id == first
    clock.advance(AFTER_LEASE_MS)
    stats = client.stats("q")
    assert (stats.ready, stats.leased, stats.delayed, stats.dlq) == (2, 0, 0, 0)
    assert stats.oldest_ready_age_ms == AFTER_LEASE_MS  # the second, ready since enqueued
    assert states(client, "q") == {first: "ready", second: "ready"}
    peeked = [m.id for m in client.peek("q")]
    # Ready again from the end of its lease: after the message that was waiting meanwhile.
    assert peeked == [second, first]
    assert [m.id for m in client.poll("q", batch=10)] == peeked


def test_a_lease_that_ended_makes_the_message_ready_from_its_end(
    client: sqew.Client, clock: ManualClock
) -> None:
    client.create_queue("q", visibility_ms=LEASE_MS)
    client.enqueue("q", "p")
    client.poll("q")
    clock.advance(AFTER_LEASE_MS)
    assert client.stats("q").oldest_ready_age_ms == AFTER_LEASE_MS - LEASE_MS


def test_a_message_whose_last_lease_ended_counts_in_the_dlq(
    client: sqew.Client, clock: ManualClock
) -> None:
    client.create_queue("once", visibility_ms=LEASE_MS, max_attempts=1)
    msg_id = client.enqueue("once", "p").message_id
    client.poll("once")
    clock.advance(AFTER_LEASE_MS)
    stats = client.stats("once")
    assert (stats.ready, stats.leased, stats.dlq) == (0, 0, 1)
    assert client.stats("once.dlq").ready == 1
    assert client.peek("once") == []
    assert states(client, "once") == {msg_id: "dead"}
    assert client.poll("once") == []
    assert [m.id for m in client.dlq_list("once")] == [msg_id]
    assert (client.stats("once").dlq, client.stats("once.dlq").ready) == (1, 1)


def test_a_dlq_message_whose_lease_ended_is_ready_again(
    client: sqew.Client, clock: ManualClock
) -> None:
    client.create_queue("q", max_attempts=1)
    msg_id = client.enqueue("q", "p").message_id
    (m,) = client.poll("q")
    client.nack("q", m.id, m.token)
    client.poll("q.dlq", visibility_ms=LEASE_MS)
    clock.advance(AFTER_LEASE_MS)
    assert client.stats("q.dlq").ready == 1
    assert [p.id for p in client.peek("q.dlq")] == [msg_id]
    assert states(client, "q.dlq") == {msg_id: "ready"}
    assert [p.id for p in client.poll("q.dlq")] == [msg_id]
