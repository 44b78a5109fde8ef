"""The oracle's reconciliation (``chaos.checker``) and the journals' reader on hand-written
input: a lost message, a duplicated key, a changed payload, counters off by one are each
found; an absence the journals explain is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos import checker, journal, store
from chaos.journal import Record, payload_digest
from sqew import models

PAYLOAD = {"key": "p-0", "body": ""}


def enqueue(queue: str, msg: int, key: str = "p-0", payload: Any = PAYLOAD) -> Record:
    return {"op": "enqueue", "queue": queue, "key": key, "id": msg, "duplicate": False,
            "digest": payload_digest(payload), "t0": 1.0, "t1": 1.01}


def acked(queue: str, msg: int, outcome: str = "ok") -> list[Record]:
    base = {"queue": queue, "id": msg, "token": "t"}
    return [{"op": "ack-intent", **base, "t0": 2.0},
            *([] if outcome == "cut" else
              [{"op": "ack", **base, "t0": 2.0, "t1": 2.01, "outcome": outcome}])]


def raw(rows: dict[int, str] | None = None, archived: dict[int, str] | None = None,
        acked: str | None = None) -> store.Raw:
    """A database with queues ``jobs`` (archives) and ``plain``, with consistent counters;
    one ack counted on the queue ``acked``."""
    out = store.Raw(now_ms=10_000, integrity="ok")
    for q, archives in (("jobs", True), ("plain", False)):
        for name in (q, f"{q}.dlq"):
            out.archives[name], out.max_attempts[name] = archives, 3
    for i, q in (rows or {}).items():
        out.rows[i] = store.Row(i, q, PAYLOAD, 1, None, None, "ready")
    for i, q in (archived or {}).items():
        out.archive[i] = store.Row(i, q, PAYLOAD, 1, None, None, "archived")
    for name in out.archives:
        depth = sum(1 for r in out.rows.values() if r.queue == name)
        dead = sum(1 for r in out.rows.values() if r.queue == f"{name}.dlq")
        total = 1 if name == acked else 0
        out.counters[name] = {"depth": depth, "enqueued_total": depth + total + dead,
                              "acked_total": total, "nacked_total": 0,
                              "dead_lettered_total": dead, "expired_total": 0}
    return out


def public(r: store.Raw) -> store.Public:
    """What sqew's reads would say of ``r`` (they agree with it)."""
    out = store.Public()
    for q in ("jobs", "plain"):
        for name in (q, f"{q}.dlq"):
            n = sum(1 for row in r.rows.values() if row.queue == name)
            c = r.counters[name]
            dead = sum(1 for row in r.rows.values() if row.queue == f"{name}.dlq")
            out.stats[name] = models.Stats(
                queue=name, ready=n, delayed=0, leased=0, dlq=dead, oldest_ready_age_ms=None,
                enqueued_total=c["enqueued_total"], acked_total=c["acked_total"],
                nacked_total=0, dead_lettered_total=c["dead_lettered_total"],
                expired_total=0)
        out.scanned[(q, "queue")] = {i: x.payload for i, x in r.rows.items() if x.queue == q}
        out.scanned[(q, "dlq")] = {i: x.payload for i, x in r.rows.items()
                                    if x.queue == f"{q}.dlq"}
        out.scanned[(q, "archive")] = {i: x.payload for i, x in r.archive.items()
                                       if x.queue == q}
        out.peeked[q] = []
    return out


def kinds(journals: dict[str, list[Record]], r: store.Raw, p: store.Public | None = None
          ) -> list[str]:
    found = checker.check(journals, r, p or public(r), ["jobs", "plain"])
    return sorted(v.kind for v in found)


def test_a_message_in_its_queue_or_its_archive_is_accounted_for() -> None:
    assert kinds({"p": [enqueue("jobs", 1)]}, raw(rows={1: "jobs"})) == []
    assert kinds({"p": [enqueue("jobs", 1)], "c": acked("jobs", 1)},
                 raw(archived={1: "jobs"}, acked="jobs")) == []
    assert kinds({"p": [enqueue("plain", 1)]}, raw(rows={1: "plain.dlq"})) == []


def test_a_message_nowhere_is_lost_unless_an_ack_of_it_may_have_removed_it() -> None:
    assert kinds({"p": [enqueue("plain", 1)]}, raw()) == ["lost"]
    assert kinds({"p": [enqueue("plain", 1)], "c": acked("plain", 1)}, raw(acked="plain")) == []
    # The consumer was killed during its ack: it may have happened.
    assert kinds({"p": [enqueue("plain", 1)], "c": acked("plain", 1, "cut")},
                 raw(acked="plain")) == []
    assert kinds({"p": [enqueue("plain", 1)], "c": acked("plain", 1, "LeaseLost")},
                 raw()) == ["lost"]


def test_on_a_queue_that_archives_an_ack_must_leave_the_message_in_the_archive() -> None:
    assert kinds({"p": [enqueue("jobs", 1)], "c": acked("jobs", 1)},
                 raw(acked="jobs")) == ["disagree", "lost", "lost"]


def test_an_acked_message_still_in_its_queue_is_reported() -> None:
    assert kinds({"p": [enqueue("plain", 1)], "c": acked("plain", 1)},
                 raw(rows={1: "plain"}, acked="plain")) == ["resurrected"]


def test_one_key_naming_two_messages_is_a_duplicate() -> None:
    journals = {"p": [enqueue("jobs", 1)], "q": [enqueue("jobs", 2)]}
    assert kinds(journals, raw(rows={1: "jobs", 2: "jobs"})) == ["duplicated"]


def test_a_payload_other_than_the_one_sent_disagrees() -> None:
    assert kinds({"p": [enqueue("jobs", 1, payload={"other": 1})]},
                 raw(rows={1: "jobs"})) == ["disagree"]


def test_counters_and_reads_that_differ_from_the_rows_disagree() -> None:
    r = raw(rows={1: "jobs"})
    r.counters["jobs"]["depth"] = 2
    assert "disagree" in kinds({"p": [enqueue("jobs", 1)]}, r)
    r = raw(rows={1: "jobs"})
    p = public(r)
    p.scanned[("jobs", "queue")] = {}
    assert kinds({"p": [enqueue("jobs", 1)]}, r, p) == ["disagree"]


def test_a_damaged_file_is_an_integrity_failure() -> None:
    r = raw()
    r.integrity = "*** in database main ***\nPage 5 is never used"
    assert kinds({}, r) == ["integrity"]


def test_a_journal_cut_short_by_a_kill_loses_only_its_half_line(tmp_path: Path) -> None:
    path = tmp_path / "p.1.ndjson"
    with journal.Journal(path) as j:
        j.write(enqueue("jobs", 1))
    with path.open("a") as f:
        f.write('{"op":"enq')
    assert journal.read(path) == [enqueue("jobs", 1)]
    path.write_text('{"op":\n' + path.read_text())
    try:
        journal.read(path)
    except ValueError as exc:
        assert "damaged journal line" in str(exc)
    else:
        raise AssertionError("a damaged line inside a journal was read")


def test_a_database_without_an_integrity_check_is_not_reported() -> None:
    r = raw()
    r.integrity = None  # PostgreSQL without amcheck: not checked
    assert kinds({}, r) == []


def test_settles_refused_with_lease_lost_are_counted_not_reported() -> None:
    journals = {"p": [enqueue("jobs", 1)], "c": acked("jobs", 1, "LeaseLost")}
    assert checker.lease_lost(journals) == 1
    assert kinds(journals, raw(rows={1: "jobs"})) == []


def test_a_file_too_corrupt_to_read_back_is_an_integrity_violation(tmp_path: Path) -> None:
    """A run whose fault left a file SQLite cannot read is the oracle's verdict (an integrity
    failure), not a crash of the harness."""
    from chaos.run import Run, check

    run = Run(tmp_path / "run", 1.0, seed=1)
    (run.directory / "journals").mkdir()
    run.db.write_bytes(b"this is not a SQLite database, whatever its name says" * 100)
    summary = check(run, "corrupt")
    assert not summary.ok
    assert [v.kind for v in summary.violations] == ["integrity"], summary.violations
    assert summary.counts()["integrity_failures"] == 1
