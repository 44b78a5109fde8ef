"""Poll: batches, leases, ordering, delays, TTL."""

from __future__ import annotations

from typing import Any

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import enqueue_many, ids, lease_one


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", visibility_ms=10_000)
    return "q"


def test_empty_queue(client: sqew.Client, q: str) -> None:
    assert client.poll(q) == []
    assert client.poll(q, batch=100) == []


def test_missing_queue(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.poll("nope")


def test_batch(client: sqew.Client, q: str) -> None:
    sent = enqueue_many(client, q, list(range(5)))
    first = client.poll(q, batch=3)
    assert ids(first) == sent[:3]
    assert ids(client.poll(q, batch=3)) == sent[3:]
    assert client.poll(q, batch=3) == []


def test_batch_of_100(client: sqew.Client, q: str) -> None:
    client.enqueue_batch(q, [{"payload": i} for i in range(150)])
    assert [m.payload for m in client.poll(q, batch=100)] == list(range(100))
    assert [m.payload for m in client.poll(q, batch=100)] == list(range(100, 150))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch": 0},
        {"batch": 101},
        {"wait_ms": -1},
        {"wait_ms": 20_001},
        {"visibility_ms": -1},
        {"visibility_ms": 43_200_001},
    ],
)
def test_parameter_ranges(client: sqew.Client, q: str, kwargs: dict[str, Any]) -> None:
    client.enqueue(q, 1)
    with pytest.raises(errors.ValidationError):
        client.poll(q, **kwargs)
    assert client.stats(q).leased == 0


def test_leased_message_fields(client: sqew.Client, clock: ManualClock, q: str) -> None:
    now = clock()
    msg_id = client.enqueue(q, {"x": 1}, priority=3, attributes={"a": "b"}).message_id
    clock.advance(250)
    m = lease_one(client, q)
    assert (m.id, m.queue, m.payload, m.priority, m.attributes) == (
        msg_id, q, {"x": 1}, 3, {"a": "b"},
    )
    assert m.attempts == 1
    assert isinstance(m.token, str) and len(m.token) >= 16
    assert m.lease_expires_at == now + 250 + 10_000
    assert (m.enqueued_at, m.available_at, m.last_error) == (now, now, None)
    assert m.expires_at == now + 345_600_000
    stored = client.get_message(q, msg_id)
    assert stored.attempts == 1


def test_visibility_override(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q, visibility_ms=500)
    assert m.lease_expires_at == clock() + 500
    clock.advance(499)
    assert client.poll(q) == []
    clock.advance(1)
    again = lease_one(client, q)
    assert again.id == m.id and again.attempts == 2
    assert again.lease_expires_at == clock() + 10_000  # the queue's visibility again


def test_no_double_lease(client: sqew.Client, clock: ManualClock, q: str) -> None:
    enqueue_many(client, q, list(range(10)))
    seen: list[int] = []
    for _ in range(12):
        seen += ids(client.poll(q, batch=3))
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 10
    clock.advance(9_999)
    assert client.poll(q, batch=100) == []


def test_lease_expiry_redelivers_with_new_token(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, "p")
    first = lease_one(client, q)
    clock.advance(10_000)
    second = lease_one(client, q)
    assert second.id == first.id
    assert second.token != first.token
    assert second.attempts == 2
    assert second.payload == "p"


def test_priority_then_id(client: sqew.Client, q: str) -> None:
    prios = [0, 5, -3, 5, 1000, -1000, 0]
    sent = [client.enqueue(q, i, priority=p).message_id for i, p in enumerate(prios)]
    expected = [m for _, m in sorted(zip(prios, sent, strict=True), key=lambda t: (-t[0], t[1]))]
    assert ids(client.peek(q, limit=100)) == expected
    assert ids(client.poll(q, batch=100)) == expected


def test_available_at_before_id(client: sqew.Client, clock: ManualClock, q: str) -> None:
    late = client.enqueue(q, "late", delay_ms=100).message_id
    clock.advance(50)
    early = client.enqueue(q, "early").message_id
    clock.advance(100)
    assert late < early
    assert ids(client.poll(q, batch=10)) == [early, late]


def test_priority_before_available_at(client: sqew.Client, clock: ManualClock, q: str) -> None:
    old = client.enqueue(q, "old").message_id
    clock.advance(1000)
    urgent = client.enqueue(q, "urgent", priority=1).message_id
    assert ids(client.poll(q, batch=10)) == [urgent, old]


def test_one_at_a_time_follows_the_same_order(client: sqew.Client, q: str) -> None:
    sent = [client.enqueue(q, i, priority=i % 2).message_id for i in range(6)]
    got = [lease_one(client, q).id for _ in range(6)]
    assert got == sent[1::2] + sent[0::2]


def test_lifo_newest_first_within_priority(client: sqew.Client) -> None:
    client.create_queue("stack", order="lifo")
    a, b, c = (client.enqueue("stack", i).message_id for i in range(3))
    hi = client.enqueue("stack", "hi", priority=1).message_id
    d = client.enqueue("stack", 3).message_id
    assert ids(client.peek("stack")) == [hi, d, c, b, a]
    assert ids(client.poll("stack", batch=2)) == [hi, d]
    assert ids(client.poll("stack", batch=10)) == [c, b, a]


def test_delayed_until_the_clock_passes(client: sqew.Client, clock: ManualClock, q: str) -> None:
    msg_id = client.enqueue(q, 1, delay_ms=5000).message_id
    m = client.get_message(q, msg_id)
    assert m.available_at == m.enqueued_at + 5000
    assert client.poll(q) == [] and client.peek(q) == []
    clock.advance(4999)
    assert client.poll(q) == []
    clock.advance(1)
    assert lease_one(client, q).id == msg_id


def test_expired_is_never_delivered(client: sqew.Client, clock: ManualClock, q: str) -> None:
    short = client.enqueue(q, "short", ttl_ms=1000).message_id
    keep = client.enqueue(q, "keep").message_id
    clock.advance(999)
    assert ids(client.peek(q)) == [short, keep]
    clock.advance(1)
    assert ids(client.peek(q)) == [keep]
    assert ids(client.poll(q, batch=10)) == [keep]
    clock.advance(10_000)
    assert ids(client.poll(q, batch=10)) == [keep]


def test_expired_while_leased_is_not_redelivered(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, "short", ttl_ms=5000)
    lease_one(client, q)
    clock.advance(10_000)  # the lease and the TTL are both over
    assert client.poll(q) == []
    assert client.dlq_list(q) == []


@pytest.mark.parametrize("delay", [2000, 5000])
def test_a_delay_reaching_the_ttl_is_refused(client: sqew.Client, q: str, delay: int) -> None:
    # Such a message would expire before it could ever be delivered.
    with pytest.raises(errors.ValidationError, match="delay_ms"):
        client.enqueue(q, "x", delay_ms=delay, ttl_ms=2000)
    assert client.stats(q).enqueued_total == 0


def test_polls_are_per_queue(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    client.enqueue("other", 1)
    assert client.poll(q) == []
    assert lease_one(client, "other").queue == "other"
