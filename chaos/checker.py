"""The oracle: reconcile every journal of a run with the database at its end.

Run after every process of the run has stopped and its last lease has ended. The rules (each
broken one is a violation of one column of the summary):

- **lost**: every acknowledged enqueue's message is in its queue, in its DLQ, or in the
  queue's archive; or, on a queue that does not archive, an ack of it succeeded or may have
  (its intent is journalled and no answer refused it). On a queue that archives, every
  successful ack's message is in the archive.
- **acked twice**: no message's ack succeeded twice (``chaos.leases``), and no message whose
  ack succeeded is still in its queue or DLQ.
- **held by two**: ``chaos.leases``' definite lease violations.
- **duplicated**: every acknowledged enqueue of one idempotency key on one queue names the
  same message.
- **reads disagreed**: the payload stored is the payload sent (by digest); sqew's public reads
  (stats, export of each source, peek) agree with the file's rows; each queue's counters
  agree with its rows (``depth`` is its row count; ``enqueued_total`` is ``depth`` plus the
  acked, dead-lettered and expired totals; ``dead_lettered_total`` is its DLQ's row count;
  ``acked_total`` is its archive's row count on a queue that archives, and lies between the
  successful acks the journals show and those plus the acks in doubt).
- **integrity**: ``PRAGMA integrity_check`` says ``ok`` (SQLite); on PostgreSQL, which has no
  such check, ``amcheck``'s ``bt_index_check`` of every index with its table, where the
  extension is available (``chaos.pg``).
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from chaos import leases, store
from chaos.journal import OK, UNKNOWN, Record, of_kind, payload_digest
from chaos.leases import Violation

COLUMNS = ("faults", "operations", "lease_lost", "lost", "acked_twice", "held_by_two",
           "duplicated", "reads_disagreed", "integrity_failures")
VIOLATION_COLUMNS = COLUMNS[3:]
LABELS = {"lease_lost": "settles refused (LeaseLost)"}
"""How a column is named for a reader, where its key does not say it well enough."""
KIND_COLUMN = {"lost": "lost", "acked-twice": "acked_twice", "resurrected": "acked_twice",
               "held-by-two": "held_by_two", "stale-settle": "held_by_two",
               "same-attempt": "held_by_two", "duplicated": "duplicated",
               "disagree": "reads_disagreed", "integrity": "integrity_failures",
               "held-too-long": "held_by_two", "bad-answer": "reads_disagreed",
               "unhealthy": "reads_disagreed"}


@dataclass
class Summary:
    """A run's figures and the violations found."""

    scenario: str
    faults: int = 0
    operations: int = 0
    lease_lost: int = 0
    """Acks, nacks and extends refused with ``LeaseLost``: the lease rules at work (not a
    violation)."""
    violations: list[Violation] = field(default_factory=list)
    integrity_checked: bool = True

    def counts(self) -> dict[str, int]:
        """The summary's columns."""
        out = {c: 0 for c in COLUMNS}
        out["faults"], out["operations"] = self.faults, self.operations
        out["lease_lost"] = self.lease_lost
        for v in self.violations:
            out[KIND_COLUMN[v.kind]] += 1
        return out

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations


def operations(journals: dict[str, list[Record]]) -> int:
    """Operations sqew answered: enqueues, polls that leased, and settles with an answer."""
    return sum(1 for _, r in of_kind(journals, "enqueue", "poll", "ack", "nack", "extend")
               if r.get("outcome", OK) != UNKNOWN)


def lease_lost(journals: dict[str, list[Record]]) -> int:
    """Acks, nacks and extends that sqew refused with ``LeaseLost`` (another consumer had
    leased the message since)."""
    return sum(1 for _, r in of_kind(journals, "ack", "nack", "extend")
               if r.get("outcome") == "LeaseLost")


LeaseCheck = Callable[[dict[str, list[Record]]], list[Violation]]


def check(journals: dict[str, list[Record]], raw: store.Raw, public: store.Public,
          queues: list[str], lease_check: LeaseCheck | None = None) -> list[Violation]:
    """Every violation the journals and the database's two readings show (the lease rules
    by ``lease_check``, default ``leases.check``)."""
    found = list((lease_check or leases.check)(journals))
    found += _presence(journals, raw)
    found += _idempotency(journals)
    found += _reads(journals, raw, public, queues)
    if raw.integrity is not None and raw.integrity != "ok":
        found.append(Violation("integrity", f"integrity_check: {raw.integrity[:500]}"))
    return found


def _settled(journals: dict[str, list[Record]]) -> tuple[set[int], set[int]]:
    """Ids whose ack succeeded, and ids whose ack may have (intent, no refusal seen)."""
    acked, maybe = set(), set()
    refused: set[tuple[int, str]] = set()
    for _, r in of_kind(journals, "ack"):
        if r["outcome"] == OK:
            acked.add(r["id"])
        elif r["outcome"] != UNKNOWN:
            refused.add((r["id"], r["token"]))
    for _, r in of_kind(journals, "ack-intent"):
        if (r["id"], r["token"]) not in refused:
            maybe.add(r["id"])
    return acked, maybe | acked


def _presence(journals: dict[str, list[Record]], raw: store.Raw) -> Iterable[Violation]:
    maybe_acked = _settled(journals)[1]
    for process, r in of_kind(journals, "enqueue"):
        q, i = r["queue"], r["id"]
        row = raw.rows.get(i)
        if row is not None and row.queue not in (q, f"{q}.dlq"):
            yield Violation("disagree", f"message {q}/{i} ({process}) is in {row.queue}")
        archived = i in raw.archive and raw.archive[i].queue == q
        if row is None and not archived and not (not raw.archives[q] and i in maybe_acked):
            yield Violation("lost", f"message {q}/{i} (key {r['key']}, enqueued by "
                                    f"{process} at {r['t1']:.3f}) is nowhere")
        found = row or raw.archive.get(i)
        if found is not None and payload_digest(found.payload) != r["digest"]:
            yield Violation("disagree", f"message {q}/{i}: payload differs from what "
                                        f"{process} sent")
    for process, r in of_kind(journals, "ack"):
        if r["outcome"] != OK:
            continue
        q, i = r["queue"], r["id"]
        if i in raw.rows:
            yield Violation("resurrected", f"message {q}/{i} acked by {process} is in "
                                           f"{raw.rows[i].queue}")
        elif raw.archives[q] and i not in raw.archive:
            yield Violation("lost", f"message {q}/{i} acked by {process} is not archived")


def _idempotency(journals: dict[str, list[Record]]) -> Iterable[Violation]:
    ids: dict[tuple[str, str], set[int]] = defaultdict(set)
    for _, r in of_kind(journals, "enqueue"):
        ids[(r["queue"], r["key"])].add(r["id"])
    for (q, key), named in ids.items():
        if len(named) > 1:
            yield Violation("duplicated", f"key {key} on {q} named messages {sorted(named)}")


def _reads(journals: dict[str, list[Record]], raw: store.Raw, public: store.Public,
           queues: list[str]) -> Iterable[Violation]:
    acked, maybe_acked = _settled(journals)
    queue_of = {r["id"]: r["queue"] for _, r in of_kind(journals, "enqueue", "ack-intent")}
    for q in queues:
        dlq = f"{q}.dlq"
        rows, dead = raw.in_queue(q), raw.in_queue(dlq)
        archived = {i: r for i, r in raw.archive.items() if r.queue == q}
        for source, expected in (("queue", rows), ("dlq", dead), ("archive", archived)):
            got = public.scanned[(q, source)]
            if got != {i: r.payload for i, r in expected.items()}:
                yield Violation("disagree", f"{q}: export of {source} shows "
                                            f"{sorted(set(got) ^ set(expected))[:20]} unlike "
                                            f"the file ({len(got)} vs {len(expected)} messages)")
        stray = set(public.peeked[q]) - set(rows)
        if stray:
            yield Violation("disagree", f"{q}: peek shows {sorted(stray)[:20]}, not in the file")
        yield from _stats(q, raw, public, len(rows), len(dead))
        c = raw.counters[q]
        mine_ok = sum(1 for i in acked if queue_of.get(i) == q)
        mine_maybe = sum(1 for i in maybe_acked if queue_of.get(i) == q)
        expected_counts = {
            f"{q} depth = rows": (c["depth"], len(rows)),
            f"{dlq} depth = rows": (raw.counters[dlq]["depth"], len(dead)),
            f"{q} enqueued_total = depth + acked + dead-lettered + expired": (
                c["enqueued_total"], c["depth"] + c["acked_total"] + c["dead_lettered_total"]
                + c["expired_total"]),
            f"{q} dead_lettered_total = {dlq} rows": (c["dead_lettered_total"], len(dead)),
        }
        if raw.archives[q]:
            expected_counts[f"{q} acked_total = archive rows"] = (c["acked_total"],
                                                                  len(archived))
        for what, (have, want) in expected_counts.items():
            if have != want:
                yield Violation("disagree", f"{what}: {have} != {want}")
        if not mine_ok <= c["acked_total"] <= mine_maybe:
            yield Violation("disagree", f"{q} acked_total {c['acked_total']} outside "
                                        f"[{mine_ok}, {mine_maybe}] (the journals' acks)")


def _stats(q: str, raw: store.Raw, public: store.Public, rows: int,
           dead: int) -> Iterable[Violation]:
    s, d = public.stats[q], public.stats[f"{q}.dlq"]
    ending = raw.ending(q)
    leased = raw.leased_now(q)
    checks = {
        f"{q} stats ready+delayed+leased = rows - ending": (s.ready + s.delayed + s.leased,
                                                            rows - ending),
        f"{q} stats leased = live leases": (s.leased, leased),
        f"{q} stats dlq = {q}.dlq rows + ending": (s.dlq, dead + ending),
        f"{q}.dlq stats ready+delayed+leased = rows + ending": (
            d.ready + d.delayed + d.leased, dead + ending),
    }
    for what, (have, want) in checks.items():
        if have != want:
            yield Violation("disagree", f"{what}: {have} != {want}")


def summarize(scenario: str, faults: int, journals: dict[str, list[Record]],
              db: str | Path, queues: list[str], lease_check: LeaseCheck | None = None
              ) -> Summary:
    """Read the database (public reads, then raw) and check it against ``journals``."""
    public = store.read_public(db, queues)
    raw = store.read_raw(db)
    return Summary(scenario, faults, operations(journals), lease_lost(journals),
                   check(journals, raw, public, queues, lease_check),
                   raw.integrity is not None)


def is_corrupt(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is SQLite's ``SQLITE_CORRUPT`` or
    ``SQLITE_NOTADB``: the file cannot be read back at all."""
    seen: BaseException | None = exc
    while seen is not None:
        code = getattr(seen, "sqlite_errorcode", None)
        if isinstance(seen, sqlite3.Error) and isinstance(code, int) and code & 0xFF in (
                sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def unreadable(scenario: str, faults: int, journals: dict[str, list[Record]],
               exc: BaseException) -> Summary:
    """The verdict on a database file too corrupt to be read back: one integrity violation
    (no other rule can be checked against it)."""
    return Summary(scenario, faults, operations(journals), lease_lost(journals),
                   [Violation("integrity", f"the file cannot be read: {exc}")])
