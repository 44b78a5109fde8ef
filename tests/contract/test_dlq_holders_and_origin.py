"""A DLQ's messages: where they came from (``origin_queue``), and requeue leaving leases alone."""

from __future__ import annotations

import msgspec
import pytest

import sqew
from sqew.core.clock import ManualClock

from .helpers import ids


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", max_attempts=1, visibility_ms=10_000)
    return "q"


def dead_letter(client: sqew.Client, queue: str, count: int) -> list[int]:
    """Enqueue ``count`` messages and dead-letter each by a nack (max_attempts=1)."""
    sent = [r.message_id for r in client.enqueue_batch(queue, [{"payload": i}
                                                                for i in range(count)])]
    leased = client.poll(queue, batch=count)
    results = client.nack_batch(queue, [{"id": m.id, "token": m.token} for m in leased])
    assert [r.status for r in results] == ["dead_lettered"] * count
    return sent


def as_json(message: sqew.models.Message) -> dict[str, object]:
    """The message as the API's JSON (what ``--json`` prints)."""
    decoded: dict[str, object] = msgspec.json.decode(msgspec.json.encode(message))
    return decoded


# --- requeue and leases -------------------------------------------------------------------------
def test_requeue_leaves_a_leased_dlq_message_with_its_holder(client: sqew.Client, q: str) -> None:
    a, b, c = dead_letter(client, q, 3)
    (held,) = client.poll("q.dlq")
    assert held.id == a
    assert client.dlq_requeue(q).requeued == 2  # the two nobody holds
    assert client.ack("q.dlq", held.id, held.token).status == "acked"
    assert client.dlq_list(q) == []
    assert ids(client.peek(q)) == [b, c]
    stats = client.stats(q)
    assert (stats.ready, stats.dlq) == (2, 0)


def test_requeue_by_ids_skips_a_leased_one(client: sqew.Client, q: str) -> None:
    a, b = dead_letter(client, q, 2)
    (held,) = client.poll("q.dlq")
    assert client.dlq_requeue(q, [a, b]).requeued == 1
    assert ids(client.dlq_list(q)) == [a]
    assert client.ack("q.dlq", held.id, held.token).status == "acked"
    assert ids(client.peek(q)) == [b]


def test_requeue_moves_a_dlq_message_whose_lease_has_ended(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    (a,) = dead_letter(client, q, 1)
    (held,) = client.poll("q.dlq")
    clock.advance(held.lease_expires_at - clock() + 1)  # the lease ended: nobody holds it now
    assert client.dlq_requeue(q).requeued == 1
    assert ids(client.peek(q)) == [a]
    assert client.stats(q).dlq == 0


# --- origin_queue -------------------------------------------------------------------------------
def test_dlq_messages_say_where_they_came_from(client: sqew.Client, q: str) -> None:
    sent = dead_letter(client, q, 2)
    listed = client.dlq_list(q)
    assert [(m.id, m.queue, m.origin_queue) for m in listed] == [
        (i, "q.dlq", "q") for i in sent
    ]
    assert as_json(listed[0])["origin_queue"] == "q"
    assert [m.origin_queue for m in client.peek("q.dlq")] == ["q", "q"]
    assert client.get_message("q.dlq", sent[0]).origin_queue == "q"
    leased = client.poll("q.dlq", batch=2)
    assert [m.origin_queue for m in leased] == ["q", "q"]
    assert as_json(leased[0])["origin_queue"] == "q"


def test_a_message_dead_lettered_by_lease_expiry_says_where_it_came_from(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    msg_id = client.enqueue(q, "x").message_id
    client.poll(q)
    clock.advance(10_001)
    assert client.poll(q) == []  # the expired lease at max_attempts goes to the DLQ
    assert [(m.id, m.origin_queue) for m in client.dlq_list(q)] == [(msg_id, "q")]


def test_ordinary_messages_have_no_origin_queue(client: sqew.Client, q: str) -> None:
    msg_id = client.enqueue(q, "x").message_id
    (peeked,) = client.peek(q)
    (leased,) = client.poll(q)
    for m in (peeked, leased, client.get_message(q, msg_id)):
        assert m.origin_queue is msgspec.UNSET
        assert "origin_queue" not in as_json(m)


def test_a_requeued_message_forgets_its_origin(client: sqew.Client, q: str) -> None:
    (msg_id,) = dead_letter(client, q, 1)
    assert client.dlq_requeue(q).requeued == 1
    m = client.get_message(q, msg_id)
    assert m.origin_queue is msgspec.UNSET
    assert "origin_queue" not in as_json(m)
