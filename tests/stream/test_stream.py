"""``Client.stream`` on every target (a file, a server in a thread, PostgreSQL): never more than
``max_in_flight`` unacknowledged, acks free slots, closing gives the leases back at once (another
consumer gets them without waiting for the lease), and a message enqueued while the stream
waits arrives without waiting out a poll.

The bound is shown with ready messages present: another consumer polling with ``wait_ms=0``
finds exactly the messages the stream did not take, and a nack that makes messages ready (and
wakes waiting polls and streams) does not let the stream take one past its bound.
"""

from __future__ import annotations

import concurrent.futures
from concurrent.futures import ThreadPoolExecutor

import pytest
from targets import Target

import sqew
from sqew import errors, models
from sqew.backends.wakeups import InProcessWaiter

DEADLINE_S = 20.0
LONG_LEASE_MS = 60_000  # far longer than any wait below: a lease that ended did not free it
WAIT_MS = 10_000
WOKEN_S = 7.5  # half the stream's own wait (15 s): only a stream that was woken answers by then


def _ids(messages: list[models.LeasedMessage]) -> list[int]:
    return sorted(m.id for m in messages)


def _nack_all(client: sqew.Client, queue: str, messages: list[models.LeasedMessage]) -> None:
    results = client.nack_batch(queue, [{"id": m.id, "token": m.token, "delay_ms": 0}
                                        for m in messages])
    assert {r.status for r in results} == {"requeued"}


def test_the_bound_holds_and_an_ack_frees_a_slot(realtime_target: Target) -> None:
    client = realtime_target.client
    other = realtime_target.connect(realtime_target.clock)
    client.create_queue("jobs")
    ids = [client.enqueue("jobs", {"n": n}).message_id for n in range(4)]
    with client.stream("jobs", max_in_flight=2, visibility_ms=LONG_LEASE_MS) as stream, \
            ThreadPoolExecutor(1) as pool:
        first, second = next(stream), next(stream)
        assert [first.id, second.id] == ids[:2] and first.token and first.attempts == 1
        third = pool.submit(next, stream)
        for _ in range(2):  # ready messages present, and a nack waking the stream: still 2
            rest = other.poll("jobs", batch=10, wait_ms=0, visibility_ms=LONG_LEASE_MS)
            assert _ids(rest) == ids[2:], "the stream took more than max_in_flight"
            _nack_all(other, "jobs", rest)
        assert not third.done()
        assert client.stats("jobs").leased == 2
        client.ack("jobs", first.id, first.token)  # a slot frees: the stream takes one more
        got = third.result(DEADLINE_S)
        assert got.id in ids[2:] and got.payload == {"n": ids.index(got.id)}
        assert client.stats("jobs").leased == 2
        left = other.poll("jobs", batch=10, wait_ms=0)
        assert _ids(left) == [i for i in ids[2:] if i != got.id]


def test_closing_gives_the_leases_back_at_once(realtime_target: Target) -> None:
    client = realtime_target.client
    other = realtime_target.connect(realtime_target.clock)
    client.create_queue("jobs", visibility_ms=LONG_LEASE_MS)
    ids = [client.enqueue("jobs", {"n": n}).message_id for n in range(3)]
    stream = client.stream("jobs", max_in_flight=3)
    seen = [next(stream), next(stream)]
    assert [m.id for m in seen] == ids[:2]
    client.ack("jobs", seen[0].id, seen[0].token)
    stream.close()
    # Leased for a minute; the poll waits 10 s: only leases given back can answer it.
    back = other.poll("jobs", batch=10, wait_ms=WAIT_MS)
    got = list(back)
    while len(got) < 2 and back:
        back = other.poll("jobs", batch=10, wait_ms=WAIT_MS)
        got += back
    assert _ids(got) == ids[1:]
    assert all(m.attempts == 1 for m in got)  # given back: the stream's attempt not counted
    with pytest.raises(StopIteration):
        next(stream)


def test_a_message_enqueued_while_the_stream_waits_arrives_at_once(
        realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("jobs")
    assert realtime_target.service is not None
    waiter = realtime_target.service.waiter
    assert isinstance(waiter, InProcessWaiter)
    with client.stream("jobs", max_in_flight=5) as stream, ThreadPoolExecutor(1) as pool:
        arriving = pool.submit(next, stream)
        assert waiter.until_waiting("jobs", 1, DEADLINE_S), "the stream never waited"
        client.enqueue("jobs", {"late": True})
        done, _ = concurrent.futures.wait([arriving], timeout=WOKEN_S)
        assert done, "the stream was not woken by the enqueue"
        assert arriving.result().payload == {"late": True}


def test_bad_arguments_and_a_missing_queue_are_refused_before_streaming(
        realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("jobs")
    with pytest.raises(errors.QueueNotFound):
        client.stream("nope")
    for bad in ({"max_in_flight": 0}, {"max_in_flight": models.MAX_STREAM_IN_FLIGHT + 1},
                {"visibility_ms": -1}):
        with pytest.raises(errors.ValidationError):
            client.stream("jobs", **bad)  # type: ignore[arg-type]
