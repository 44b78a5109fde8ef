"""What the database holds at the end of a run, read two ways: the database itself (the file
with ``sqlite3``, read-only; PostgreSQL with psycopg, ``chaos.pg``) and sqew's public reads
(``Client.stats``, ``scan``/``export``, ``peek``).

Taken after every process of the run has stopped and the file was reopened by sqew (which
recovers what a killed process left), so nothing changes it while it is read, except time:
a lease may expire between two reads, which the checks allow for.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqew
from sqew import models

COUNTERS = ("depth", "enqueued_total", "acked_total", "nacked_total", "dead_lettered_total",
            "expired_total")


@dataclass(frozen=True)
class Row:
    """A message row (or an archived one: ``state`` ``archived``)."""

    id: int
    queue: str
    payload: Any
    attempts: int
    leased_until: int | None
    origin_queue: str | None
    state: str


@dataclass
class Raw:
    """The file's contents, read in one read transaction at ``now_ms``."""

    now_ms: int
    rows: dict[int, Row] = field(default_factory=dict)
    archive: dict[int, Row] = field(default_factory=dict)
    counters: dict[str, dict[str, int]] = field(default_factory=dict)
    archives: dict[str, bool] = field(default_factory=dict)
    max_attempts: dict[str, int] = field(default_factory=dict)
    integrity: str | None = ""
    """``PRAGMA integrity_check``'s answer (``ok``), or on PostgreSQL ``amcheck``'s: ``ok``,
    or None where the extension is not installed (not checked)."""

    def in_queue(self, queue: str) -> dict[int, Row]:
        """The rows of one queue (a DLQ is a queue)."""
        return {i: r for i, r in self.rows.items() if r.queue == queue}

    def ending(self, queue: str) -> int:
        """Rows of ``queue`` whose last allowed lease has ended (bound for the DLQ)."""
        return sum(1 for r in self.rows.values()
                   if r.queue == queue and r.leased_until is not None
                   and r.leased_until <= self.now_ms and r.attempts >= self.max_attempts[queue])

    def leased_now(self, queue: str) -> int:
        """Rows of ``queue`` with a live lease when the file was read."""
        return sum(1 for r in self.rows.values() if r.queue == queue and r.state == "leased")

    def last_lease_ms(self) -> int:
        """When the last lease of any row ends (0: none)."""
        return max((r.leased_until or 0 for r in self.rows.values()), default=0)


QUEUES_SQL = f"SELECT id, name, archive, max_attempts, {', '.join(COUNTERS)} FROM queues"
MESSAGES_SQL = ("SELECT id, queue_id, payload, attempts, lease_expires_at, origin_queue, "
                "available_at FROM messages")
ARCHIVE_SQL = "SELECT id, queue_id, payload, attempts FROM archive"


def read_raw(target: str | Path) -> Raw:
    """The database's rows and counters, read in one read-only transaction: a SQLite file
    (with ``PRAGMA integrity_check``), or a PostgreSQL URL (``chaos.pg.read_raw``)."""
    if is_url(target):
        from chaos import pg

        return pg.read_raw(str(target))
    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, timeout=30)
    try:
        conn.execute("BEGIN")
        raw = fill(Raw(now_ms=time.time_ns() // 1_000_000), conn.execute(QUEUES_SQL),
                   conn.execute(MESSAGES_SQL), conn.execute(ARCHIVE_SQL))
        raw.integrity = "; ".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
        conn.execute("COMMIT")
    finally:
        conn.close()
    return raw


def fill(raw: Raw, queues: Iterable[Sequence[Any]], messages: Iterable[Sequence[Any]],
         archive: Iterable[Sequence[Any]]) -> Raw:
    """``raw`` with the rows of ``QUEUES_SQL``, ``MESSAGES_SQL`` and ``ARCHIVE_SQL`` (read in
    that order, in one transaction)."""
    names = {}
    for qid, name, archives, max_attempts, *counts in queues:
        names[qid] = name
        raw.archives[name] = bool(archives)
        raw.max_attempts[name] = max_attempts
        raw.counters[name] = dict(zip(COUNTERS, counts, strict=True))
    for mid, qid, payload, attempts, lease, origin, available in messages:
        state = ("leased" if lease is not None and lease > raw.now_ms else
                 "delayed" if lease is None and available > raw.now_ms else "ready")
        raw.rows[mid] = Row(mid, names[qid], json.loads(payload), attempts, lease, origin,
                            state)
    for mid, qid, payload, attempts in archive:
        raw.archive[mid] = Row(mid, names[qid], json.loads(payload), attempts, None, None,
                               "archived")
    return raw


def is_url(target: str | Path) -> bool:
    """Whether ``target`` is a database URL (PostgreSQL) rather than a SQLite file."""
    return "://" in str(target)


@dataclass
class Public:
    """What sqew's own reads say, per queue."""

    stats: dict[str, models.Stats] = field(default_factory=dict)
    scanned: dict[tuple[str, str], dict[int, Any]] = field(default_factory=dict)
    """``(queue, source)`` → id → payload, from ``Client.export``."""
    peeked: dict[str, list[int]] = field(default_factory=dict)
    before_ms: int = 0
    after_ms: int = 0


def read_public(db: str | Path, queues: list[str]) -> Public:
    """``stats``, ``export`` of every source and ``peek`` of each queue, through a Client on
    the file (opening it recovers what a killed process left)."""
    out = Public(before_ms=time.time_ns() // 1_000_000)
    with sqew.Client(str(db)) as client:  # type: ignore[abstract]
        for q in queues:
            for name in (q, f"{q}.dlq"):
                out.stats[name] = client.stats(name)
            for source in ("queue", "dlq", "archive"):
                out.scanned[(q, source)] = {m.id: m.payload
                                            for m in client.export(q, source=source)}
            out.peeked[q] = [m.id for m in client.peek(q, limit=100)]
    out.after_ms = time.time_ns() // 1_000_000
    return out


def recover(db: str | Path) -> None:
    """Open and close the database through sqew, as the next user would: on a file, a killed
    writer's transaction is rolled back and the WAL checkpointed before it is read raw."""
    with sqew.Client(str(db)) as client:  # type: ignore[abstract]
        client.list_queues()
