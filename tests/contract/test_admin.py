"""Peek, get and remove a message, purge, compact, and stats after a scripted sequence."""

from __future__ import annotations

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import ids, lease_one


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q")
    return "q"


# --- peek --------------------------------------------------------------------------------------
def test_peek_has_no_side_effects(client: sqew.Client, q: str) -> None:
    sent = [client.enqueue(q, i, priority=i).message_id for i in range(3)]
    before = client.stats(q)
    for _ in range(3):
        peeked = client.peek(q)
        assert ids(peeked) == sent[::-1]
        assert {m.attempts for m in peeked} == {0}
        assert not hasattr(peeked[0], "token")
    assert client.stats(q) == before
    assert ids(client.poll(q, batch=10)) == sent[::-1]


def test_peek_shows_only_ready(client: sqew.Client, q: str) -> None:
    client.enqueue(q, "delayed", delay_ms=1000)
    leased = client.enqueue(q, "leased").message_id
    ready = client.enqueue(q, "ready").message_id
    assert lease_one(client, q).id == leased
    assert ids(client.peek(q)) == [ready]


def test_peek_limit(client: sqew.Client, q: str) -> None:
    client.enqueue_batch(q, [{"payload": i} for i in range(120)])
    assert len(client.peek(q)) == 10
    assert [m.payload for m in client.peek(q, limit=100)] == list(range(100))
    assert len(client.peek(q, limit=1)) == 1
    for bad in (0, 101):
        with pytest.raises(errors.ValidationError):
            client.peek(q, limit=bad)
    with pytest.raises(errors.QueueNotFound):
        client.peek("nope")


# --- get / remove ------------------------------------------------------------------------------
def test_get_message(client: sqew.Client, clock: ManualClock, q: str) -> None:
    now = clock()
    msg_id = client.enqueue(q, [1, 2], priority=-2, delay_ms=50, ttl_ms=5000).message_id
    m = client.get_message(q, msg_id)
    assert (m.id, m.queue, m.payload, m.priority, m.attributes, m.attempts) == (
        msg_id, q, [1, 2], -2, {}, 0,
    )
    assert (m.enqueued_at, m.available_at, m.expires_at, m.last_error) == (
        now, now + 50, now + 5000, None,
    )


def test_get_message_not_found(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    msg_id = client.enqueue("other", 1).message_id
    with pytest.raises(errors.MessageNotFound):
        client.get_message(q, msg_id)  # exists, but in another queue
    with pytest.raises(errors.MessageNotFound):
        client.get_message(q, 999_999)
    with pytest.raises(errors.QueueNotFound):
        client.get_message("nope", msg_id)


def test_remove_message(client: sqew.Client, q: str) -> None:
    keep = client.enqueue(q, "keep").message_id
    gone = client.enqueue(q, "gone").message_id
    client.remove_message(q, gone)
    with pytest.raises(errors.MessageNotFound):
        client.get_message(q, gone)
    with pytest.raises(errors.MessageNotFound):
        client.remove_message(q, gone)
    assert ids(client.poll(q, batch=10)) == [keep]
    assert client.stats(q).leased == 1 and client.stats(q).ready == 0


def test_remove_a_leased_message(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.remove_message(q, m.id)
    with pytest.raises(errors.MessageNotFound):
        client.ack(q, m.id, m.token)
    assert client.stats(q).leased == 0


def test_remove_in_the_wrong_queue(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    msg_id = client.enqueue(q, 1).message_id
    with pytest.raises(errors.MessageNotFound):
        client.remove_message("other", msg_id)
    assert client.get_message(q, msg_id).payload == 1


# --- purge -------------------------------------------------------------------------------------
def test_purge(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    other = client.enqueue("other", 1).message_id
    client.enqueue_batch(q, [{"payload": i} for i in range(3)])
    client.enqueue(q, "delayed", delay_ms=10_000)
    m = lease_one(client, q)
    assert client.purge(q) == 4  # ready, delayed and leased alike
    stats = client.stats(q)
    assert (stats.ready, stats.delayed, stats.leased) == (0, 0, 0)
    assert client.poll(q) == []
    with pytest.raises(errors.MessageNotFound):
        client.ack(q, m.id, m.token)
    assert client.purge(q) == 0
    assert client.get_message("other", other).payload == 1
    with pytest.raises(errors.QueueNotFound):
        client.purge("nope")


def test_purge_leaves_the_dlq(client: sqew.Client) -> None:
    client.create_queue("q", max_attempts=1)
    client.enqueue("q", "dead")
    m = lease_one(client, "q")
    client.nack("q", m.id, m.token)
    client.enqueue("q", "live")
    assert client.purge("q") == 1
    assert len(client.dlq_list("q")) == 1


# --- compact -----------------------------------------------------------------------------------
def test_compact_removes_expired(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue_batch(q, [{"payload": i, "ttl_ms": 1000} for i in range(3)])
    keep = client.enqueue(q, "keep").message_id
    clock.advance(999)
    assert client.compact(q) == 0
    clock.advance(1)
    assert client.compact(q) == 3
    assert client.compact(q) == 0
    stats = client.stats(q)
    assert (stats.ready, stats.expired_total, stats.enqueued_total) == (1, 3, 4)
    assert ids(client.peek(q)) == [keep]
    with pytest.raises(errors.QueueNotFound):
        client.compact("nope")


def test_compact_counts_idempotency_tombstones(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", dedup_window_ms=1000)
    first = client.enqueue("q", 1, idempotency_key="k").message_id
    m = lease_one(client, "q")
    client.ack("q", m.id, m.token)
    clock.advance(1000)
    assert client.compact("q") == 1  # the key's tombstone, past its window
    again = client.enqueue("q", 1, idempotency_key="k")
    assert not again.duplicate and again.message_id != first


def test_compact_is_per_queue(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.create_queue("other")
    client.enqueue("other", 1, ttl_ms=1000)
    clock.advance(1000)
    assert client.compact(q) == 0
    assert client.compact("other") == 1


# --- stats -------------------------------------------------------------------------------------
def test_stats_after_a_scripted_sequence(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", max_attempts=2, visibility_ms=10_000)

    def stats() -> tuple[int | None, ...]:
        s = client.stats("q")
        assert s.queue == "q"
        return (s.ready, s.delayed, s.leased, s.dlq, s.oldest_ready_age_ms, s.enqueued_total,
                s.acked_total, s.nacked_total, s.dead_lettered_total, s.expired_total)

    a, b, c, d = (client.enqueue("q", x).message_id for x in "abcd")
    e = client.enqueue("q", "e", delay_ms=5000).message_id
    client.enqueue("q", "f", ttl_ms=1000)
    #                ready delayed leased dlq oldest enq ack nack dead expired
    assert stats() == (5, 1, 0, 0, 0, 6, 0, 0, 0, 0)

    clock.advance(1000)  # f has expired: the reaper, due, runs before the read and counts it
    assert stats() == (4, 1, 0, 0, 1000, 6, 0, 0, 0, 1)

    assert ids(client.poll("q", batch=2)) == [a, b]
    mc = lease_one(client, "q")
    assert mc.id == c
    assert stats() == (1, 1, 3, 0, 1000, 6, 0, 0, 0, 1)
    client.ack("q", c, mc.token)
    assert stats() == (1, 1, 2, 0, 1000, 6, 1, 0, 0, 1)
    clock.advance(4000)  # e is due: it is ready, and d is still the oldest
    assert stats() == (2, 0, 2, 0, 5000, 6, 1, 0, 0, 1)
    assert ids(client.poll("q", batch=5)) == [d, e]
    assert stats() == (0, 0, 4, 0, None, 6, 1, 0, 0, 1)


def test_stats_through_retries_and_dead_letters(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", max_attempts=2, visibility_ms=10_000)

    def stats(queue: str = "q") -> tuple[int | None, ...]:
        s = client.stats(queue)
        assert s.queue == queue
        return (s.ready, s.delayed, s.leased, s.dlq, s.oldest_ready_age_ms, s.enqueued_total,
                s.acked_total, s.nacked_total, s.dead_lettered_total, s.expired_total)

    a, b, c, d = (client.enqueue("q", x).message_id for x in "abcd")
    e = client.enqueue("q", "e", delay_ms=5000).message_id
    clock.advance(1000)
    ma, mb = client.poll("q", batch=2)
    client.ack("q", a, ma.token)
    client.nack("q", b, mb.token, delay_ms=0)  # available again now, behind c and d
    #                ready delayed leased dlq oldest enq ack nack dead expired
    assert stats() == (3, 1, 0, 0, 1000, 5, 1, 1, 0, 0)

    got = {m.id: m for m in client.poll("q", batch=10)}
    assert list(got) == [c, d, b]
    assert client.nack("q", b, got[b].token).status == "dead_lettered"
    assert stats() == (0, 1, 2, 1, None, 5, 1, 2, 1, 0)
    assert stats("q.dlq") == (1, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    clock.advance(10_000)  # e is due; the leases of c and d are over (they count as ready)
    assert stats()[:4] == (3, 0, 0, 1)
    assert client.dlq_requeue("q").requeued == 1
    assert stats()[:4] == (4, 0, 0, 0)
    got = {m.id: m for m in client.poll("q", batch=10)}
    assert set(got) == {b, c, d, e}
    assert {i: m.attempts for i, m in got.items()} == {b: 1, c: 2, d: 2, e: 1}
    s = stats()
    assert s[:5] == (0, 0, 4, 0, None) and s[5:] == (5, 1, 2, 1, 0)


def test_stats_fields_on_an_empty_queue(client: sqew.Client, q: str) -> None:
    s = client.stats(q)
    assert s.queue == q
    assert (s.ready, s.delayed, s.leased, s.dlq, s.oldest_ready_age_ms) == (0, 0, 0, 0, None)
    assert (s.enqueued_total, s.acked_total, s.nacked_total, s.dead_lettered_total,
            s.expired_total) == (0, 0, 0, 0, 0)
