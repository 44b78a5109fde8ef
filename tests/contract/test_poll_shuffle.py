"""Poll with ``order="shuffle"``: random ready messages, never one that is not ready, each
held by one poller at a time."""

from __future__ import annotations

import threading

import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import enqueue_many, ids

ROUNDS = 40


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", visibility_ms=10_000)
    return "q"


def test_shuffle_does_not_always_take_the_head(client: sqew.Client, q: str) -> None:
    sent = enqueue_many(client, q, list(range(20)))
    firsts = set()
    for _ in range(ROUNDS):  # lease one, give it back at once: the queue stays as it was
        (m,) = client.poll(q, order="shuffle")
        firsts.add(m.id)
        client.nack(q, m.id, m.token, delay_ms=0)
    # Twenty messages, forty draws: the head every time has a chance of 20**-39.
    assert firsts - {sent[0]}
    assert firsts <= set(sent)


def test_shuffle_takes_only_ready_messages(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    ready = enqueue_many(client, q, list(range(5)))
    enqueue_many(client, q, list(range(5)), delay_ms=60_000)
    held = client.poll(q, batch=2, visibility_ms=120_000)  # leased: not ready either
    got = client.poll(q, batch=100, order="shuffle", visibility_ms=120_000)
    assert sorted(ids(got)) == sorted(set(ready) - set(ids(held)))
    assert client.poll(q, batch=100, order="shuffle") == []
    clock.advance(60_000)
    assert len(client.poll(q, batch=100, order="shuffle")) == 5


def test_shuffle_leases_each_message_once(client: sqew.Client, q: str) -> None:
    sent = enqueue_many(client, q, list(range(30)))
    seen: list[int] = []
    while got := client.poll(q, batch=7, order="shuffle"):
        seen += ids(got)
    assert sorted(seen) == sorted(sent)  # every one, none twice
    leased = client.poll(q, batch=1)
    assert leased == []


def test_shuffled_lease_acks_and_ends_like_any(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    (mid,) = enqueue_many(client, q, ["x"])
    (m,) = client.poll(q, order="shuffle", visibility_ms=1_000)
    assert (m.id, m.attempts) == (mid, 1)
    clock.advance(1_000)  # the lease ended: ready again, a shuffled poll takes it back
    (again,) = client.poll(q, order="shuffle")
    assert (again.id, again.attempts) == (mid, 2)
    with pytest.raises(errors.LeaseLost):  # one holder: the first lease is gone
        client.ack(q, m.id, m.token)
    assert client.ack(q, again.id, again.token).status == "acked"


def test_unknown_order(client: sqew.Client, q: str) -> None:
    client.enqueue(q, 1)
    with pytest.raises(errors.ValidationError):
        client.poll(q, order="random")
    with pytest.raises(errors.QueueNotFound):
        client.poll("nope", order="shuffle")


def test_concurrent_shuffled_polls_never_share_a_message(client: sqew.Client, q: str) -> None:
    sent = enqueue_many(client, q, list(range(60)))
    taken: list[list[int]] = [[] for _ in range(4)]

    def consume(mine: list[int]) -> None:
        while got := client.poll(q, batch=5, order="shuffle"):
            mine += ids(got)

    threads = [threading.Thread(target=consume, args=(mine,)) for mine in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    every = [i for mine in taken for i in mine]
    assert sorted(every) == sorted(sent)  # each leased once, by one poller
