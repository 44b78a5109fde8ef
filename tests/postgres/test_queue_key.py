"""On PostgreSQL a message's queue exists by the writes, not by a foreign key
(``sqew.backends.schema.MESSAGES_QUEUE_KEY``): deleting a queue deletes its messages and its
DLQ's, and a write racing the delete waits for it and finds no queue. No message ever
outlives its queue."""

from __future__ import annotations

import contextlib
import threading
import time

import pg_support
import psycopg
import pytest

import sqew
from sqew import errors
from sqew.backends.postgres import connection

pytestmark = pytest.mark.postgres

ORPHANS = ("SELECT count(*) FROM messages m "
           "WHERE NOT EXISTS (SELECT FROM queues q WHERE q.id = m.queue_id)")


def orphans(info: str) -> int:
    with contextlib.closing(psycopg.connect(info, autocommit=True)) as conn:
        row = conn.execute(ORPHANS).fetchone()
        assert row is not None
        return int(row[0])


def test_the_database_has_no_key_from_messages_to_queues(pg_url: str) -> None:
    with contextlib.closing(psycopg.connect(connection.conninfo(pg_url))) as conn:
        keys = conn.execute("SELECT conname FROM pg_constraint WHERE contype = 'f' "
                            "AND conrelid = 'messages'::regclass").fetchall()
    assert keys == []


def test_deleting_a_queue_deletes_its_and_its_dlqs_messages(pg_url: str) -> None:
    info = connection.conninfo(pg_url)
    with sqew.Client(pg_url) as client:
        client.create_queue("q", max_attempts=1)
        client.create_queue("other")
        client.enqueue_batch("q", [{"payload": i} for i in range(5)])
        (m,) = client.poll("q")
        client.nack("q", m.id, m.token)  # its last attempt: into q.dlq
        client.enqueue("other", "stays")
        assert client.get_queue("q").stats.dlq == 1
        client.delete_queue("q")
        with contextlib.closing(psycopg.connect(info, autocommit=True)) as conn:
            left = conn.execute("SELECT payload FROM messages").fetchall()
        assert left == [('"stays"',)]
        client.create_queue("q")  # a queue of the same name starts empty
        assert client.poll("q") == []


def test_an_enqueue_waiting_for_a_delete_finds_no_queue_and_leaves_nothing(
    pg_url: str,
) -> None:
    info = connection.conninfo(pg_url)
    client = sqew.Client(pg_url)
    try:
        client.create_queue("q")
        client.enqueue("q", "first")  # (the Client keeps the queue's limits: the hot path next)
        outcome: list[object] = []

        def enqueue() -> None:
            try:
                outcome.append(client.enqueue("q", "late"))
            except errors.SqewError as exc:
                outcome.append(exc)

        with contextlib.closing(psycopg.connect(info, autocommit=True)) as deleting, \
                contextlib.closing(psycopg.connect(info, autocommit=True)) as watch:
            # What ``sqew queue delete`` runs, held open: the queue's rows locked, its
            # messages deleted, then its rows.
            deleting.execute("BEGIN")
            deleting.execute("SELECT id FROM queues WHERE name IN ('q', 'q.dlq') ORDER BY id "
                             "FOR NO KEY UPDATE")
            deleting.execute("DELETE FROM messages WHERE queue_id IN "
                             "(SELECT id FROM queues WHERE name IN ('q', 'q.dlq'))")
            deleting.execute("DELETE FROM queues WHERE name IN ('q', 'q.dlq')")
            thread = threading.Thread(target=enqueue)
            thread.start()
            pg_support.until_a_lock_wait(watch, "the enqueue")
            deleting.execute("COMMIT")
            thread.join(20)
        assert len(outcome) == 1 and isinstance(outcome[0], errors.QueueNotFound)
        assert orphans(info) == 0
    finally:
        client.close()


ROUNDS = 15
WORKERS = 3
DEADLINE_S = 60


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_writes_racing_deletes_of_their_queue_leave_no_message_behind(pg_url: str) -> None:
    """Enqueues (one and many), claims and nacks into the DLQ go on while the queue is
    deleted and created again, over and over."""
    info = connection.conninfo(pg_url)
    deadline = time.monotonic() + DEADLINE_S
    stop = threading.Event()
    failures: list[BaseException] = []
    wrote = [0] * WORKERS

    def work(index: int) -> None:
        with sqew.Client(pg_url) as client:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    client.enqueue("q", index)
                    client.enqueue_batch("q", [{"payload": index}] * 3)
                    for m in client.poll("q", batch=2):
                        client.nack("q", m.id, m.token)  # max_attempts 1: into q.dlq
                    wrote[index] += 1
                except (errors.QueueNotFound, errors.LeaseLost, errors.MessageNotFound):
                    pass  # the queue went (and maybe came back) meanwhile
                except BaseException as exc:  # (reported by the test)
                    failures.append(exc)
                    return

    with sqew.Client(pg_url) as admin:
        admin.create_queue("q", max_attempts=1)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(WORKERS)]
        for t in threads:
            t.start()
        try:
            for _ in range(ROUNDS):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
                admin.delete_queue("q")
                admin.create_queue("q", max_attempts=1)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        assert not failures, failures
        assert all(wrote), wrote
        admin.delete_queue("q")
    assert orphans(info) == 0
    with contextlib.closing(psycopg.connect(info, autocommit=True)) as conn:
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (0,)
