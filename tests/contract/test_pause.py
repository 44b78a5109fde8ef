"""Pause and resume delivery: a paused queue takes enqueues, its polls get nothing (long polls
wait) until it is resumed, and the resume wakes the polls that wait."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import sqew
from sqew import errors
from sqew.core.clock import system_clock

from .helpers import ids
from .test_long_poll import WAIT_MS, Poller, started

if TYPE_CHECKING:
    from targets import Target


def test_a_paused_queue_takes_enqueues_and_delivers_nothing(client: sqew.Client) -> None:
    client.create_queue("q")
    first = client.enqueue("q", "before").message_id
    q = client.pause_queue("q")
    assert q.paused is True
    assert client.get_queue("q").paused is True
    second = client.enqueue("q", "while paused").message_id
    assert client.poll("q", batch=10) == []
    stats = client.stats("q")
    assert (stats.paused, stats.ready, stats.leased) == (True, 2, 0)
    assert 'sqew_queue_paused{queue="q"} 1.0' in client.metrics().splitlines()
    assert 'sqew_queue_paused{queue="q.dlq"} 0.0' in client.metrics().splitlines()
    assert ids(client.peek("q")) == [first, second]  # peeking still shows what waits
    assert client.pause_queue("q").paused is True  # twice: no change, no error
    q = client.resume_queue("q")
    assert q.paused is False
    assert ids(client.poll("q", batch=10)) == [first, second]
    assert client.resume_queue("q").paused is False
    assert client.stats("q").paused is False


def test_pausing_one_queue_leaves_the_others_and_the_dlq_alone(client: sqew.Client) -> None:
    client.create_queue("a")
    client.create_queue("b")
    client.pause_queue("a")
    client.enqueue("a", 1)
    sent = client.enqueue("b", 2).message_id
    assert ids(client.poll("b")) == [sent]
    assert client.get_queue("a.dlq").paused is False
    assert client.poll("a") == []


def test_pause_of_a_missing_queue_is_not_found(client: sqew.Client) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.pause_queue("nope")
    with pytest.raises(errors.QueueNotFound):
        client.resume_queue("nope")


def test_a_long_poll_waits_through_the_pause_and_the_resume_wakes_it(
    realtime_target: Target,
) -> None:
    client = realtime_target.client
    client.create_queue("q")
    client.pause_queue("q")
    msg_id = client.enqueue("q", "held").message_id
    poller = started(Poller(client, "q", wait_ms=WAIT_MS))
    assert poller.is_alive()  # a message is there, yet the poll waits
    other = realtime_target.connect(system_clock)
    other.resume_queue("q")  # from another client: its commit must wake the waiting poll
    (m,) = poller.woken()
    assert m.id == msg_id
