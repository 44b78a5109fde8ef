"""``SqliteTx``: the SQLite values of the dialect hooks of ``SqlTx``."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqew.backends.base import NewMessage, QueueLimits
from sqew.backends.columns import INSERT_MESSAGES, INSERTED
from sqew.backends.sql import SqlTx


class SqliteTx(SqlTx):
    """``SqlTx`` on a sqlite3 connection."""

    TRUE = "1"  # the partial claim indexes say `lifo = 0/1`: a term must match them verbatim
    FALSE = "0"
    NEW_TOKEN = "lower(hex(randomblob(16)))"  # randomblob draws from SQLite's CSPRNG
    CLAIM_LOCK = ""  # BEGIN IMMEDIATE already holds the whole database for the writer
    CLAIM_IDS = "id IN ({})"  # SQLite runs the subquery once (and has no arrays)

    def _in_transaction(self) -> bool:
        return bool(self.c.in_transaction)

    def __init__(self, conn: Any, *, fold_wakeups: bool = True) -> None:
        """``fold_wakeups``: this object lives for one transaction, so an enqueue's counter
        update may bump ``wakeups`` too and ``notify`` skip that queue (one statement
        fewer per enqueue); off for a write session's object, which outlives transactions."""
        super().__init__(conn)
        self._fold_wakeups = fold_wakeups
        self._woken: set[str] = set()  # queues whose wakeups this transaction bumped

    _RESERVE_WAKING = (
        "UPDATE queues SET depth = depth + :n, enqueued_total = enqueued_total + :n, "
        f"wakeups = wakeups + 1 WHERE name = :name RETURNING {', '.join(QueueLimits._fields)}"
    )

    def reserve(self, name: str, count: int) -> QueueLimits | None:
        if not self._fold_wakeups:
            return super().reserve(name, count)
        row = self._one(self._RESERVE_WAKING, {"n": count, "name": name})
        if row is None:
            return None
        self._woken.add(name)
        return QueueLimits._make(row)

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        woken = set(self._woken)
        try:
            with super().savepoint():
                yield
        except BaseException:
            self._woken = woken  # their bumps were rolled back with the savepoint
            raise

    def notify(self, queues: Iterable[str]) -> None:
        """Bump the ``wakeups`` counter of ``queues``: the long polls of other processes
        watch it (``SqliteWaiter``), and it moves with the commit or not at all."""
        names = sorted(set(queues) - self._woken)
        if names:
            marks = ", ".join("?" * len(names))
            self.c.execute(
                f"UPDATE queues SET wakeups = wakeups + 1 WHERE name IN ({marks})", names
            )

    # Positional, and plain tuples (this is the enqueue hot path): sqlite3 binds an exact
    # tuple by index in C, where a named tuple's items are fetched through Python's
    # ``__getitem__`` (a fifth more instructions per batch enqueue); a copy costs less.
    _INSERT = f"{INSERT_MESSAGES} VALUES ({'?, ' * len(INSERTED)}0)"

    def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]:
        """One ``executemany``; the ids from the last rowid.

        Inside one write transaction the ids of an AUTOINCREMENT table are consecutive: the
        transaction is the only writer of the file.
        """
        if len(rows) == 1:
            return [int(self.c.execute(self._INSERT, tuple(rows[0])).lastrowid)]
        self.c.executemany(self._INSERT, map(tuple, rows))
        last = int(self.c.execute("SELECT last_insert_rowid()").fetchone()[0])
        return list(range(last - len(rows) + 1, last + 1))

    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        """By rowid: SQLite looks a row-value ``(queue_id, key) IN (…)`` up by ``queue_id``
        alone, 50 times slower on a queue with 200,000 keys."""
        where = "expires_at <= :now" + (" AND queue_id = :q" if queue_id is not None else "")
        return self._rowcount(
            f"DELETE FROM dedup WHERE rowid IN (SELECT rowid FROM dedup WHERE {where} LIMIT :n)",
            {"now": now, "q": queue_id, "n": limit},
        )
