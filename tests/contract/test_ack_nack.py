"""Ack, nack (backoff, errors), dead-lettering, extend-lease."""

from __future__ import annotations

from typing import Any

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import ids, lease_one

VIS = 10_000


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", visibility_ms=VIS, max_attempts=10)
    return "q"


# --- ack ---------------------------------------------------------------------------------------
def test_ack_removes(client: sqew.Client, q: str) -> None:
    msg_id = client.enqueue(q, 1).message_id
    m = lease_one(client, q)
    result = client.ack(q, m.id, m.token)
    assert (result.id, result.status) == (msg_id, "acked")
    with pytest.raises(errors.MessageNotFound):
        client.get_message(q, msg_id)
    with pytest.raises(errors.MessageNotFound):
        client.ack(q, m.id, m.token)  # a second ack: the message is gone
    stats = client.stats(q)
    assert (stats.ready, stats.leased, stats.acked_total) == (0, 0, 1)


def test_ack_after_lease_expiry_while_nobody_leased_it(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, "slow")
    m = lease_one(client, q)
    clock.advance(VIS + 5000)
    assert client.ack(q, m.id, m.token).status == "acked"
    assert client.poll(q) == []


def test_ack_after_expiry_and_another_consumers_poll(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    client.enqueue(q, "slow")
    m = lease_one(client, q)
    clock.advance(VIS + 1)
    # another consumer polls (noticing the expired lease) but takes a more urgent message
    urgent = client.enqueue(q, "urgent", priority=5).message_id
    assert ids(client.poll(q)) == [urgent]
    assert client.ack(q, m.id, m.token).status == "acked"
    assert client.poll(q) == []


def test_stale_token_is_lease_lost(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue(q, 1)
    old = lease_one(client, q)
    clock.advance(VIS)
    new = lease_one(client, q)
    with pytest.raises(errors.LeaseLost):
        client.ack(q, old.id, old.token)
    with pytest.raises(errors.LeaseLost):
        client.nack(q, old.id, old.token)
    with pytest.raises(errors.LeaseLost):
        client.extend_lease(q, old.id, old.token, 1000)
    assert client.ack(q, new.id, new.token).status == "acked"


def test_wrong_token_is_lease_lost(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    with pytest.raises(errors.LeaseLost):
        client.ack(q, m.id, "0" * 32)
    assert client.ack(q, m.id, m.token).status == "acked"


def test_unknown_message_is_not_found(client: sqew.Client, q: str) -> None:
    with pytest.raises(errors.MessageNotFound):
        client.ack(q, 999_999, "t")
    with pytest.raises(errors.MessageNotFound):
        client.nack(q, 999_999, "t")
    with pytest.raises(errors.MessageNotFound):
        client.extend_lease(q, 999_999, "t", 1000)


def test_ack_in_the_wrong_queue_is_not_found(client: sqew.Client, q: str) -> None:
    client.create_queue("other")
    client.enqueue(q, 1)
    m = lease_one(client, q)
    with pytest.raises(errors.MessageNotFound):
        client.ack("other", m.id, m.token)
    with pytest.raises(errors.QueueNotFound):
        client.ack("nope", m.id, m.token)
    assert client.ack(q, m.id, m.token).status == "acked"


@pytest.mark.parametrize("bad", [{"id": 0}, {"id": -1}, {"token": ""}])
def test_ack_validation(client: sqew.Client, q: str, bad: dict[str, Any]) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    item = {"id": m.id, "token": m.token, **bad}
    with pytest.raises(errors.ValidationError):
        client.ack(q, item["id"], item["token"])
    with pytest.raises(errors.ValidationError):
        client.nack(q, item["id"], item["token"])


def test_ack_batch_statuses(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.create_queue("short", visibility_ms=100)
    a, b = (client.enqueue(q, i).message_id for i in range(2))
    stale_id = client.enqueue("short", "s").message_id
    got = {m.id: m for m in client.poll(q, batch=2)}
    stale = lease_one(client, "short")
    clock.advance(100)
    lease_one(client, "short")
    results = client.ack_batch(q, [(a, got[a].token), (999_999, "x"), (b, got[b].token)])
    assert [(r.id, r.status) for r in results] == [
        (a, "acked"), (999_999, "not_found"), (b, "acked"),
    ]
    results = client.ack_batch("short", [(stale_id, stale.token), (a, got[a].token)])
    assert [(r.id, r.status) for r in results] == [(stale_id, "lease_lost"), (a, "not_found")]
    assert client.stats(q).acked_total == 2
    assert client.stats("short").acked_total == 0


def test_ack_batch_of_1000(client: sqew.Client, q: str) -> None:
    client.enqueue_batch(q, [{"payload": i} for i in range(1000)])
    leased = [m for _ in range(10) for m in client.poll(q, batch=100)]
    results = client.ack_batch(q, [(m.id, m.token) for m in leased])
    assert [r.status for r in results] == ["acked"] * 1000
    assert client.stats(q).acked_total == 1000


def test_ack_batch_of_1001_is_rejected(client: sqew.Client, q: str) -> None:
    with pytest.raises(errors.ValidationError):
        client.ack_batch(q, [(i + 1, "t") for i in range(1001)])


# --- nack and backoff --------------------------------------------------------------------------
def test_nack_requeues_with_error(client: sqew.Client, clock: ManualClock, q: str) -> None:
    msg_id = client.enqueue(q, 1).message_id
    m = lease_one(client, q)
    result = client.nack(q, m.id, m.token, delay_ms=0, error="boom")
    assert (result.id, result.status) == (msg_id, "requeued")
    stored = client.get_message(q, msg_id)
    assert (stored.last_error, stored.attempts, stored.available_at) == ("boom", 1, clock())
    again = lease_one(client, q)
    assert (again.attempts, again.last_error) == (2, "boom")
    assert again.token != m.token
    client.nack(q, again.id, again.token, delay_ms=0)
    assert client.get_message(q, msg_id).last_error == "boom"  # kept until a new error
    assert client.stats(q).nacked_total == 2


def test_token_is_spent_after_nack(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.nack(q, m.id, m.token, delay_ms=60_000)
    with pytest.raises(errors.LeaseLost):
        client.ack(q, m.id, m.token)
    with pytest.raises(errors.LeaseLost):
        client.nack(q, m.id, m.token)


def test_nack_delay_override(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.nack(q, m.id, m.token, delay_ms=2500)
    assert client.get_message(q, m.id).available_at == clock() + 2500
    clock.advance(2499)
    assert client.poll(q) == []
    stats = client.stats(q)
    assert (stats.delayed, stats.ready, stats.leased) == (1, 0, 0)
    clock.advance(1)
    assert lease_one(client, q).id == m.id


@pytest.mark.parametrize("bad", [{"delay_ms": -1}, {"delay_ms": 1_209_600_001},
                                 {"error": "e" * 4097}])
def test_nack_validation(client: sqew.Client, q: str, bad: dict[str, Any]) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    with pytest.raises(errors.ValidationError):
        client.nack(q, m.id, m.token, **bad)
    assert client.stats(q).leased == 1  # still held


def test_error_of_4096_chars_is_kept(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.nack(q, m.id, m.token, error="é" * 4096)
    assert client.get_message(q, m.id).last_error == "é" * 4096


def test_backoff_is_exponential_capped_with_jitter(client: sqew.Client, clock: ManualClock) -> None:
    base, cap = 1000, 5000
    client.create_queue("q", backoff_base_ms=base, backoff_max_ms=cap, max_attempts=8)
    msg_id = client.enqueue("q", 1).message_id
    for attempts in range(1, 8):
        m = lease_one(client, "q")
        assert m.attempts == attempts
        assert client.nack("q", m.id, m.token).status == "requeued"
        delay = min(cap, base * 2 ** (attempts - 1))
        at = client.get_message("q", msg_id).available_at
        assert clock() + delay <= at <= clock() + delay * 1.1, (attempts, at - clock())
        clock.advance(at - clock() - 1)
        assert client.poll("q") == []
        clock.advance(1)


def test_zero_backoff_is_immediate(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", backoff_base_ms=0, backoff_max_ms=0)
    client.enqueue("q", 1)
    m = lease_one(client, "q")
    client.nack("q", m.id, m.token)
    assert lease_one(client, "q").attempts == 2


def test_jitter_spreads_retries(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", backoff_base_ms=100_000, backoff_max_ms=100_000)
    client.enqueue_batch("q", [{"payload": i} for i in range(40)])
    leased = client.poll("q", batch=40)
    client.nack_batch("q", [{"id": m.id, "token": m.token} for m in leased])
    delays = {client.get_message("q", m.id).available_at - clock() for m in leased}
    assert all(100_000 <= d <= 110_000 for d in delays)
    assert len(delays) > 1  # 40 equal draws of a random jitter would be a broken generator


def test_nack_batch_statuses(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", max_attempts=2, visibility_ms=VIS)
    a, b, c = (client.enqueue("q", i).message_id for i in range(3))
    first = {m.id: m for m in client.poll("q", batch=3)}
    client.nack("q", c, first[c].token, delay_ms=0)
    again = lease_one(client, "q")  # c, second delivery
    assert again.id == c
    results = client.nack_batch(
        "q",
        [
            {"id": a, "token": first[a].token, "delay_ms": 0},
            {"id": c, "token": again.token, "error": "final"},
            {"id": b, "token": "stale"},
            {"id": 999_999, "token": "x"},
        ],
    )
    assert [(r.id, r.status) for r in results] == [
        (a, "requeued"), (c, "dead_lettered"), (b, "lease_lost"), (999_999, "not_found"),
    ]
    stats = client.stats("q")
    assert (stats.dlq, stats.dead_lettered_total, stats.nacked_total, stats.leased) == (1, 1, 3, 1)


# --- dead-lettering ----------------------------------------------------------------------------
def test_dead_letter_on_nack_at_max_attempts(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", max_attempts=3, backoff_base_ms=0, backoff_max_ms=0)
    msg_id = client.enqueue("q", {"job": 1}, priority=4, attributes={"k": "v"}).message_id
    for attempts in (1, 2):
        m = lease_one(client, "q")
        assert client.nack("q", m.id, m.token, error=f"e{attempts}").status == "requeued"
    m = lease_one(client, "q")
    assert m.attempts == 3
    assert client.nack("q", m.id, m.token, error="e3", delay_ms=0).status == "dead_lettered"

    assert client.poll("q") == []
    with pytest.raises(errors.MessageNotFound):
        client.get_message("q", msg_id)
    (dead,) = client.dlq_list("q")
    assert (dead.id, dead.queue, dead.payload, dead.priority, dead.attributes) == (
        msg_id, "q.dlq", {"job": 1}, 4, {"k": "v"},
    )
    assert (dead.attempts, dead.last_error) == (3, "e3")
    assert client.get_message("q.dlq", msg_id).payload == {"job": 1}
    stats = client.stats("q")
    assert (stats.dlq, stats.dead_lettered_total, stats.ready) == (1, 1, 0)
    assert client.stats("q.dlq").ready == 1


def test_dead_letter_on_lease_expiry(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", max_attempts=2, visibility_ms=1000)
    msg_id = client.enqueue("q", "p", attributes={"a": "1"}).message_id
    first = lease_one(client, "q")
    client.nack("q", first.id, first.token, delay_ms=0, error="crashed?")
    lease_one(client, "q")  # second delivery, never answered
    clock.advance(999)
    assert client.poll("q") == [] and client.dlq_list("q") == []
    clock.advance(1)
    assert client.poll("q") == []
    (dead,) = client.dlq_list("q")
    assert (dead.id, dead.payload, dead.attributes, dead.attempts, dead.last_error) == (
        msg_id, "p", {"a": "1"}, 2, "lease expired; before: crashed?",
    )
    stats = client.stats("q")
    assert (stats.dlq, stats.dead_lettered_total, stats.leased, stats.ready) == (1, 1, 0, 0)


def test_max_attempts_one(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", max_attempts=1, visibility_ms=1000)
    a = client.enqueue("q", "a").message_id
    b = client.enqueue("q", "b").message_id
    ma, mb = client.poll("q", batch=2)
    assert client.nack("q", ma.id, ma.token, delay_ms=0).status == "dead_lettered"
    clock.advance(1000)
    assert client.poll("q") == []
    assert ids(client.dlq_list("q")) == [a, b]
    with pytest.raises(errors.MessageNotFound):
        client.ack("q", mb.id, mb.token)  # the late consumer: it is in the DLQ now


def test_dlq_message_can_be_polled_acked_and_nacked(client: sqew.Client) -> None:
    client.create_queue("q", max_attempts=1)
    for i in range(2):
        client.enqueue("q", i)
        m = lease_one(client, "q")
        client.nack("q", m.id, m.token)
    d1, d2 = client.poll("q.dlq", batch=2)
    assert d1.queue == "q.dlq" and d1.attempts == 2  # the DLQ's delivery counts on
    assert client.ack("q.dlq", d1.id, d1.token).status == "acked"
    # a DLQ has no DLQ: a nack there always requeues
    assert client.nack("q.dlq", d2.id, d2.token, delay_ms=0).status == "requeued"
    assert ids(client.dlq_list("q")) == [d2.id]


def test_lowering_max_attempts_dead_letters_on_next_nack(client: sqew.Client) -> None:
    client.create_queue("q", max_attempts=5, backoff_base_ms=0, backoff_max_ms=0)
    client.enqueue("q", 1)
    for _ in range(2):
        m = lease_one(client, "q")
        client.nack("q", m.id, m.token)
    client.update_queue("q", max_attempts=2)
    m = lease_one(client, "q")
    assert client.nack("q", m.id, m.token).status == "dead_lettered"


# --- extend-lease ------------------------------------------------------------------------------
def test_extend_lease(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    clock.advance(VIS - 100)
    result = client.extend_lease(q, m.id, m.token, 5000)
    assert (result.id, result.lease_expires_at) == (m.id, clock() + 5000)
    clock.advance(4999)  # past the first lease, inside the extension
    assert client.poll(q) == []
    assert client.stats(q).leased == 1
    clock.advance(1)
    again = lease_one(client, q)
    assert again.id == m.id and again.attempts == 2


def test_extend_can_shorten(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.extend_lease(q, m.id, m.token, 0)
    assert lease_one(client, q).id == m.id


def test_extend_keeps_the_token(client: sqew.Client, clock: ManualClock, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.extend_lease(q, m.id, m.token, 60_000)
    clock.advance(VIS * 3)
    assert client.ack(q, m.id, m.token).status == "acked"


@pytest.mark.parametrize("ms", [-1, 43_200_001])
def test_extend_range(client: sqew.Client, q: str, ms: int) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    with pytest.raises(errors.ValidationError):
        client.extend_lease(q, m.id, m.token, ms)


def test_extend_after_nack_is_lease_lost(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    m = lease_one(client, q)
    client.nack(q, m.id, m.token, delay_ms=0)
    with pytest.raises(errors.LeaseLost):
        client.extend_lease(q, m.id, m.token, 1000)
    assert lease_one(client, q).id == m.id  # the failed extend did not take it back
