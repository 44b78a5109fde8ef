"""Extend-lease of many leases in one call: ``extend_leases(q, [(id, token, ms), …])``, a status
per item (``extended`` with the lease's new end, ``lease_lost``, ``not_found``), like a batch
ack answers."""

from __future__ import annotations

import msgspec
import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import ids

VIS = 10_000


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", visibility_ms=VIS, max_attempts=10)
    return "q"


def test_each_held_lease_is_extended_and_each_miss_says_why(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue_batch(q, [{"payload": i} for i in range(4)])
    a, b, c, d = client.poll(q, batch=4)
    client.nack(q, b.id, b.token, delay_ms=60_000)  # b's lease is given back
    client.ack(q, c.id, c.token)  # c is gone
    clock.advance(VIS - 100)
    results = client.extend_leases(q, [
        (a.id, a.token, 5000), (b.id, b.token, 5000), (c.id, c.token, 5000), (d.id, d.token, 0),
    ])
    assert [(r.id, r.status) for r in results] == [
        (a.id, "extended"), (b.id, "lease_lost"), (c.id, "not_found"), (d.id, "extended")]
    assert [r.lease_expires_at for r in results] == [
        clock() + 5000, msgspec.UNSET, msgspec.UNSET, clock()]
    # d's lease ended at once (ms 0): ready again; a's lasts 5 s more, past its first end.
    assert ids(client.poll(q)) == [d.id]
    clock.advance(4999)
    assert client.poll(q) == []
    clock.advance(1)
    assert ids(client.poll(q)) == [a.id]


def test_the_tokens_are_kept(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue_batch(q, [{"payload": i} for i in range(3)])
    held = client.poll(q, batch=3)
    results = client.extend_leases(q, [(m.id, m.token, 3 * VIS) for m in held])
    assert {r.status for r in results} == {"extended"}
    clock.advance(2 * VIS)
    assert client.poll(q) == []
    assert {r.status for r in client.ack_batch(q, [(m.id, m.token) for m in held])} == {"acked"}


def test_an_item_repeated_answers_as_one_at_a_time_would(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, 1)
    (m,) = client.poll(q)
    results = client.extend_leases(q, [(m.id, m.token, 5000), (m.id, "stale", 1),
                                       (m.id, m.token, 20_000)])
    assert [r.status for r in results] == ["extended", "lease_lost", "extended"]
    assert results[2].lease_expires_at == clock() + 20_000  # the last one sets the end
    clock.advance(VIS + 5000)
    assert client.poll(q) == []


def test_up_to_1000_items_in_one_call(client: sqew.Client, q: str) -> None:
    client.enqueue_batch(q, [{"payload": i} for i in range(100)])
    held = client.poll(q, batch=100)
    items = [(m.id, m.token, 60_000) for m in held] * 10
    assert [r.status for r in client.extend_leases(q, items)] == ["extended"] * 1000
    with pytest.raises(errors.ValidationError):
        client.extend_leases(q, [*items, items[0]])
    with pytest.raises(errors.ValidationError):
        client.extend_leases(q, [])


@pytest.mark.parametrize("ms", [-1, 43_200_001])
def test_each_ms_is_in_range(client: sqew.Client, q: str, ms: int) -> None:
    client.enqueue(q, 1)
    (m,) = client.poll(q)
    with pytest.raises(errors.ValidationError) as caught:
        client.extend_leases(q, [(m.id, m.token, 1000), (m.id, m.token, ms)])
    assert caught.value.details and caught.value.details[0]["field"] == "extends[1].ms"
    assert client.stats(q).leased == 1


def test_a_missing_queue_is_queue_not_found(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.extend_leases("nope", [(1, "t", 1000)])
