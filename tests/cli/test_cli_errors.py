"""Failures through the installed binary: exit 1 with one ``error: <Code>: <message>`` line,
exit 2 for usage errors, never a traceback, and unusable databases refused cleanly."""

from __future__ import annotations

import os
import sqlite3

import pytest


@pytest.fixture
def with_queue(sqew):
    """A runner whose store holds the queue ``sqew.name("jobs")`` (max 3 attempts)."""
    sqew.arrange(sqew.name("jobs"), max_attempts=3).close()
    return sqew


NO_ID = str(9_000_000_000_000)  # a message id no store here reaches

FAILURES = [
    # (args, code); {jobs} is the test's queue, "nope" a queue nobody creates
    (("queue", "add", "--name", "bad.name"), "ValidationError"),
    (("queue", "add", "--name", "ok", "--max-attempts", "0"), "ValidationError"),
    (("queue", "add", "--name", "ok", "--visibility-ms", "43200001"), "ValidationError"),
    (("queue", "add", "--name", "ok", "--order", "sideways"), "ValidationError"),
    (("queue", "add", "--name", "{jobs}"), "QueueExists"),
    (("queue", "update", "--name", "{jobs}", "--backoff-base-ms", "10",
      "--backoff-max-ms", "5"), "ValidationError"),
    (("queue", "rm", "--name", "{jobs}.dlq"), "ValidationError"),
    (("queue", "show", "--name", "nope"), "QueueNotFound"),
    (("queue", "rm", "--name", "nope"), "QueueNotFound"),
    (("stats", "--queue", "nope"), "QueueNotFound"),
    (("dlq", "list", "--queue", "nope"), "QueueNotFound"),
    (("message", "enqueue", "--queue", "nope", "--payload", "1"), "QueueNotFound"),
    (("message", "enqueue", "--queue", "{jobs}", "--payload", "{bad json"), "ValidationError"),
    (("message", "enqueue", "--queue", "{jobs}", "--payload", "1", "--priority", "1001"),
     "ValidationError"),
    (("message", "enqueue", "--queue", "{jobs}", "--envelope", "--payload", '{"payload": 1, '
      '"bogus": 2}'), "ValidationError"),
    (("message", "get", "--queue", "{jobs}", "--batch", "101"), "ValidationError"),
    (("message", "ack", "--queue", "{jobs}", "--ids", f"{NO_ID}:token"), "MessageNotFound"),
    (("message", "extend-lease", "--queue", "{jobs}", "--id", f"{NO_ID}:t", "--ms", "10"),
     "MessageNotFound"),
    (("message", "peek", "--queue", "{jobs}", "--id", NO_ID), "MessageNotFound"),
    (("message", "peek", "--queue", "{jobs}", "--id", "0"), "ValidationError"),
    (("message", "remove", "--queue", "{jobs}", "--id", NO_ID), "MessageNotFound"),
]

USAGE_ERRORS = [
    ("queue", "add"),  # --name missing
    ("queue", "add", "--name", "x", "--max-attempts", "many"),
    ("queue", "frobnicate"),
    ("message", "ack", "--queue", "jobs", "--ids", "5"),
    ("message", "ack", "--queue", "jobs", "--ids", "x:tok"),
    ("message", "nack", "--queue", "jobs", "--ids", "1:"),
    ("message", "extend-lease", "--queue", "jobs", "--id", "7", "--ms", "10"),
    ("message", "enqueue", "--queue", "jobs"),  # neither --payload nor --file
    ("message", "enqueue", "--queue", "jobs", "--payload", "1", "--file", "-"),
    ("message", "enqueue", "--queue", "jobs", "--payload", "1", "--attr", "novalue"),
    ("message", "enqueue", "--queue", "jobs", "--file", "does-not-exist.ndjson"),
    ("message", "enqueue", "--queue", "jobs", "--file", "-", "--idempotency-key", "k"),
    ("message", "enqueue", "--queue", "jobs", "--file", "-", "--envelope", "--priority", "1"),
    ("dlq", "requeue", "--queue", "jobs", "--ids", "1,x"),
    ("--url", "ftp://example.com", "queue", "list"),
]


def test_operation_failures_exit_1_with_one_error_line(with_queue) -> None:
    jobs = with_queue.name("jobs")
    runs = [[a.replace("{jobs}", jobs) for a in args] for args, _ in FAILURES]
    for (_, code), result in zip(FAILURES, with_queue.many(runs), strict=True):
        with_queue.assert_failed(result, code)
    with with_queue.arrange() as client:
        assert client.stats(jobs).enqueued_total == 0


def test_usage_errors_exit_2(local_sqew) -> None:
    # Usage errors are found before any store is opened: --url or --db makes no difference
    # (test_cli_modes checks a few with --url).
    for result in local_sqew.many(USAGE_ERRORS, stdin=""):
        local_sqew.assert_usage_error(result)
    assert not local_sqew.db.exists()


def test_error_line_names_the_queue(sqew) -> None:
    result = sqew.fails("queue", "show", "--name", "missing", code="QueueNotFound")
    assert result.stderr == "error: QueueNotFound: queue 'missing' does not exist\n"
    assert result.stdout == ""


def _not_sqlite(path):
    path.write_bytes(os.urandom(4096))


def _foreign_sqlite(path):
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")


def _newer_schema(path):
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        conn.execute("INSERT INTO alembic_version VALUES ('ffff')")


def _content(path):
    """What a refusal must leave alone: the bytes of a non-database, else the tables' rows."""
    if path.read_bytes()[:16] != b"SQLite format 3\x00":
        return path.read_bytes()
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master ORDER BY name")]
        return {n: conn.execute(f'SELECT * FROM "{n}"').fetchall() for n in names}


@pytest.mark.parametrize("make", [_not_sqlite, _foreign_sqlite, _newer_schema])
def test_unusable_database_files_are_refused(local_sqew, tmp_path, make) -> None:
    sqew = local_sqew
    db = tmp_path / "bad.db"
    make(db)
    before = _content(db)
    for result in sqew.many([("queue", "list"), ("db", "upgrade")], db=db):
        sqew.assert_failed(result, "Unavailable")
        assert "bad.db" in result.stderr
    assert _content(db) == before  # refused, not "repaired"


def test_database_path_that_is_a_directory_or_in_a_missing_directory(local_sqew, tmp_path) -> None:
    sqew = local_sqew
    results = sqew.many([("queue", "list")], db=tmp_path)
    results += sqew.many([("queue", "list")], db=tmp_path / "missing" / "x.db")
    for result in results:
        sqew.assert_failed(result, "Unavailable")
