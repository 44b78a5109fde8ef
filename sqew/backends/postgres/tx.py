"""``PostgresTx``: ``SqlTx`` on PostgreSQL, overriding what differs (statements from
``statements``, the by-name writes from ``by_name``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg.pq import TransactionStatus

from sqew import errors
from sqew.backends.base import MISSED, ClaimQueue, MessageRow
from sqew.backends.paramstyle import PyformatConnection
from sqew.backends.postgres import by_name
from sqew.backends.postgres import statements as sql
from sqew.backends.postgres.by_name import QueueCache, RowsFor
from sqew.backends.postgres.connection import KEPT_MAX_S, EndWatch
from sqew.backends.sql import SqlTx

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
LARGE_ANSWER = 1 << 20
"""Payload bytes of a claim's answer past which its cursor is replaced (``drop_large_answer``)."""


class _DeferredBegin(PyformatConnection):
    """``PyformatConnection`` that sends a pending ``BEGIN`` in one round trip with the
    transaction's first statement (psycopg's pipeline mode)."""

    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self.begin: str | None = None

    def execute(self, sql: str, params: Any = None) -> Any:
        return self._after_begin(lambda: super(_DeferredBegin, self).execute(sql, params))

    def execute_pyformat(self, sql: str, params: Any, cursor: Any) -> Any:
        """``execute`` of a statement written with ``%(name)s`` parameters already, on
        ``cursor`` (a cursor of the connection)."""
        return self._after_begin(lambda: cursor.execute(sql, params))

    def _after_begin(self, run: Callable[[], Any]) -> Any:
        """``run()``'s cursor, in one round trip with the pending ``BEGIN`` if there is one."""
        begin, self.begin = self.begin, None
        if begin is None:
            return run()
        with self.conn.pipeline():
            self.conn.execute(begin)
            return run()

    def executemany(self, sql: str, rows: Sequence[Any]) -> Any:
        begin, self.begin = self.begin, None
        if begin is not None:
            self.conn.execute(begin)
        return super().executemany(sql, rows)


class PostgresTx(SqlTx):
    """``SqlTx`` on a psycopg connection (autocommit mode, inside a ``BEGIN``).

    The hooks' defaults are PostgreSQL's already (``TRUE``/``FALSE``, a token from
    ``gen_random_uuid()``, claims ``FOR UPDATE SKIP LOCKED``); psycopg takes ``%(name)s``.
    Round trips are saved at both ends of a transaction: ``start`` leaves ``BEGIN`` to go out
    with the first statement, and ``commit`` sends the notifications with ``COMMIT``. The
    by-name writes are one statement each (``by_name``), falling back on ``SqlTx``'s.

    Between transactions the object (its connection, cursor and tokens) may serve the fast
    paths (``PostgresFast``), whose statements go out alone, outside any transaction.
    """

    PARAMSTYLE = "pyformat"

    def __init__(self, conn: Any, origin: str, cache: QueueCache) -> None:
        """``origin``: the sending process's mark on its notifications (its own waiter has
        woken its waits already and skips them); ``cache``: what the backend's by-name
        writes assume of its queues."""
        super().__init__(conn)
        self.conn = conn
        self.origin = origin
        self.cache = cache
        self.c: _DeferredBegin = _DeferredBegin(conn)
        self._notify: set[str] = set()
        self.tokens_ahead: list[str] = []
        """Lease tokens drawn ahead for this object's claims of one (``by_name.claim``)."""
        self.cur = conn.cursor()
        """The by-name writes' cursor: one for all their statements, whose answers are read
        at once. A fresh cursor would look every parameter's type up again."""
        self.closed_by_server = EndWatch(conn)
        """Whether the server ended the connection while it was idle (``TxPool``)."""
        self.kept_until = time.monotonic() + KEPT_MAX_S
        """Until when ``TxPool`` may keep this object between transactions."""

    def start(self, begin: str = "BEGIN") -> None:
        """Open a transaction: ``begin`` is sent with the first statement."""
        self._notify.clear()
        self.c.begin = begin

    def drop_large_answer(self, size: int) -> None:
        """Let go of the cursor's last answer if its payloads came to ``LARGE_ANSWER`` bytes
        or more (``size``): a cursor holds its answer until its next statement, which a kept
        transaction object may wait long for. A fresh cursor replaces it."""
        if size >= LARGE_ANSWER:
            self.cur = self.conn.cursor()

    def _send(self, statement: str, params: dict[str, Any]) -> Any:
        """A by-name write's statement (``%(name)s`` parameters) in this transaction, on the
        object's cursor."""
        return self.c.execute_pyformat(statement, params, self.cur)

    # --- by name: one statement each (``by_name``), else ``SqlTx``'s composition -------------
    def enqueue_by_name(self, name: str, count: int, rows_for: RowsFor) -> list[int] | None:
        ids = by_name.enqueue(self, self._send, name, count, rows_for)
        if ids is not MISSED:
            return ids
        return super().enqueue_by_name(name, count, self.cache.remembering(rows_for))

    def claim_by_name(
        self, name: str, now: int, limit: int, visibility_ms: int | None
    ) -> tuple[ClaimQueue, list[MessageRow] | None] | None:
        found = by_name.claim(self, self._send, name, now, limit, visibility_ms)
        if found is not MISSED:
            return found
        return super().claim_by_name(name, now, limit, visibility_ms)

    def ack_by_name(
        self, name: str, items: Sequence[tuple[int, str]], now: int
    ) -> list[bool | None] | None:
        found = by_name.ack(self, self._send, name, items, now)
        if found is not MISSED:
            return found
        return super().ack_by_name(name, items, now)

    @property
    def open(self) -> bool:
        """Whether a transaction is open, or started and not yet sent; also when a statement
        failed in it (PostgreSQL keeps the aborted transaction, and a savepoint's rollback
        revives it), not when the connection was lost."""
        return self.c.begin is not None or self.conn.info.transaction_status in _OPEN

    def _in_transaction(self) -> bool:
        return self.open

    def notify(self, queues: Iterable[str]) -> None:
        # PostgreSQL delivers notifications at commit, one per distinct payload of a
        # transaction (coalesced), to every listening process: the waiters of other replicas.
        # Kept until the commit, which sends them in its round trip.
        self._notify.update(queues)

    def commit(self) -> None:
        """Commit: the notifications (payload ``"<origin> <queue>"``; a queue name has no
        spaces) and ``COMMIT`` in one round trip. An aborted transaction is rolled back and
        reported, never "committed" (PostgreSQL would answer its COMMIT with a rollback)."""
        queues: list[str] = []
        if self._notify:
            queues, self._notify = sorted(self._notify), set()
        if self.c.begin is not None:  # nothing was sent: nothing to commit
            self.c.begin = None
            if queues:
                self.conn.execute(sql.NOTIFY, {"origin": self.origin, "qs": queues})
            return
        if self.conn.info.transaction_status == TransactionStatus.INERROR:
            self.rollback()
            raise errors.InternalError("a statement of the transaction failed")
        with self.conn.pipeline():
            if queues:
                self.conn.execute(sql.NOTIFY, {"origin": self.origin, "qs": queues})
            self.conn.execute("COMMIT")

    def rollback(self) -> None:
        """Roll back whatever is open (nothing if the connection is gone)."""
        self.c.begin = None
        self._notify.clear()
        if not self.conn.closed and self.conn.info.transaction_status in _OPEN:
            self.conn.execute("ROLLBACK")

    def lock_queues(self, names: Iterable[str] | None) -> None:
        """``FOR NO KEY UPDATE`` (the lock an UPDATE of the counters takes; it leaves the
        messages' foreign-key checks alone), taken in id order: ``ORDER BY`` runs before the
        rows are locked."""
        if names is None:
            self.c.execute(sql.LOCK_ALL)
            return
        wanted = sorted(set(names))
        if wanted:
            self.c.execute(sql.LOCK_NAMED, {"names": wanted})

    def extend(self, queue_id: int, items: Sequence[tuple[int, str, int]]) -> list[bool | None]:
        """One statement for every item, and one more for the items that missed, if any.
        (An UPDATE changes a row once: of an item repeated, the last ``until`` is sent.)"""
        last = {(msg_id, token): until for msg_id, token, until in items}
        done = {(int(i), str(t)) for i, t in self._all(sql.EXTEND, {
            "ids": [i for i, _ in last], "tokens": [t for _, t in last],
            "untils": list(last.values()), "q": queue_id})}
        missed = sorted({i for i, t, _ in items if (i, t) not in done})
        there: set[int] = set()
        if missed:
            there = {int(r[0]) for r in self._all(sql.THERE, {"ids": missed, "q": queue_id})}
        return [True if (i, t) in done else (False if i in there else None)
                for i, t, _ in items]

    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        """By ``ctid`` (the row's physical address): no key lookup per deleted row
        (``statements.REAP_DEDUP``)."""
        where = "expires_at <= :now" + (" AND queue_id = :q" if queue_id is not None else "")
        return self._rowcount(sql.REAP_DEDUP.format(where=where),
                              {"now": now, "q": queue_id, "n": limit})
