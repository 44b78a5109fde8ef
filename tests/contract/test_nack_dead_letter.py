"""Permanent failure: a nack with ``dead_letter`` moves the message to its DLQ at once, with
its error, whatever attempts it has left (docs/rest.md, "Dead-lettering")."""

from __future__ import annotations

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import ids, lease_one


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", visibility_ms=10_000, max_attempts=5)
    return "q"


def test_nack_dead_letter_moves_at_once_with_its_error(client: sqew.Client, q: str) -> None:
    msg_id = client.enqueue(q, {"job": 1}, priority=3, attributes={"k": "v"}).message_id
    m = lease_one(client, q)  # attempt 1 of 5
    result = client.nack(q, m.id, m.token, error="bad input: no such customer",
                         dead_letter=True)
    assert (result.id, result.status) == (msg_id, "dead_lettered")
    assert client.poll(q) == []
    (dead,) = client.dlq_list(q)
    assert (dead.id, dead.payload, dead.priority, dead.attributes) == (
        msg_id, {"job": 1}, 3, {"k": "v"})
    assert (dead.attempts, dead.last_error, dead.origin_queue) == (
        1, "bad input: no such customer", "q")
    stats = client.stats(q)
    assert (stats.ready, stats.leased, stats.dlq) == (0, 0, 1)
    assert (stats.nacked_total, stats.dead_lettered_total) == (1, 1)
    with pytest.raises(errors.MessageNotFound):  # it left the queue: the token is no more
        client.ack(q, m.id, m.token)


def test_nack_dead_letter_ignores_delay(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    assert client.nack(q, m.id, m.token, delay_ms=60_000,
                       dead_letter=True).status == "dead_lettered"
    assert ids(client.dlq_list(q)) == [m.id]


def test_nack_dead_letter_false_requeues(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    assert client.nack(q, m.id, m.token, delay_ms=0,
                       dead_letter=False).status == "requeued"
    assert client.dlq_list(q) == []
    assert lease_one(client, q).attempts == 2


def test_nack_dead_letter_with_a_stale_token_is_lease_lost(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, 1)
    old = lease_one(client, q)
    clock.advance(10_000)
    new = lease_one(client, q)
    with pytest.raises(errors.LeaseLost):
        client.nack(q, old.id, old.token, dead_letter=True)
    assert client.dlq_list(q) == []
    assert client.ack(q, new.id, new.token).status == "acked"


def test_nack_batch_mixes_dead_letter_and_requeue(client: sqew.Client, q: str) -> None:
    a, b, c = (client.enqueue(q, i).message_id for i in range(3))
    got = {m.id: m for m in client.poll(q, batch=3)}
    results = client.nack_batch(q, [
        {"id": a, "token": got[a].token, "error": "permanent", "dead_letter": True},
        {"id": b, "token": got[b].token, "error": "transient", "delay_ms": 0},
        {"id": c, "token": "0" * 32, "dead_letter": True},
    ])
    assert [(r.id, r.status) for r in results] == [
        (a, "dead_lettered"), (b, "requeued"), (c, "lease_lost"),
    ]
    (dead,) = client.dlq_list(q)
    assert (dead.id, dead.last_error) == (a, "permanent")
    stats = client.stats(q)
    assert (stats.dlq, stats.dead_lettered_total, stats.nacked_total, stats.leased) == (
        1, 1, 2, 1)


def test_nack_dead_letter_on_a_dlq_is_refused(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.nack(q, m.id, m.token, dead_letter=True)
    held = lease_one(client, "q.dlq")
    with pytest.raises(errors.ValidationError):  # a DLQ has no DLQ of its own
        client.nack("q.dlq", held.id, held.token, dead_letter=True)
    assert client.get_message("q.dlq", held.id).id == held.id
    assert client.ack("q.dlq", held.id, held.token).status == "acked"
