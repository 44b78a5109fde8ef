"""The PostgreSQL waiter: one ``LISTEN``ing connection per process, however many polls wait,
and another process's commit (a ``NOTIFY`` sent by its transaction) wakes the polls of the
queue it wrote, and only those (each poll waits in a thread of its own, on a loop of its
own)."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Any

import pytest

import sqew

pytestmark = pytest.mark.postgres


def test_one_listening_connection_wakes_exactly_the_polls_of_the_written_queue(
    tmp_path: Path,
) -> None:
    import pg_support
    import targets

    store = targets.postgres(tmp_path)
    waiting = sqew.LocalClient(store.url)  # the polls' process
    other = sqew.LocalClient(store.url)  # another process: its commits reach us by NOTIFY only
    queues = [f"q{i}" for i in range(6)]
    results: dict[str, Any] = {}
    threads = [threading.Thread(target=lambda q=q: results.__setitem__(
        q, waiting.poll(q, wait_ms=20_000))) for q in queues]
    try:
        for q in queues:
            other.create_queue(q)
        for t in threads:
            t.start()
        waiter = waiting.service.waiter
        for q in queues:
            assert waiter.until_waiting(q, 1, 20), f"no poll parked on {q}"
        assert waiter.until_listening(20)
        dbname = store.url.rsplit("/", 1)[1]
        with contextlib.closing(pg_support.cluster().server.connect(dbname)) as admin:
            listening = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND query ILIKE 'LISTEN%'"
            ).fetchone()
        assert listening == (1,)

        (sent,) = [r.message_id for r in other.enqueue_batch("q3", [{"payload": "hi"}])]
        threads[3].join(20)
        assert not threads[3].is_alive()
        assert [m.id for m in results["q3"]] == [sent]
        assert all(waiter.waiting(q) == 1 for q in queues if q != "q3")  # still parked

        rest = [q for q in queues if q != "q3"]
        sent_to = {q: other.enqueue(q, q).message_id for q in rest}
        for t in threads:
            t.join(20)
            assert not t.is_alive()
        assert {q: [m.id for m in results[q]] for q in rest} == {
            q: [i] for q, i in sent_to.items()}
    finally:
        waiting.close()
        other.close()
        store.drop()


def test_the_listening_connection_names_itself_for_operators(tmp_path: Path) -> None:
    """``application_name`` tells the ``LISTEN`` session apart in ``pg_stat_activity`` (an
    operator or a fault injector can end it alone): whether a session listens is visible to
    itself only (``pg_listening_channels``)."""
    import pg_support
    import targets

    store = targets.postgres(tmp_path)
    client = sqew.LocalClient(store.url)
    try:
        client.create_queue("q")
        client.poll("q", wait_ms=50)  # a poll that waits opens the listening connection
        assert client.service.waiter.until_listening(20)
        dbname = store.url.rsplit("/", 1)[1]
        with contextlib.closing(pg_support.cluster().server.connect(dbname)) as admin:
            names = admin.execute(
                "SELECT application_name, query FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND (query ILIKE 'LISTEN%' OR application_name = 'sqew-listen')"
            ).fetchall()
        assert names == [("sqew-listen", "LISTEN sqew")]
    finally:
        client.close()
        store.drop()


def test_a_service_closed_after_its_drain_closes_no_descriptor_it_gave_up(
    tmp_path: Path,
) -> None:
    """A server drains its service, then closes it (``sqew.server.runtime``): the waiter is
    closed each time. Descriptors it closed the first time may by then be another thread's
    (a new connection's socket, an event loop's): closing those numbers again would cut
    them from under their owner."""
    import asyncio
    import os

    import targets

    store = targets.postgres(tmp_path)
    client = sqew.LocalClient(store.url)
    try:
        client.create_queue("q")
        client.poll("q", wait_ms=10)  # a long poll starts the listening thread
        assert client.service.waiter.until_listening(20)
        asyncio.run(client.service.drain())
        others = [os.pipe() for _ in range(4)]  # take the numbers the drain gave back
        client.service.close()
        for r, w in others:
            os.fstat(r)  # still open: raises EBADF if the close took them
            os.fstat(w)
            os.close(r)
            os.close(w)
    finally:
        client.close()
        store.drop()
