"""Edges of ``rate_limit_per_s``: absurdly small rates, the longest Retry-After, and a clock
that steps backwards. (The ordinary token-bucket behaviour is in test_quotas.py.)"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

import sqew
from sqew import errors, models
from sqew.core.clock import ManualClock

if TYPE_CHECKING:
    from conftest import Target

ONE_DAY_S = 86_400


@pytest.mark.parametrize("rate", [5e-324, 1e-300, 9.99e-6])
def test_a_rate_below_the_smallest_is_refused(client: sqew.Client, rate: float) -> None:
    with pytest.raises(errors.ValidationError) as created:
        client.create_queue("q", rate_limit_per_s=rate)
    assert created.value.message == "rate_limit_per_s must be 0 (off) or at least 0.00001"
    assert created.value.details == [
        {"field": "rate_limit_per_s", "message": "must be 0 (off) or at least 0.00001"}]
    client.create_queue("q")
    with pytest.raises(errors.ValidationError):
        client.update_queue("q", rate_limit_per_s=rate)
    assert client.get_queue("q").rate_limit_per_s == 0


def test_the_smallest_rate_waits_at_most_a_day(client: sqew.Client) -> None:
    q = client.create_queue("q", rate_limit_per_s=models.MIN_RATE_LIMIT_PER_S)
    assert q.rate_limit_per_s == models.MIN_RATE_LIMIT_PER_S
    client.enqueue("q", 1)
    with pytest.raises(errors.RateLimited) as info:
        client.enqueue("q", 2)
    assert info.value.retry_after == ONE_DAY_S  # 1 / rate would be 100000 s


def test_a_denormal_rate_stored_earlier_is_a_429_not_a_500(target: Target) -> None:
    """A database written before the smallest rate existed may hold any rate at all."""
    client = target.client
    if target.sqlite_path is None:
        pytest.skip("needs the store's SQLite file")
    client.create_queue("q", rate_limit_per_s=1)
    with sqlite3.connect(target.sqlite_path) as db:
        db.execute("UPDATE queues SET rate_limit_per_s = 5e-324 WHERE name = 'q'")
    db.close()
    client.enqueue("q", 1)
    with pytest.raises(errors.RateLimited) as info:
        client.enqueue("q", 2)
    assert info.value.retry_after == ONE_DAY_S
    assert client.stats("q").enqueued_total == 1


def test_a_clock_step_backwards_never_blocks_a_rate_limited_queue(
    client: sqew.Client, clock: ManualClock
) -> None:
    client.create_queue("q", rate_limit_per_s=1)
    client.enqueue("q", 1)  # the bucket (one message) is empty now
    clock.advance(-3_600_000)  # the clock steps back an hour
    client.enqueue("q", 2)  # not blocked until the clock catches up
    with pytest.raises(errors.RateLimited) as info:  # and the limit holds from there on
        client.enqueue("q", 3)
    retry = info.value.retry_after
    assert retry is not None and 0 < retry <= 1
    clock.advance(1000)
    client.enqueue("q", 3)
    assert client.stats("q").enqueued_total == 3
