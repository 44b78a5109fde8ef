"""The dead-letter queue: list with paging, requeue, purge."""

from __future__ import annotations

import pytest

import sqew
from sqew import errors, models
from sqew.core.clock import ManualClock

from .helpers import ids, lease_one


def dead_letter(client: sqew.Client, queue: str, count: int) -> list[int]:
    """Enqueue ``count`` messages and dead-letter each (the queue has max_attempts=1)."""
    sent = [r.message_id for r in client.enqueue_batch(
        queue, [{"payload": {"n": i}, "attributes": {"n": str(i)}} for i in range(count)]
    )]
    leased = client.poll(queue, batch=count)
    results = client.nack_batch(
        queue, [{"id": m.id, "token": m.token, "error": f"err{m.id}"} for m in leased]
    )
    assert [r.status for r in results] == ["dead_lettered"] * count
    return sent


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", max_attempts=1)
    return "q"


def test_list_and_page(client: sqew.Client, q: str) -> None:
    sent = dead_letter(client, q, 5)
    assert ids(client.dlq_list(q)) == sent
    page1 = client.dlq_list(q, limit=2)
    page2 = client.dlq_list(q, limit=2, after_id=page1[-1].id)
    page3 = client.dlq_list(q, limit=2, after_id=page2[-1].id)
    assert ids(page1) + ids(page2) + ids(page3) == sent
    assert client.dlq_list(q, after_id=sent[-1]) == []
    assert client.dlq_list(q, after_id=0) == client.dlq_list(q)
    m = client.dlq_list(q)[0]
    assert (m.queue, m.payload, m.attributes, m.attempts, m.last_error) == (
        "q.dlq", {"n": 0}, {"n": "0"}, 1, f"err{sent[0]}",
    )


def test_list_names_the_queue_not_the_dlq(client: sqew.Client, q: str) -> None:
    with pytest.raises(errors.ValidationError):
        client.dlq_list("q.dlq")
    with pytest.raises(errors.QueueNotFound):
        client.dlq_list("nope")


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"after_id": -1}])
def test_list_validation(client: sqew.Client, q: str, kwargs: dict[str, int]) -> None:
    with pytest.raises(errors.ValidationError):
        client.dlq_list(q, **kwargs)


def test_requeue_all(client: sqew.Client, clock: ManualClock, q: str) -> None:
    sent = dead_letter(client, q, 3)
    clock.advance(100)
    assert client.dlq_requeue(q).requeued == 3
    assert client.dlq_list(q) == []
    for msg_id in sent:
        m = client.get_message(q, msg_id)
        assert m.attempts == 0 and m.queue == "q"
        assert m.available_at == clock()
    stats = client.stats(q)
    assert (stats.ready, stats.dlq) == (3, 0)
    got = client.poll(q, batch=10)
    assert ids(got) == sent
    assert {m.attempts for m in got} == {1}
    assert [m.payload for m in got] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert got[0].attributes == {"n": "0"}


def test_requeue_some(client: sqew.Client, q: str) -> None:
    a, b, c = dead_letter(client, q, 3)
    assert client.dlq_requeue(q, [c, a, 999_999]).requeued == 2
    assert ids(client.dlq_list(q)) == [b]
    assert ids(client.peek(q)) == [a, c]
    assert client.dlq_requeue(q, []).requeued == 0
    assert client.dlq_requeue(q, [a]).requeued == 0  # not in the DLQ any more


def test_requeued_message_dead_letters_again(client: sqew.Client, q: str) -> None:
    (msg_id,) = dead_letter(client, q, 1)
    client.dlq_requeue(q)
    m = lease_one(client, q)
    assert client.nack(q, m.id, m.token).status == "dead_lettered"
    assert ids(client.dlq_list(q)) == [msg_id]


def test_purge(client: sqew.Client, q: str) -> None:
    dead_letter(client, q, 4)
    live = client.enqueue(q, "live").message_id
    assert client.dlq_purge(q) == 4
    assert client.dlq_list(q) == []
    assert client.stats(q).dlq == 0
    assert client.dlq_purge(q) == 0
    assert ids(client.peek(q)) == [live]  # the queue itself is untouched


def test_dlq_operations_on_missing_queue(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.dlq_requeue("nope")
    with pytest.raises(errors.QueueNotFound):
        client.dlq_purge("nope")


def test_a_last_lease_that_ended_is_dead_lettered_without_a_poll(
    client: sqew.Client, clock: ManualClock
) -> None:
    # The reaper moves it (the embedded Client's runs before reads once due, a server's on a
    # timer and before reads): stats, peek and the DLQ agree without waiting for a poll.
    client.create_queue("once", max_attempts=1, visibility_ms=1000)
    msg_id = client.enqueue("once", "p").message_id
    assert lease_one(client, "once").id == msg_id
    clock.advance(1500)
    stats = client.stats("once")
    assert (stats.ready, stats.leased, stats.dlq, stats.dead_lettered_total) == (0, 0, 1, 1)
    assert client.peek("once") == []
    (dead,) = client.dlq_list("once")
    assert (dead.id, dead.attempts, dead.last_error) == (msg_id, 1, "lease expired")


DLQ_RETENTION_MS = 345_600_000  # a DLQ's default retention (4 days)


def test_requeue_never_revives_an_expired_message(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    (old,) = dead_letter(client, q, 1)
    clock.advance(DLQ_RETENTION_MS - 1000)
    (young,) = dead_letter(client, q, 1)
    clock.advance(2000)  # the first is past its retention in the DLQ: gone, not yet reaped
    assert client.dlq_requeue(q) == models.Requeued(requeued=1, left=0)
    assert [m.id for m in client.poll(q, batch=10)] == [young]
    assert old not in [m.id for m in client.dlq_list(q)]


def test_requeue_admits_what_the_queue_has_room_for(client: sqew.Client, q: str) -> None:
    dead = dead_letter(client, q, 4)
    client.enqueue(q, "already there")
    client.update_queue(q, max_depth=3)
    assert client.dlq_requeue(q) == models.Requeued(requeued=2, left=2)
    assert ids(client.dlq_list(q)) == dead[2:]  # the smallest ids moved first
    stats = client.stats(q)
    assert (stats.ready, stats.dlq) == (3, 2)
    assert client.dlq_requeue(q, dead[2:]) == models.Requeued(requeued=0, left=2)
    (m,) = client.poll(q)
    client.ack(q, m.id, m.token)  # room for one more
    assert client.dlq_requeue(q, [dead[3]]) == models.Requeued(requeued=1, left=0)


def test_an_enqueue_into_a_dlq_fits_its_queues_payload_limit(client: sqew.Client) -> None:
    client.create_queue("small", max_payload_bytes=16)
    with pytest.raises(errors.PayloadTooLarge):
        client.enqueue("small.dlq", "x" * 100)
    with pytest.raises(errors.PayloadTooLarge):
        client.enqueue_batch("small.dlq", [{"payload": "x" * 100, "idempotency_key": "k"}])
    assert client.enqueue("small.dlq", "fits").message_id
    assert client.stats("small").dlq == 1
