"""Every CLI command's happy path through the installed binary: exact ``--json`` shapes (the
REST API's, docs/rest.md) and sane human output."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from sqew import migrate

QUEUE_KEYS = {
    "name", "dlq", "visibility_ms", "max_attempts", "backoff_base_ms", "backoff_max_ms",
    "retention_ms", "dedup_window_ms", "max_payload_bytes", "max_depth", "rate_limit_per_s",
    "order", "archive", "created_at", "paused",
}
STATS_KEYS = {
    "queue", "ready", "delayed", "leased", "dlq", "oldest_ready_age_ms", "enqueued_total",
    "acked_total", "nacked_total", "dead_lettered_total", "expired_total", "paused",
}
MESSAGE_KEYS = {
    "id", "queue", "payload", "priority", "attributes", "attempts", "enqueued_at",
    "available_at", "expires_at", "last_error",
}
LEASED_KEYS = MESSAGE_KEYS | {"token", "lease_expires_at", "first_leased_at"}


def test_queue_commands_json(sqew) -> None:
    jobs = sqew.name("jobs")
    created = sqew.json(
        "queue", "add", "--name", jobs, "--visibility-ms", "1000", "--max-attempts", "2",
        "--backoff-base-ms", "10", "--backoff-max-ms", "100", "--retention-ms", "60000",
        "--dedup-window-ms", "1000", "--max-payload-bytes", "1000", "--max-depth", "50",
        "--rate-limit-per-s", "2.5", "--order", "lifo", "--archive",
        "--hmac-secret", "0123456789abcdef-secret",
    )
    assert set(created) == QUEUE_KEYS  # hmac_secret is write-only; no stats on create
    assert {k: created[k] for k in QUEUE_KEYS - {"created_at"}} == {
        "name": jobs, "dlq": f"{jobs}.dlq", "visibility_ms": 1000, "max_attempts": 2,
        "backoff_base_ms": 10, "backoff_max_ms": 100, "retention_ms": 60000,
        "dedup_window_ms": 1000, "max_payload_bytes": 1000, "max_depth": 50,
        "rate_limit_per_s": 2.5, "order": "lifo", "archive": True, "paused": False,
    }

    listed = sqew.json("queue", "list")
    assert list(listed) == ["queues"]
    mine = sqew.own(listed["queues"])
    assert [q["name"] for q in mine] == [jobs, f"{jobs}.dlq"]
    assert all(set(q) == QUEUE_KEYS for q in listed["queues"])
    assert mine[1]["dlq"] is None

    updated = sqew.json("queue", "update", "--name", jobs, "--max-attempts", "7",
                        "--no-archive", "--order", "fifo")
    assert set(updated) == QUEUE_KEYS
    assert (updated["max_attempts"], updated["archive"], updated["order"]) == (7, False, "fifo")
    assert updated["visibility_ms"] == 1000  # unchanged

    results = sqew.many([
        ("--json", "queue", "show", "--name", jobs),
        ("--json", "queue", "peek", "--name", jobs, "--limit", "5"),
        ("--json", "queue", "purge", "--name", jobs),
        ("--json", "queue", "requeue-dlq", "--name", jobs),
        ("--json", "queue", "compact", "--name", jobs),
    ])
    assert all(r.returncode == 0 and r.stderr == "" for r in results), results
    shown, peeked, purged, requeued, compacted = (r.json() for r in results)
    assert set(shown) == QUEUE_KEYS | {"stats"}
    assert set(shown["stats"]) == STATS_KEYS
    assert shown["stats"]["queue"] == jobs
    assert peeked == {"messages": []}
    assert purged == {"purged": 0}
    assert requeued == {"requeued": 0, "left": 0}
    assert compacted == {"removed": 0}

    removed = sqew.ok("--json", "queue", "rm", "--name", jobs)
    assert removed.stdout == ""  # REST answers 204 No Content
    assert sqew.own(sqew.json("queue", "list")["queues"]) == []


def test_queue_pause_and_resume(sqew) -> None:
    q = sqew.name("q")
    sqew.ok("queue", "add", "--name", q)
    paused = sqew.json("queue", "pause", "--name", q)
    assert set(paused) == QUEUE_KEYS
    assert (paused["name"], paused["paused"]) == (q, True)
    sqew.ok("message", "enqueue", "--queue", q, "--payload", '"held"')
    # (A paused queue's long poll waits out its whole wait: this one waits none.)
    assert sqew.json("message", "poll", "--queue", q, "--wait-ms", "0") == {"messages": []}
    shown = sqew.json("queue", "show", "--name", q)
    assert (shown["paused"], shown["stats"]["paused"], shown["stats"]["ready"]) == (True, True, 1)
    assert "paused" in sqew.ok("queue", "show", "--name", q).stdout
    resumed = sqew.ok("queue", "resume", "--name", q)
    assert resumed.stdout.strip() == f"resumed {q}"
    assert [m["payload"] for m in sqew.json("message", "poll", "--queue", q)["messages"]] == [
        "held"]
    missing = sqew.run("queue", "pause", "--name", sqew.name("missing"))
    assert missing.returncode != 0
    assert missing.stderr.startswith("error: QueueNotFound: ")


def _ok_json(results) -> list:
    assert all(r.returncode == 0 and r.stderr == "" for r in results), [str(r) for r in results]
    return [r.json() for r in results]


def test_message_commands_json(sqew) -> None:
    q = sqew.name("q")
    sqew.arrange(q, max_attempts=2).close()
    one_id, two_id = sqew.id(1), sqew.id(2)
    first = sqew.json("message", "enqueue", "--queue", q, "--payload", '{"order": 42}',
                      "--priority", "5", "--attr", "src=web", "--attr", "k=v=w",
                      "--idempotency-key", "order-42")
    assert first == {"message_id": one_id, "duplicate": False}
    again, second = _ok_json(sqew.many([
        ("--json", "message", "enqueue", "--queue", q, "--payload", '{"order": 42}',
         "--idempotency-key", "order-42"),
        ("--json", "message", "enqueue", "--queue", q, "--payload", '"two"',
         "--ttl-ms", "60000", "--delay-ms", "0"),
    ]))
    assert again == {"message_id": one_id, "duplicate": True}
    assert second == {"message_id": two_id, "duplicate": False}

    one, stats = _ok_json(sqew.many([
        ("--json", "message", "peek", "--queue", q, "--id", str(one_id)),
        ("--json", "stats", "--queue", q),
    ]))
    assert set(one) == MESSAGE_KEYS
    assert (one["id"], one["queue"], one["payload"], one["priority"], one["attempts"]) == (
        one_id, q, {"order": 42}, 5, 0)
    assert one["attributes"] == {"src": "web", "k": "v=w"}
    assert set(stats) == STATS_KEYS
    assert (stats["ready"], stats["enqueued_total"]) == (2, 2)

    leased = sqew.json("message", "get", "--queue", q, "--batch", "5")
    assert list(leased) == ["messages"]
    assert [set(m) for m in leased["messages"]] == [LEASED_KEYS, LEASED_KEYS]
    assert [m["id"] for m in leased["messages"]] == [one_id, two_id]  # higher priority first
    h1, h2 = sqew.handles(leased)

    extended, nacked = _ok_json(sqew.many([
        ("--json", "message", "extend-lease", "--queue", q, "--id", h1, "--ms", "60000"),
        ("--json", "message", "nack", "--queue", q, "--ids", h2, "--delay-ms", "0",
         "--error", "boom"),
    ]))
    assert set(extended) == {"id", "lease_expires_at"} and extended["id"] == one_id
    assert nacked == {"results": [{"id": two_id, "status": "requeued"}]}

    acked, polled = _ok_json(sqew.many([
        ("--json", "message", "ack", "--queue", q, "--ids", h1),
        ("--json", "message", "poll", "--queue", q, "--wait-ms", "1000",
         "--visibility-ms", "60000"),
    ]))
    assert acked == {"results": [{"id": one_id, "status": "acked"}]}
    assert [(m["id"], m["attempts"], m["last_error"]) for m in polled["messages"]] == [
        (two_id, 2, "boom")]
    assert sqew.json("message", "nack", "--queue", q, "--ids", sqew.handles(polled)[0],
                     "--error", "again") == {"results": [{"id": two_id, "status": "dead_lettered"}]}

    dlq, after = _ok_json(sqew.many([
        ("--json", "dlq", "list", "--queue", q),
        ("--json", "dlq", "list", "--queue", q, "--after-id", str(two_id), "--limit", "10"),
    ]))
    assert list(dlq) == ["messages"]
    assert [(m["id"], m["queue"], m["last_error"]) for m in dlq["messages"]] == [
        (two_id, f"{q}.dlq", "again")]
    assert set(dlq["messages"][0]) == MESSAGE_KEYS | {"origin_queue"}  # a DLQ's (docs/rest.md)
    assert dlq["messages"][0]["origin_queue"] == q
    assert after == {"messages": []}
    assert sqew.json("dlq", "requeue", "--queue", q, "--ids", str(two_id)) == {
        "requeued": 1, "left": 0}

    peeked = sqew.json("queue", "peek", "--name", q)
    assert [(m["id"], m["attempts"]) for m in peeked["messages"]] == [(two_id, 0)]
    removed, purged = sqew.many([("--json", "message", "remove", "--queue", q, "--id", str(two_id)),
                                 ("--json", "dlq", "purge", "--queue", q)])
    assert (removed.returncode, removed.stdout, removed.stderr) == (0, "", "")
    assert purged.json() == {"purged": 0}
    assert sqew.json("message", "get", "--queue", q) == {"messages": []}


def test_ack_and_nack_of_several_report_each_and_fail_if_any_failed(sqew) -> None:
    q = sqew.name("q")
    with sqew.arrange(q) as client:
        client.enqueue_batch(q, [{"payload": n} for n in range(3)])
    id1, id2, id3 = sqew.id(1), sqew.id(2), sqew.id(3)
    h1, h2, h3 = sqew.handles(sqew.json("message", "get", "--queue", q, "--batch", "3"))

    both = sqew.json("message", "ack", "--queue", q, "--ids", f"{h1},{h2}")
    assert both == {"results": [{"id": id1, "status": "acked"}, {"id": id2, "status": "acked"}]}

    stale = h3.split(":")[0] + ":not-the-token"
    partial = sqew.run("--json", "message", "nack", "--queue", q, "--ids", f"{h3},{stale},{h1}")
    sqew.assert_failed(partial, "LeaseLost")
    assert partial.json() == {"results": [
        {"id": id3, "status": "requeued"}, {"id": id3, "status": "lease_lost"},
        {"id": id1, "status": "not_found"},
    ]}
    human, single_ack, single_nack = sqew.many([
        ("message", "ack", "--queue", q, "--ids", f"{h1},{h2}"),
        ("message", "ack", "--queue", q, "--ids", h1),
        ("message", "nack", "--queue", q, "--ids", stale),
    ])
    sqew.assert_failed(human, "MessageNotFound")
    assert human.stdout.split() == [str(id1), "not_found", str(id2), "not_found"]
    sqew.assert_failed(single_ack, "MessageNotFound")
    sqew.assert_failed(single_nack, "LeaseLost")
    assert single_ack.stdout == single_nack.stdout == ""


def test_extend_lease_of_several_reports_each_and_fails_if_any_failed(sqew) -> None:
    q = sqew.name("q")
    with sqew.arrange(q) as client:
        client.enqueue_batch(q, [{"payload": n} for n in range(2)])
    id1, id2 = sqew.id(1), sqew.id(2)
    h1, h2 = sqew.handles(sqew.json("message", "get", "--queue", q, "--batch", "2"))

    both = sqew.json("message", "extend-lease", "--queue", q, "--ids", f"{h1},{h2}",
                     "--ms", "60000")
    assert [(r["id"], r["status"]) for r in both["results"]] == [
        (id1, "extended"), (id2, "extended")]
    assert [set(r) for r in both["results"]] == [{"id", "status", "lease_expires_at"}] * 2

    stale = f"{id2}:not-the-token"
    partial, human = sqew.many([
        ("--json", "message", "extend-lease", "--queue", q, "--ids", f"{h1},{stale}",
         "--ms", "60000"),
        ("message", "extend-lease", "--queue", q, "--ids", f"{h2},{stale}", "--ms", "0"),
    ])
    sqew.assert_failed(partial, "LeaseLost")
    results = partial.json()["results"]
    assert results[1] == {"id": id2, "status": "lease_lost"}
    assert (results[0]["id"], results[0]["status"]) == (id1, "extended")
    sqew.assert_failed(human, "LeaseLost")
    assert human.stdout.split() == [str(id2), "extended", str(id2), "lease_lost"]
    # --id (one lease) or --ids (several): one of them, never both or neither.
    sqew.usage_error("message", "extend-lease", "--queue", q, "--id", h1, "--ids", h1,
                     "--ms", "1")
    sqew.usage_error("message", "extend-lease", "--queue", q, "--ms", "1")


def test_human_output(sqew) -> None:
    jobs, other = sqew.name("jobs"), sqew.name("other")
    with sqew.arrange(jobs) as client:
        client.enqueue(jobs, {"order": 42})
    results = sqew.many([
        ("queue", "add", "--name", other, "--max-attempts", "3"),
        ("message", "enqueue", "--queue", jobs, "--payload", '"second"'),
        ("queue", "list"), ("queue", "peek", "--name", jobs), ("stats", "--queue", jobs),
        ("queue", "show", "--name", jobs), ("dlq", "list", "--queue", jobs),
        ("dlq", "purge", "--queue", jobs),
    ])
    for result in results:
        assert result.returncode == 0 and result.stderr == "", str(result)
    added, enqueued, listing, peeked, stats, shown, empty_dlq, purged_dlq = (
        r.stdout for r in results)
    assert f"{other}.dlq" in added and "max_attempts" in added and "3" in added
    assert enqueued == f"enqueued message {sqew.id(2)}\n"
    assert f"{jobs}.dlq" in listing and "fifo" in listing
    assert '{"order":42}' in peeked
    assert "ready" in stats and "enqueued_total" in stats
    assert "stats" in shown and "retention_ms" in shown
    assert "empty" in empty_dlq
    assert purged_dlq == f"purged 0 messages from {jobs}.dlq\n"

    got = sqew.ok("message", "get", "--queue", jobs)
    handle = got.stdout.split("\n")[2].split()[0]  # header, rule, first row
    assert handle.startswith(f"{sqew.id(1)}:")
    acked, removed = sqew.many([("message", "ack", "--queue", jobs, "--ids", handle),
                                ("queue", "rm", "--name", other)])
    assert acked.stdout == f"{sqew.id(1)} acked\n"
    assert removed.stdout == f"removed queue {other} and {other}.dlq\n"


def test_global_options_anywhere_from_the_environment_and_by_default(local_sqew, tmp_path) -> None:
    sqew = local_sqew
    other = tmp_path / "other.db"
    sqew.ok("queue", "add", "--name", "a", "--db", str(other), use_db=False)
    after, from_env, payload = sqew.many([
        ("queue", "list", "--json", "--db", str(other)),
        ("queue", "list"),
        # an option's value that looks like a global option stays the option's value
        ("message", "enqueue", "--queue", "a", "--payload", "--json", "--db", str(other)),
    ], use_db=False, env={"SQEW_DB": str(other), "SQEW_JSON": "1"})
    for result in (after, from_env):
        assert result.returncode == 0, str(result)
        assert [q["name"] for q in result.json()["queues"]] == ["a", "a.dlq"]
    sqew.assert_failed(payload, "ValidationError")
    assert not (tmp_path / "sqew.db").exists() and not sqew.db.exists()

    sqew.ok("queue", "add", "--name", "here", use_db=False)  # default: ./sqew.db
    assert (tmp_path / "sqew.db").is_file()


def test_db_upgrade_and_version(local_sqew) -> None:
    sqew = local_sqew
    head = migrate.head()
    assert sqew.json("db", "upgrade") == {"revision": head}
    assert f"revision {head}" in sqew.ok("db", "upgrade").stdout
    with sqlite3.connect(sqew.db) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
    version = sqew.ok("--version", use_db=False).stdout
    assert version.startswith("sqew ") and version.strip() != "sqew"


def test_python_dash_m_runs_the_same_cli() -> None:
    proc = subprocess.run([sys.executable, "-m", "sqew", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("sqew "), proc
