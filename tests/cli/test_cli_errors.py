"""Failures through the installed binary: exit 1 with one ``error: <Code>: <message>`` line,
exit 2 for usage errors, never a traceback, and unusable databases refused cleanly."""

from __future__ import annotations

import json
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
    ("--url", "http://[::1", "queue", "list"),  # was InternalError: Invalid IPv6 URL (exit 1)
    ("--url", "http://127.0.0.1:99999", "queue", "list"),  # a port beyond 65535
]

# Malformed --ids, each a usage error before anything is opened or sent (one line, exit 2).
BAD_IDS = [
    (("message", "ack", "--queue", "jobs", "--ids", "1:a,,2:b"), "item 2 of '1:a,,2:b' is empty"),
    (("message", "ack", "--queue", "jobs", "--ids", "1:a,"), "item 2 of '1:a,' is empty"),
    (("message", "ack", "--queue", "jobs", "--ids", ","), "got nothing"),
    (("message", "ack", "--queue", "jobs", "--ids", "0:abc"), "ids start at 1"),
    (("message", "ack", "--queue", "jobs", "--ids", "-1:abc"), "ids start at 1"),
    (("message", "nack", "--queue", "jobs", "--ids", "3:a,4:b,3:a"), "3:a is given more"),
    (("message", "extend-lease", "--queue", "jobs", "--id", "0:abc", "--ms", "1"),
     "ids start at 1"),
    (("dlq", "requeue", "--queue", "jobs", "--ids", "1,,2"), "item 2 of '1,,2' is empty"),
    (("dlq", "requeue", "--queue", "jobs", "--ids", "1,"), "item 2 of '1,' is empty"),
    (("dlq", "requeue", "--queue", "jobs", "--ids", "0"), "got '0'"),
    (("dlq", "requeue", "--queue", "jobs", "--ids", "5,6,5"), "message 5 is given more"),
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


def test_malformed_ids_are_usage_errors_that_say_what_is_wrong(local_sqew) -> None:
    with local_sqew.arrange("jobs") as client:
        client.enqueue("jobs", 1)
        (m,) = client.poll("jobs", visibility_ms=3_600_000)  # outlives slow runs
    runs = [args for args, _ in BAD_IDS]
    for (_, words), result in zip(BAD_IDS, local_sqew.many(runs), strict=True):
        local_sqew.assert_usage_error(result)
        assert words in " ".join(result.stderr.replace("│", " ").split()), str(result)
    with local_sqew.arrange() as client:  # nothing was settled: the lease is still held
        assert client.stats("jobs").leased == 1
        assert client.ack("jobs", m.id, m.token).status == "acked"


def test_an_in_memory_database_is_refused_and_nothing_is_created(local_sqew, tmp_path) -> None:
    # It would vanish when the command ends; SQLite would make a file named ':memory:' instead.
    runs = [("--db", ":memory:", "queue", "list"), ("--db", "sqlite:///:memory:", "health"),
            ("queue", "add", "--name", "jobs", "--db", ":memory:"),
            ("serve", "--db", ":memory:", "--port", "0")]
    results = local_sqew.many(runs, use_db=False)
    results.append(local_sqew.run("queue", "list", use_db=False, env={"SQEW_DB": ":memory:"}))
    for result in results:
        local_sqew.assert_usage_error(result)
        assert "in-memory database" in result.stderr, str(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_health_of_a_database_file_that_does_not_exist_fails_and_creates_nothing(
    local_sqew, tmp_path
) -> None:
    for db in ("typo.db", "sqlite:///typo.db", str(tmp_path / "typo.db")):
        result = local_sqew.fails("health", db=db, code="Unavailable")
        assert "typo.db" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    local_sqew.fails("queue", "list", db="fresh.db", code="Unavailable")  # nor do reads
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    local_sqew.ok("db", "upgrade", db="fresh.db")  # the commands that make something do
    assert local_sqew.ok("health", db="fresh.db").stdout == "ok\n"


def test_validation_errors_are_worded_alike_locally_and_through_a_server(
    local_sqew, http_sqew
) -> None:
    """The service's range wording, never msgspec's (``Expected `int` <= 1000 - at ...``)."""
    for sqew in (local_sqew, http_sqew):
        jobs = sqew.name("jobs")
        sqew.arrange(jobs).close()
        cases = [
            (("message", "enqueue", "--queue", jobs, "--payload", "1", "--priority", "1001"),
             "priority must be an integer between -1000 and 1000"),
            (("message", "enqueue", "--queue", jobs, "--envelope", "--payload",
              '{"payload": 1, "priority": "high"}'),
             "priority must be an integer between -1000 and 1000 (got a string)"),
            (("message", "enqueue", "--queue", jobs, "--payload", "1", "--attr", "k=" + "v" * 1025),
             "values of attributes must be a string of at most 1024 characters"),
            (("queue", "add", "--name", sqew.name("x"), "--visibility-ms", "43200001"),
             "visibility_ms must be an integer between 0 and 43200000"),
            (("queue", "add", "--name", sqew.name("x"), "--order", "sideways"),
             "order must be one of fifo, lifo"),
            (("queue", "add", "--name", "bad.name"),
             "name must be a string of 1-80 letters, digits, '_' or '-', starting with a letter "
             "or digit (it may end in '.fifo')"),
            (("queue", "add", "--name", sqew.name("x"), "--rate-limit-per-s", "1e-300"),
             "rate_limit_per_s must be 0 (off) or at least 0.00001"),
            (("message", "get", "--queue", jobs, "--batch", "101"),
             "batch must be an integer between 1 and 100"),
        ]
        for (_, words), result in zip(cases, sqew.many([a for a, _ in cases]), strict=True):
            sqew.assert_failed(result, "ValidationError")
            assert result.stderr == f"error: ValidationError: {words}\n", str(result)


def test_error_line_names_the_queue(sqew) -> None:
    sqew.arrange().close()  # the database exists (its absence is another error)
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


@pytest.mark.parametrize("option", ["--api-key", "--db", "--url", "--hmac-secret", "--ca-cert"])
def test_a_global_option_given_last_without_a_value_says_so(local_sqew, option: str) -> None:
    # Before: hoisted in front of the command, it took the command's name as its value
    # (`sqew keys list --api-key` -> `--api-key keys list`): "No such command 'list'".
    result = local_sqew.run("keys", "list", option, use_db=False)
    local_sqew.assert_usage_error(result)
    assert f"Option '{option}' requires an argument" in result.stderr, str(result)


def test_every_bad_setting_is_reported_at_once(sqew) -> None:
    sqew.arrange().close()
    result = sqew.fails("queue", "add", "--name", sqew.name("z"), "--max-attempts", "0",
                        "--retention-ms", "5", code="ValidationError")
    assert result.stderr == (
        "error: ValidationError: max_attempts must be an integer between 1 and 1000; "
        "retention_ms must be an integer between 60000 and 1209600000\n")


def test_with_json_an_error_is_the_rest_apis_envelope_on_stderr(sqew) -> None:
    sqew.arrange().close()
    result = sqew.run("--json", "queue", "show", "--name", "missing")
    assert (result.returncode, result.stdout) == (1, ""), str(result)
    assert json.loads(result.stderr) == {
        "error": {"code": "QueueNotFound", "message": "queue 'missing' does not exist"}}
    bad = sqew.run("--json", "queue", "add", "--name", sqew.name("z"), "--max-attempts", "0",
                   "--retention-ms", "5")
    body = json.loads(bad.stderr)["error"]
    assert body["code"] == "ValidationError"
    assert [d["field"] for d in body["details"]] == ["max_attempts", "retention_ms"]


def test_a_usage_error_is_one_line(local_sqew) -> None:
    result = local_sqew.run("queue", "add")
    assert result.returncode == 2
    assert result.stderr == (
        "error: usage: Missing option '--name' / '-n'. (see `sqew queue add --help`)\n")
