"""Long polls in real time: woken by an enqueue from another thread or another client.

These use the system clock (``realtime_target``): a message enqueued by a second client
carries real timestamps, which a ManualClock far in the past would never reach. The tests
assert what a poll returned, never how long it took.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import sqew
from sqew.core.clock import system_clock

if TYPE_CHECKING:
    from targets import Target

WAIT_MS = 15_000  # far longer than the test needs: a poll that returns empty fails the test
LONGEST_WAIT_MS = 20_000
WAKE_SLACK_S = 8  # a woken poll returns in about 50 ms; one that was not waits 20 s


class Poller(threading.Thread):
    """Runs one long poll in a thread and keeps what it returned (or raised)."""

    def __init__(self, client: sqew.Client, queue: str, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.client, self.queue, self.kwargs = client, queue, kwargs
        self.result: list[sqew.LeasedMessage] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.client.poll(self.queue, **self.kwargs)
        except BaseException as exc:  # reported by the test thread
            self.error = exc

    def outcome(self) -> list[sqew.LeasedMessage]:
        """Wait (bounded) for the poll and return its messages."""
        self.join(timeout=WAIT_MS / 1000 + 10)
        assert not self.is_alive(), "the long poll did not return"
        assert self.error is None, self.error
        assert self.result is not None
        return self.result


    def woken(self) -> list[sqew.LeasedMessage]:
        """The poll's messages, which it must return long before its wait runs out (a poll
        that slept through the commit returns only when its wait ends, with a last claim)."""
        wait_s = self.kwargs["wait_ms"] / 1000
        self.join(timeout=wait_s - WAKE_SLACK_S)
        assert not self.is_alive(), "the long poll slept through the commit that woke it"
        assert self.error is None, self.error
        assert self.result is not None
        return self.result


def started(poller: Poller) -> Poller:
    """Start a poller and give it a moment to be waiting (correct either way)."""
    poller.start()
    time.sleep(0.2)
    return poller


def test_woken_by_enqueue_from_another_thread(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q")
    poller = started(Poller(client, "q", wait_ms=WAIT_MS))
    msg_id = client.enqueue("q", {"hello": "thread"}).message_id
    (m,) = poller.outcome()
    assert (m.id, m.payload) == (msg_id, {"hello": "thread"})


def test_woken_by_enqueue_from_another_client(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q")
    producer = realtime_target.connect(system_clock)
    poller = started(Poller(client, "q", wait_ms=WAIT_MS, batch=10))
    msg_id = producer.enqueue("q", "from afar").message_id
    got = poller.outcome()
    assert [(m.id, m.payload) for m in got] == [(msg_id, "from afar")]


def test_woken_by_a_batch(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q")
    producer = realtime_target.connect(system_clock)
    poller = started(Poller(client, "q", wait_ms=WAIT_MS, batch=10))
    sent = [r.message_id for r in producer.enqueue_batch("q", [{"payload": i} for i in range(3)])]
    got = poller.outcome()
    assert got and [m.id for m in got] == sent[: len(got)]


def test_only_one_of_two_waiters_gets_the_message(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q")
    other = realtime_target.connect(system_clock)
    short = {"wait_ms": 1500}
    pollers = [started(Poller(c, "q", **short)) for c in (client, other)]
    msg_id = client.enqueue("q", 1).message_id
    results = [p.outcome() for p in pollers]
    assert sorted(len(r) for r in results) == [0, 1]
    assert [m.id for r in results for m in r] == [msg_id]


def test_returns_empty_after_wait_ms(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q")
    client.create_queue("other")
    client.enqueue("other", "not for q")
    assert client.poll("q", wait_ms=200) == []


def test_returns_at_once_when_ready(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q")
    msg_id = client.enqueue("q", 1).message_id
    assert [m.id for m in client.poll("q", wait_ms=WAIT_MS)] == [msg_id]


def another_process(target: Target) -> sqew.Client:
    """A client on the target's store with a service of its own: its commits reach the
    target's waiting polls only through the database (as another process's do)."""
    other = sqew.LocalClient(target.url)
    target._cleanups.append(other.close)
    return other


def test_woken_by_a_lease_given_back_from_another_process(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q", visibility_ms=600_000)
    msg_id = client.enqueue("q", "held").message_id
    holder = another_process(realtime_target)
    (held,) = holder.poll("q")
    # The poll's next due time is the lease's end, long after its wait: only a wake-up
    # brings the message back in time.
    poller = started(Poller(client, "q", wait_ms=LONGEST_WAIT_MS))
    holder.extend_lease("q", held.id, held.token, 0)
    (m,) = poller.woken()
    assert (m.id, m.attempts) == (msg_id, 2)


def test_woken_when_an_ack_and_a_requeue_leave_the_depth_as_it_was(
    realtime_target: Target,
) -> None:
    client = realtime_target.client
    client.create_queue("q", max_attempts=1, visibility_ms=600_000)
    holder = another_process(realtime_target)
    failed = client.enqueue("q", "failed").message_id
    (m,) = holder.poll("q")
    holder.nack("q", m.id, m.token)  # its one attempt: to the DLQ
    client.enqueue("q", "held")
    (held,) = holder.poll("q")
    poller = started(Poller(client, "q", wait_ms=LONGEST_WAIT_MS))
    # The depth goes down by one and up by one: only the requeue made a message ready.
    holder.ack("q", held.id, held.token)
    assert holder.dlq_requeue("q").requeued == 1
    (got,) = poller.woken()
    assert got.id == failed


def test_woken_by_a_lease_shortened_from_another_process(realtime_target: Target) -> None:
    client = realtime_target.client
    client.create_queue("q", visibility_ms=600_000)
    msg_id = client.enqueue("q", "held").message_id
    holder = another_process(realtime_target)
    (held,) = holder.poll("q")
    poller = started(Poller(client, "q", wait_ms=LONGEST_WAIT_MS))
    holder.extend_lease("q", held.id, held.token, 1000)  # ends in a second, not in ten minutes
    (m,) = poller.woken()
    assert m.id == msg_id
