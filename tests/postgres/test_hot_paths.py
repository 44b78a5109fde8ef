"""The by-name writes on PostgreSQL (``sqew.backends.postgres.by_name``, ``fast``): an enqueue,
a poll and an ack of an embedded Client are one statement each, a transaction of their own;
the queue settings an enqueue keeps from an earlier one never outlive a change made by another
process; an ack answers item by item as one ack at a time would."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator

import pg_support
import psycopg
import pytest

import sqew
from sqew import errors, models
from sqew.backends import open_backend
from sqew.backends.postgres import by_name, connection
from sqew.backends.rows import NewMessage
from sqew.core import signing
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
    # (ready + delayed: a's clock and b's, each the server's plus a measured offset, may
    # differ by a millisecond, and a message a enqueued may not be ready yet by b's)
    stats = b.stats("q")
    assert [stats.ready + stats.delayed, stats.enqueued_total] == [2, 2]
    b.delete_queue("q")
    with pytest.raises(errors.QueueNotFound):
        a.enqueue("q", 4)
    b.create_queue("q")  # the same name, another queue
    a.enqueue("q", 5)
    assert [m.payload for m in a.peek("q")] == [5]
    assert b.stats("q").enqueued_total == 1


def test_limits_loosened_elsewhere_apply_to_the_next_enqueue(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    # The limits a process keeps may only write: a refusal is the queue's current limits'.
    a, b = two
    b.create_queue("q", max_payload_bytes=100, retention_ms=60_000)
    a.enqueue("q", "x")  # a keeps q's limits
    b.update_queue("q", max_payload_bytes=1000, retention_ms=600_000)
    a.enqueue("q", "x" * 500)
    a.enqueue("q", 1, delay_ms=120_000)
    a.update_queue("q", max_payload_bytes=2000)  # and in the same process
    a.enqueue("q", "x" * 1500)
    assert b.stats("q").enqueued_total == 4


def test_a_rotated_hmac_secret_applies_to_the_next_signed_enqueue(pg_url: str) -> None:
    old, new = "a" * 16, "b" * 16
    body = b'{"payload":1}'
    message = [models.MessageIn(payload=b"1")]
    service = QueueService(open_backend(pg_url), reap_interval_ms=3_600_000)

    async def run() -> None:
        await service.create_queue(models.QueueCreate(name="q", hmac_secret=old))
        await service.enqueue("q", message, signing.Proof(signing.header(old, body), body))
        await service.update_queue("q", models.QueueSettings(hmac_secret=new))
        await service.enqueue("q", message, signing.Proof(signing.header(new, body), body))
        with pytest.raises(errors.InvalidSignature):
            await service.enqueue("q", message, signing.Proof(signing.header(old, body), body))

    try:
        asyncio.run(run())
    finally:
        service.close()


def test_an_ack_that_waited_for_a_message_another_took_says_not_found(pg_url: str) -> None:
    client = sqew.LocalClient(pg_url)
    info = connection.conninfo(pg_url)
    try:
        client.create_queue("q")
        client.enqueue("q", 1)
        (m,) = client.poll("q")
        got: list[str] = []
        with contextlib.closing(psycopg.connect(info, autocommit=True)) as other, \
                contextlib.closing(psycopg.connect(info, autocommit=True)) as watch:
            other.execute("BEGIN")
            other.execute("SELECT id FROM queues WHERE name = 'q' FOR NO KEY UPDATE")
            acking = threading.Thread(target=lambda: got.extend(
                r.status for r in client.ack_batch("q", [(m.id, m.token)])))
            acking.start()
            pg_support.until_a_lock_wait(watch, "the ack")  # for the queue's row
            # Meanwhile the message goes (another consumer's ack of the same lease, say).
            other.execute("DELETE FROM messages WHERE id = %s", (m.id,))
            other.execute("UPDATE queues SET depth = depth - 1, acked_total = acked_total + 1 "
                          "WHERE name = 'q'")
            other.execute("COMMIT")
            acking.join(20)
        assert got == ["not_found"]  # not lease_lost: the message is not there
        assert client.stats("q").acked_total == 1
    finally:
        client.close()


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


def test_a_queue_that_starts_or_stops_archiving_elsewhere_is_acked_its_new_way(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    # a's acks assume the queue keeps no archive until they see it does, and the other way
    # round: each change made by b applies to a's next ack, of one message or of several.
    a, b = two
    b.create_queue("q")

    def cycle(batch: int) -> list[int]:
        a.enqueue_batch("q", [{"payload": i} for i in range(batch)])
        got = a.poll("q", batch=batch)
        if batch == 1:
            assert a.ack("q", got[0].id, got[0].token).status == "acked"
        else:
            results = a.ack_batch("q", [(m.id, m.token) for m in got])
            assert [r.status for r in results] == ["acked"] * batch
        return [m.id for m in got]

    cycle(1)  # not archived
    b.update_queue("q", archive=True)
    kept = cycle(1) + cycle(3)
    b.update_queue("q", archive=False)
    cycle(1)
    cycle(3)
    b.update_queue("q", archive=True)
    kept += cycle(2)
    assert sorted(m.id for m in b.scan("q", source="archive").messages) == sorted(kept)
    stats = b.stats("q")
    assert (stats.ready, stats.leased, stats.acked_total) == (0, 0, 11)


def test_an_ack_answers_item_by_item_as_one_at_a_time_would(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    a, b = two
    b.create_queue("q", archive=True)
    a.enqueue_batch("q", [{"payload": i} for i in range(2)])
    m, n = a.poll("q", batch=2)
    results = a.ack_batch("q", [
        (m.id, "f" * 32),  # not its token: the lease is someone else's
        (m.id, m.token),  # acked
        (m.id, m.token),  # acked already: no such message any more
        (n.id, "e" * 32),  # not its token
        (n.id, n.token),  # acked
        (10**12, "f" * 32),  # never was
    ])
    assert [r.status for r in results] == [
        "lease_lost", "acked", "not_found", "lease_lost", "acked", "not_found"]
    stats = b.stats("q")
    assert (stats.ready + stats.leased, stats.acked_total) == (0, 2)
    assert sorted(r.id for r in b.scan("q", source="archive").messages) == [m.id, n.id]


def test_a_claim_gives_each_message_its_own_token_and_an_ack_pairs_them_by_id(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    # Tokens come from the polling process, one per message, assigned in claim order; an ack
    # of distinct ids pairs each id with its own token, never with another item's.
    a, b = two
    b.create_queue("q")
    a.enqueue_batch("q", [{"payload": i} for i in range(6)])
    got = a.poll("q", batch=6)
    tokens = [m.token for m in got]
    assert len(set(tokens)) == 6
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in tokens)
    m0, m1, *rest = got
    results = a.ack_batch("q", [(m0.id, m1.token), (m1.id, m0.token)]
                          + [(m.id, m.token) for m in rest])
    assert [r.status for r in results] == ["lease_lost", "lease_lost"] + ["acked"] * 4
    assert [r.status for r in b.ack_batch("q", [(m1.id, m1.token), (m0.id, m0.token)])] \
        == ["acked", "acked"]
    stats = b.stats("q")
    assert (stats.ready + stats.leased, stats.acked_total) == (0, 6)


def test_polls_of_one_past_a_draw_of_tokens_each_lease_under_a_token_of_their_own(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    # A connection's polls of one take their tokens from TOKENS_AHEAD drawn at once: across
    # two draws and two processes, every lease has its own, and only its own token acks it.
    a, b = two
    count = 2 * by_name.TOKENS_AHEAD + 8
    a.create_queue("q")
    for start in range(0, count, 100):
        a.enqueue_batch("q", [{"payload": i} for i in range(start, min(start + 100, count))])
    leased = []
    for i in range(count):
        (m,) = (a if i % 2 else b).poll("q")
        leased.append(m)
    assert sorted(m.payload for m in leased) == list(range(count))  # each message once
    tokens = {m.token for m in leased}
    assert len(tokens) == count
    assert all(len(t) == 32 and int(t, 16) >= 0 for t in tokens)
    first, second = leased[0], leased[1]
    assert a.ack_batch("q", [(first.id, second.token)])[0].status == "lease_lost"
    for i, m in enumerate(leased):
        assert (b if i % 2 else a).ack("q", m.id, m.token).status == "acked"
    stats = a.stats("q")
    assert (stats.ready, stats.leased, stats.acked_total) == (0, 0, count)


def test_claims_and_acks_of_more_than_a_poll_takes(pg_url: str) -> None:
    count = 120
    backend = open_backend(pg_url)
    client = sqew.LocalClient(pg_url)
    try:
        client.create_queue("q")
        for start in range(0, count, 100):
            client.enqueue_batch("q", [{"payload": i} for i in range(start, min(start + 100,
                                                                                   count))])
        # (a claim of more than a poll's batch: a server's merged polls)
        with backend.write() as tx:
            # (a second on: the Client's clock, which stamped the messages, and this
            # backend's are two measurements of the server's, a millisecond apart at times)
            found = tx.claim_by_name("q", backend.clock() + 1_000, count, None)
        assert found is not None and found[1] is not None
        claimed = found[1]
        assert [m.payload for m in claimed] == [str(i) for i in range(count)]
        assert len({m.token for m in claimed}) == count
        wrong = claimed[0]
        results = client.ack_batch("q", [(wrong.id, "f" * 32)]
                                   + [(m.id, m.token) for m in claimed[1:]])
        assert [r.status for r in results] == ["lease_lost"] + ["acked"] * (count - 1)
        assert client.stats("q").acked_total == count - 1
    finally:
        client.close()
        backend.close()


def test_a_one_thread_client_works_on_one_server_process(pg_url: str) -> None:
    # The pool opens with its first connection ready: a call made before it was ready had the
    # pool open a second one, and the pool hands its connections out in turn.
    client = sqew.LocalClient(pg_url)
    info = connection.conninfo(pg_url)
    try:
        client.create_queue("q")
        for i in range(20):
            client.enqueue("q", i)
            (m,) = client.poll("q")
            client.ack("q", m.id, m.token)
        with contextlib.closing(psycopg.connect(info, autocommit=True)) as watch:
            rows = watch.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND query LIKE 'WITH%'").fetchall()
        assert len(rows) == 1, rows  # the hot paths' statements all ran on one connection
    finally:
        client.close()


def test_a_poll_that_sweeps_ended_leases_signs_with_the_queues_secret(
    two: tuple[sqew.LocalClient, sqew.LocalClient],
) -> None:
    # The poll finds a lease ended, sweeps it under the queue's lock and claims again: the
    # message is signed with the queue's secret as it is then, not as the first read saw it.
    a, b = two
    b.create_queue("q", hmac_secret="s" * 32)
    a.enqueue("q", {"n": 1})
    (m,) = a.poll("q", visibility_ms=1)
    assert sqew.verify_signature(m, "s" * 32)
    b.update_queue("q", hmac_secret="t" * 32)
    deadline = time.monotonic() + 10
    again: list[models.LeasedMessage] = []
    while not again and time.monotonic() < deadline:  # the lease ends a millisecond later
        again = a.poll("q")
    assert [x.id for x in again] == [m.id] and again[0].attempts == 2
    assert sqew.verify_signature(again[0], "t" * 32)
    assert not sqew.verify_signature(again[0], "s" * 32)


def test_a_by_name_write_is_part_of_its_transaction(pg_url: str) -> None:
    # Every method of a Tx runs in its transaction: an enqueue by name, even on the settings
    # the backend has cached (one statement), is rolled back with the rest.
    backend = open_backend(pg_url)
    service = QueueService(backend, reap_interval_ms=3_600_000)
    try:
        asyncio.run(service.create_queue(models.QueueCreate(name="q")))
        asyncio.run(service.enqueue("q", [models.MessageIn(payload=b"1")]))  # (cached now)
        now = backend.clock()
        with pytest.raises(RuntimeError), backend.write() as tx:
            ids = tx.enqueue_by_name("q", 1, lambda q: [NewMessage(
                q.id, "2", 0, None, now, now, now + 60_000, False, None, None, None)])
            assert ids
            raise RuntimeError("the operation fails after its enqueue")
        stats = asyncio.run(service.stats("q"))
        assert (stats.enqueued_total, stats.ready) == (1, 1)
    finally:
        service.close()
