"""The kept connection of a PostgreSQL backend (``sqew.backends.postgres.tx_pool``): one
transaction object, with its connection and cursor, kept out of the pool between transactions.
A Client carries on when the server ends it, threads sharing a Client never share it at once,
the clock's refresh uses it when it is free, a closed Client refuses calls, and a large answer
is not held by its cursor."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import psycopg
import pytest

import sqew
from sqew import errors, models
from sqew.backends import open_backend
from sqew.backends.postgres import connection
from sqew.core.service import QueueService

pytestmark = pytest.mark.postgres


def test_a_client_carries_on_after_the_server_ended_its_kept_connection(pg_url: str) -> None:
    # The backend keeps one connection out of the pool between transactions. When the server
    # ends it (pg_terminate_backend here; a restart does the same to every connection) the
    # next call finds it closed and runs on another: no error, nothing lost.
    client = sqew.LocalClient(pg_url)
    info = connection.conninfo(pg_url)
    try:
        client.create_queue("q")
        first = client.enqueue("q", "before")
        with contextlib.closing(psycopg.connect(info, autocommit=True)) as admin:
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchall()
            assert ended and all(ok for (ok,) in ended)
            deadline = time.monotonic() + 10
            while admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()").fetchone() != (0,):
                assert time.monotonic() < deadline, "the connections did not end"
                time.sleep(0.01)
        second = client.enqueue("q", "after")
        got = client.poll("q", batch=10)
        assert [(m.id, m.payload) for m in got] == [
            (first.message_id, "before"), (second.message_id, "after")]
        assert [r.status for r in client.ack_batch("q", [(m.id, m.token) for m in got])] == [
            "acked", "acked"]
        stats = client.stats("q")
        assert (stats.ready, stats.leased, stats.acked_total) == (0, 0, 2)
    finally:
        client.close()


def test_threads_sharing_a_client_each_get_a_connection_of_their_own(pg_url: str) -> None:
    # One connection is kept out of the pool for the next transaction; threads working at
    # once take it or one of the pool's, never the same one at once: every message is
    # delivered once and acked once, and the counters add up.
    client = sqew.LocalClient(pg_url)
    threads, each = 8, 40
    acked: list[int] = []
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(each):
                client.enqueue("q", [n, i])
                for m in client.poll("q", batch=2):
                    client.ack("q", m.id, m.token)
                    acked.append(m.id)
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    try:
        client.create_queue("q")
        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(120)
        assert not failures, failures
        while got := client.poll("q", batch=100):
            for r in client.ack_batch("q", [(m.id, m.token) for m in got]):
                assert r.status == "acked"
                acked.append(r.id)
        assert len(acked) == len(set(acked)) == threads * each
        stats = client.stats("q")
        assert (stats.ready, stats.leased, stats.enqueued_total, stats.acked_total) == (
            0, 0, threads * each, threads * each)
    finally:
        client.close()


def test_a_one_thread_client_needs_one_connection_for_its_clock_too(
    pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The clock's refresh (like a ping) takes the kept connection when it is free, rather than
    # have the pool open a second one because the kept one is out of it. (A refresh that comes
    # while the connection is in use takes one of the pool's: as before the connection was
    # kept, two threads at once need two.)
    from sqew.backends.postgres import server_clock

    # The first refresh comes 5 s after the start, when the work below is done (on a loaded
    # machine it may not be, and a refresh meeting the work opens a second connection: counted
    # in ``working``, and the idle refreshes after it must still add none).
    monkeypatch.setattr(server_clock, "REFRESH_S", 5.0)
    client = sqew.LocalClient(pg_url)
    info = connection.conninfo(pg_url)
    others = ("SELECT query FROM pg_stat_activity WHERE datname = current_database() "
              "AND pid <> pg_backend_pid()")
    try:
        client.create_queue("q")
        for i in range(10):
            client.enqueue("q", i)
            (m,) = client.poll("q")
            client.ack("q", m.id, m.token)
        monkeypatch.setattr(server_clock, "REFRESH_S", 0.2)  # from the first refresh on
        with contextlib.closing(psycopg.connect(info, autocommit=True)) as watch:
            working = len(watch.execute(others).fetchall())
            deadline = time.monotonic() + 30  # a loaded machine may run the refresher late
            while True:
                rows = watch.execute(others).fetchall()
                if (server_clock.QUERY,) in rows or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            time.sleep(0.7)  # three more refreshes, the Client idle
            idle = watch.execute(others).fetchall()
        assert (server_clock.QUERY,) in rows
        assert len(idle) == working and (server_clock.QUERY,) in idle, (working, idle)
    finally:
        client.close()


def test_a_closed_client_answers_unavailable(pg_url: str) -> None:
    client = sqew.LocalClient(pg_url)
    client.create_queue("q")
    client.enqueue("q", 1)
    client.close()
    with pytest.raises(errors.Unavailable):
        client.enqueue("q", 2)
    with pytest.raises(errors.Unavailable):
        client.poll("q")


def test_a_large_answer_is_not_kept_after_its_poll(pg_url: str) -> None:
    # The kept transaction object's cursor would hold its last answer until its next
    # statement: a poll that brought a megabyte or more lets go of it.
    backend = open_backend(pg_url)
    service = QueueService(backend, reap_interval_ms=3_600_000)
    big = [models.MessageIn(payload=b'"' + b"x" * 600_000 + b'"') for _ in range(2)]

    async def run() -> None:
        await service.create_queue(models.QueueCreate(name="q", max_payload_bytes=1 << 20))
        await service.enqueue("q", big)
        assert len(await service.poll("q", batch=2)) == 2
        (kept,) = backend._txs._kept  # type: ignore[attr-defined]
        assert kept.cur.pgresult is None  # a fresh cursor
        await service.enqueue("q", [models.MessageIn(payload=b'"small"')])
        assert len(await service.poll("q")) == 1
        (kept,) = backend._txs._kept  # type: ignore[attr-defined]
        assert kept.cur.pgresult is not None  # a small answer stays until the next statement

    try:
        asyncio.run(run())
    finally:
        service.close()
