"""Scan and export (docs/rest.md, "Scan and export": ``GET /queues/{q}/messages``,
``Client.scan``/``export``):
pages by id of a queue, its DLQ or its archive, with each message's state, touching nothing."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import sqew
from sqew import errors
from sqew.core.clock import ManualClock

from .helpers import ids


@pytest.fixture
def q(client: sqew.Client) -> str:
    client.create_queue("q", max_attempts=1, archive=True, retention_ms=60_000)
    return "q"


def enqueue(client: sqew.Client, queue: str, count: int) -> list[int]:
    return [r.message_id for r in client.enqueue_batch(
        queue, [{"payload": {"n": i}, "priority": i % 3, "attributes": {"n": str(i)}}
                for i in range(count)]
    )]


def test_pages_by_id_with_after_id_max_id_and_limit(client: sqew.Client, q: str) -> None:
    sent = enqueue(client, q, 7)
    first = client.scan(q, limit=3)
    assert ids(first.messages) == sent[:3]
    assert first.next_after_id == sent[2]
    assert first.high_water_id == sent[-1]
    second = client.scan(q, after_id=first.next_after_id, limit=3)
    assert ids(second.messages) == sent[3:6] and second.next_after_id == sent[5]
    last = client.scan(q, after_id=second.next_after_id, limit=3)
    assert ids(last.messages) == sent[6:] and last.next_after_id is None
    # max_id bounds the scan, inclusive; no high-water mark is given then
    bounded = client.scan(q, after_id=sent[1], max_id=sent[4], limit=10)
    assert ids(bounded.messages) == sent[2:5]
    assert bounded.next_after_id is None and bounded.high_water_id is msgspec.UNSET
    assert client.scan(q, after_id=0).messages == client.scan(q).messages
    assert client.scan(q, after_id=sent[-1]).messages == []
    # a full last page says there may be more; the next one is then empty
    exact = client.scan(q, after_id=sent[3], limit=3)
    assert exact.next_after_id == sent[-1]
    assert client.scan(q, after_id=exact.next_after_id).messages == []
    m = client.scan(q, limit=1).messages[0]
    assert (m.queue, m.payload, m.priority, m.attributes, m.attempts, m.state) == (
        "q", {"n": 0}, 0, {"n": "0"}, 0, "ready")


def test_states_in_the_queue_and_no_side_effect(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    ready, leased = enqueue(client, q, 2)  # priorities 0 and 1
    delayed = client.enqueue(q, "later", delay_ms=5000, idempotency_key="k-1").message_id
    held = client.poll(q, batch=1)[0]
    assert held.id == leased
    stats = client.stats(q)
    page = client.scan(q)
    assert [(m.id, m.state) for m in page.messages] == [
        (ready, "ready"), (leased, "leased"), (delayed, "delayed")]
    assert page.messages[2].idempotency_key == "k-1"
    assert page.messages[0].idempotency_key is msgspec.UNSET
    # nothing leased or changed: stats are the same, the lease holder still acks, the others
    # are still there to poll
    assert client.stats(q) == stats
    assert client.scan(q).messages == page.messages
    again = client.poll(q, batch=10)
    assert ids(again) == [ready]
    client.ack(q, held.id, held.token)
    clock.advance(5000)
    assert [(m.id, m.state) for m in client.scan(q).messages] == [
        (ready, "leased"), (delayed, "ready")]


def test_sources_dlq_and_archive(client: sqew.Client, clock: ManualClock, q: str) -> None:
    a, b, c = enqueue(client, q, 3)
    leased = {m.id: m for m in client.poll(q, batch=3)}
    client.ack(q, a, leased[a].token)
    acked_at = clock()
    client.nack(q, b, leased[b].token, error="boom")  # max_attempts=1: dead-lettered
    archive = client.scan(q, source="archive")
    assert [(m.id, m.state, m.payload, m.attempts) for m in archive.messages] == [
        (a, "archived", {"n": 0}, 1)]
    # an archived message is kept until the queue's retention after its ack
    assert archive.messages[0].expires_at == acked_at + 60_000
    dlq = client.scan(q, source="dlq")
    assert [(m.id, m.queue, m.state, m.last_error, m.origin_queue) for m in dlq.messages] == [
        (b, "q.dlq", "dead", "boom", "q")]
    assert [(m.id, m.state) for m in client.scan(q).messages] == [(c, "leased")]
    # a DLQ is a queue: its own messages scan as source=queue
    assert ids(client.scan("q.dlq").messages) == [b]


def test_compact_keeps_the_archive_to_the_retention(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    a, b = enqueue(client, q, 2)
    first = client.poll(q)[0]
    client.ack(q, first.id, first.token)
    clock.advance(30_000)
    second = client.poll(q)[0]
    client.ack(q, second.id, second.token)
    clock.advance(30_000)  # the first was acked 60 s (the retention) ago
    assert client.compact(q) == 1
    assert ids(client.scan(q, source="archive").messages) == [second.id]
    clock.advance(30_000)
    assert client.compact(q) == 1
    assert client.scan(q, source="archive").messages == []
    assert {first.id, second.id} == {a, b}


def test_the_reaper_keeps_the_archive_to_the_retention(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    enqueue(client, q, 2)
    first = client.poll(q)[0]
    client.ack(q, first.id, first.token)
    clock.advance(30_000)
    second = client.poll(q)[0]
    client.ack(q, second.id, second.token)
    clock.advance(29_000)
    assert ids(client.scan(q, source="archive").messages) == sorted([first.id, second.id])
    clock.advance(1000)  # the first was acked 60 s (the retention) ago; a read reaps first
    # (the reaper runs at most once per reap_interval_ms, 1000 here)
    assert ids(client.scan(q, source="archive").messages) == [second.id]
    clock.advance(30_000)
    assert client.scan(q, source="archive").messages == []
    assert client.compact(q) == 0  # nothing left for compaction


def test_expired_messages_are_not_scanned(
    client: sqew.Client, clock: ManualClock, q: str
) -> None:
    keep = client.enqueue(q, 1, ttl_ms=10_000).message_id
    client.enqueue(q, 2, ttl_ms=1000)
    clock.advance(1000)
    assert ids(client.scan(q).messages) == [keep]


def test_export_iterates_every_page_and_ends_at_the_first_high_water_mark(
    client: sqew.Client, q: str
) -> None:
    sent = enqueue(client, q, 25)
    exported = client.export(q, batch=10)
    got = [next(exported).id for _ in range(10)]
    client.enqueue(q, "after the start")  # not part of this export
    got += [m.id for m in exported]
    assert got == sent
    assert ids(list(client.export(q, source="dlq"))) == []
    assert len(list(client.export(q, batch=1))) == 26


def test_a_growing_queue_still_ends(client: sqew.Client, q: str) -> None:
    enqueue(client, q, 5)
    seen = 0
    for _ in client.export(q, batch=2):
        client.enqueue(q, "more")  # one more per message read: an unbounded scan never ends
        seen += 1
    assert seen == 5


def test_errors(client: sqew.Client, q: str) -> None:
    with pytest.raises(errors.QueueNotFound):
        client.scan("nope")
    with pytest.raises(errors.QueueNotFound):
        list(client.export("nope"))
    with pytest.raises(errors.ValidationError):
        client.scan("q.dlq", source="dlq")  # a DLQ has no DLQ


@pytest.mark.parametrize("kwargs", [
    {"source": "messages"}, {"limit": 0}, {"limit": 1001}, {"after_id": -1}, {"max_id": -1},
])
def test_validation(client: sqew.Client, q: str, kwargs: dict[str, Any]) -> None:
    with pytest.raises(errors.ValidationError):
        client.scan(q, **kwargs)


def test_limit_bounds_are_accepted(client: sqew.Client, q: str) -> None:
    sent = enqueue(client, q, 3)
    assert ids(client.scan(q, limit=1000).messages) == sent
    assert ids(client.scan(q, limit=1).messages) == sent[:1]
