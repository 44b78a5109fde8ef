"""Quotas (max_depth, rate_limit_per_s) and the archive setting."""

from __future__ import annotations

import math

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import lease_one


# --- max_depth ---------------------------------------------------------------------------------
def test_max_depth(client: sqew.Client) -> None:
    client.create_queue("q", max_depth=3)
    client.enqueue("q", "leased")
    client.enqueue("q", "delayed", delay_ms=60_000)
    client.enqueue("q", "ready")
    m = lease_one(client, "q")
    with pytest.raises(errors.QueueFull) as info:
        client.enqueue("q", "one too many")
    assert info.value.retry_after is not None and info.value.retry_after > 0
    assert client.stats("q").enqueued_total == 3
    client.ack("q", m.id, m.token)
    client.enqueue("q", "fits again")
    with pytest.raises(errors.QueueFull):
        client.enqueue("q", "full again")


def test_max_depth_batch_is_all_or_nothing(client: sqew.Client) -> None:
    client.create_queue("q", max_depth=3)
    client.enqueue_batch("q", [{"payload": 1}, {"payload": 2}])
    with pytest.raises(errors.QueueFull):
        client.enqueue_batch("q", [{"payload": 3}, {"payload": 4}])
    assert client.stats("q").ready == 2
    client.enqueue_batch("q", [{"payload": 3}])
    assert client.stats("q").ready == 3


def test_max_depth_frees_on_dead_letter(client: sqew.Client) -> None:
    client.create_queue("q", max_depth=1, max_attempts=1)
    client.enqueue("q", 1)
    m = lease_one(client, "q")
    client.nack("q", m.id, m.token)
    client.enqueue("q", 2)  # the DLQ does not count against the queue
    assert client.stats("q").dlq == 1


def test_duplicate_is_answered_even_when_full(client: sqew.Client) -> None:
    client.create_queue("q", max_depth=1)
    first = client.enqueue("q", 1, idempotency_key="k").message_id
    again = client.enqueue("q", 1, idempotency_key="k")
    assert (again.message_id, again.duplicate) == (first, True)
    with pytest.raises(errors.QueueFull):
        client.enqueue("q", 2, idempotency_key="other")


def test_max_depth_can_be_changed(client: sqew.Client) -> None:
    client.create_queue("q")
    client.enqueue_batch("q", [{"payload": i} for i in range(5)])
    client.update_queue("q", max_depth=5)
    with pytest.raises(errors.QueueFull):
        client.enqueue("q", 6)
    client.update_queue("q", max_depth=0)  # 0 = unlimited
    client.enqueue("q", 6)


# --- rate_limit_per_s --------------------------------------------------------------------------
def test_rate_limit_refills_with_the_clock(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", rate_limit_per_s=2)
    client.enqueue("q", 1)
    client.enqueue("q", 2)  # a burst of one second's worth
    with pytest.raises(errors.RateLimited) as info:
        client.enqueue("q", 3)
    retry = info.value.retry_after
    assert retry is not None and 0 < retry <= 1
    assert client.stats("q").enqueued_total == 2
    clock.advance(math.ceil(retry * 1000))
    client.enqueue("q", 3)  # waiting Retry-After was enough
    # (over HTTP, Retry-After is whole seconds, so that wait may have refilled more than one)
    clock.advance(60_000)  # the bucket refills only up to its burst
    client.enqueue("q", 4)
    client.enqueue("q", 5)
    with pytest.raises(errors.RateLimited):
        client.enqueue("q", 6)
    assert client.stats("q").enqueued_total == 5


def test_rate_limit_below_one_per_second(client: sqew.Client, clock: ManualClock) -> None:
    client.create_queue("q", rate_limit_per_s=0.5)
    client.enqueue("q", 1)
    with pytest.raises(errors.RateLimited) as info:
        client.enqueue("q", 2)
    assert info.value.retry_after is not None and info.value.retry_after > 1
    clock.advance(1999)
    with pytest.raises(errors.RateLimited):
        client.enqueue("q", 2)
    clock.advance(1)
    client.enqueue("q", 2)


def test_rate_limit_is_per_queue(client: sqew.Client) -> None:
    client.create_queue("q", rate_limit_per_s=1)
    client.create_queue("free")
    client.enqueue("q", 1)
    with pytest.raises(errors.RateLimited):
        client.enqueue("q", 2)
    for i in range(5):
        client.enqueue("free", i)


def test_rate_limited_batch_stores_nothing(client: sqew.Client) -> None:
    client.create_queue("q", rate_limit_per_s=1)
    client.enqueue("q", 0)
    with pytest.raises(errors.RateLimited):
        client.enqueue_batch("q", [{"payload": 1}, {"payload": 2}])
    assert client.stats("q").enqueued_total == 1


def test_rate_limit_off(client: sqew.Client, clock: ManualClock) -> None:
    # 0 = off: the clock never moves in this test, so every enqueue below happens at one
    # instant, where a limit of any rate would have refused most of them.
    client.create_queue("q", rate_limit_per_s=1)
    client.enqueue("q", 0)
    with pytest.raises(errors.RateLimited):
        client.enqueue("q", 1)  # the limit is on: one second's worth, then refused
    assert client.update_queue("q", rate_limit_per_s=0).rate_limit_per_s == 0
    for i in range(1, 51):
        assert client.enqueue("q", i).duplicate is False
    results = client.enqueue_batch("q", [{"payload": i} for i in range(51, 151)])
    assert len(results) == 100 and not any(r.duplicate for r in results)
    stats = client.stats("q")
    assert (stats.enqueued_total, stats.ready) == (151, 151)
    # A queue created without a limit (the default, 0) is the same.
    assert client.create_queue("free").rate_limit_per_s == 0
    for i in range(100):
        client.enqueue("free", i)
    assert client.stats("free").enqueued_total == 100


# --- archive -----------------------------------------------------------------------------------
def test_archive_ack_still_removes_from_the_queue(client: sqew.Client) -> None:
    client.create_queue("q", archive=True)
    client.enqueue_batch("q", [{"payload": i} for i in range(3)])
    leased = client.poll("q", batch=3)
    results = client.ack_batch("q", [(m.id, m.token) for m in leased])
    assert [r.status for r in results] == ["acked"] * 3
    for m in leased:
        with pytest.raises(errors.MessageNotFound):
            client.get_message("q", m.id)
    stats = client.stats("q")
    assert (stats.ready, stats.leased, stats.acked_total) == (0, 0, 3)
    assert client.poll("q") == []
    with pytest.raises(errors.MessageNotFound):
        client.ack("q", leased[0].id, leased[0].token)


def test_archive_switched_on_later(client: sqew.Client) -> None:
    client.create_queue("q")
    client.enqueue("q", 1)
    assert client.update_queue("q", archive=True).archive is True
    m = lease_one(client, "q")
    assert client.ack("q", m.id, m.token).status == "acked"
    assert client.poll("q") == []
