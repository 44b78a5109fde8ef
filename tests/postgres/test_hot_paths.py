"""The hot paths on PostgreSQL (``sqew.backends.postgres.hot``): an enqueue, a poll and an ack
of an embedded Client are one statement each, a transaction of their own; the queue limits an
enqueue keeps from an earlier one never outlive a change made by another process; an ack
answers item by item as one ack at a time would."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

import sqew
from sqew import errors, models
from sqew.backends import open_backend
from sqew.core.service import QueueService

pytestmark = pytest.mark.postgres


class Statements(list[str]):
    """Every statement a backend ran (its ``trace`` hook)."""

    def take(self) -> list[str]:
        out = [s.split(None, 1)[0] for s in self]
        self.clear()
        return out


@pytest.fixture
def two(pg_url: str) -> Iterator[tuple[sqew.LocalClient, sqew.LocalClient]]:
    """Two embedded Clients on one database: two processes' worth of backends."""
    a, b = sqew.LocalClient(pg_url), sqew.LocalClient(pg_url)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_enqueue_poll_and_ack_are_one_statement_each(pg_url: str) -> None:
    statements = Statements()
    # (the reaper set aside: its runs are statements of their own)
    service = QueueService(open_backend(pg_url, trace=statements.append),
                           reap_interval_ms=3_600_000)

    async def run() -> dict[str, list[str]]:
        await service.create_queue(models.QueueCreate(name="q"))
        await service.poll("q")  # (the reaper's first run, due at once)
        seen: dict[str, list[str]] = {}
        for round_ in range(3):  # the first enqueue reads the queue's limits: the later not
            statements.clear()
            await service.enqueue("q", [models.MessageIn(payload=b'{"n":1}')])
            seen[f"enqueue {round_}"] = statements.take()
        await service.enqueue("q", [models.MessageIn(payload=b"1") for _ in range(5)])
        statements.clear()
        (m,) = await service.poll("q")
        seen["poll"] = statements.take()
        await service.ack("q", [(m.id, m.token)])
        seen["ack"] = statements.take()
        got = await service.poll("q", batch=5)
        statements.clear()
        assert len(got) == 5 and len(await service.enqueue(
            "q", [models.MessageIn(payload=b"2") for _ in range(3)])) == 3
        seen["batch enqueue"] = statements.take()
        results = await service.ack("q", [(g.id, g.token) for g in got])
        assert {r.status for r in results} == {"acked"}
        seen["batch ack"] = statements.take()
        return seen

    try:
        seen = asyncio.run(run())
    finally:
        service.close()
    # The first enqueue reads the queue's limits (BEGIN goes with its UPDATE, the notification
    # with its COMMIT: three round trips); then one WITH statement each, no BEGIN or COMMIT:
    # the statement is the transaction.
    assert seen.pop("enqueue 0") == ["BEGIN", "UPDATE", "INSERT", "SELECT", "COMMIT"]
    assert seen == {name: ["WITH"] for name in seen}, seen


def test_a_change_by_another_process_applies_to_the_next_enqueue(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    a, b = two
    b.create_queue("q")
    a.enqueue("q", "x" * 100)  # a keeps q's limits
    b.update_queue("q", max_payload_bytes=50)
    with pytest.raises(errors.PayloadTooLarge):
        a.enqueue("q", "x" * 100)
    b.update_queue("q", max_payload_bytes=1000, retention_ms=60_000)
    with pytest.raises(errors.ValidationError, match="retention_ms"):
        a.enqueue("q", 1, delay_ms=120_000)
    b.update_queue("q", max_depth=2)
    a.enqueue("q", 2)
    with pytest.raises(errors.QueueFull):
        a.enqueue("q", 3)
    b.update_queue("q", max_depth=0)
    assert [b.stats("q").ready, b.stats("q").enqueued_total] == [2, 2]
    b.delete_queue("q")
    with pytest.raises(errors.QueueNotFound):
        a.enqueue("q", 4)
    b.create_queue("q")  # the same name, another queue
    a.enqueue("q", 5)
    assert [m.payload for m in b.peek("q")] == [5]
    assert b.stats("q").ready == 1


def test_a_queue_made_lifo_by_another_process_is_claimed_lifo(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    a, b = two
    b.create_queue("q")
    a.enqueue_batch("q", [{"payload": i} for i in range(4)])
    assert [m.payload for m in a.poll("q")] == [0]  # a takes q for FIFO
    b.update_queue("q", order="lifo")
    assert [m.payload for m in a.poll("q", batch=2)] == [3, 2]
    b.update_queue("q", order="fifo")
    a.enqueue("q", 4)
    assert [m.payload for m in a.poll("q", batch=2)] == [1, 4]


def test_an_ack_answers_item_by_item_as_one_at_a_time_would(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    a, b = two
    b.create_queue("q", archive=True)
    a.enqueue_batch("q", [{"payload": i} for i in range(2)])
    m, n = a.poll("q", batch=2)
    results = a.ack_batch("q", [
        (m.id, "f" * 32),  # not its token (yet): the lease is someone else's
        (m.id, m.token),  # acked
        (m.id, m.token),  # acked already: no such message any more
        (n.id, n.token),  # acked
        (10**12, "f" * 32),  # never was
    ])
    assert [r.status for r in results] == [
        "lease_lost", "acked", "not_found", "acked", "not_found"]
    stats = b.stats("q")
    assert (stats.ready + stats.leased, stats.acked_total) == (0, 2)
    assert sorted(r.id for r in b.scan("q", source="archive").messages) == [m.id, n.id]
