"""``PostgresTx``: the PostgreSQL values of the dialect hooks of ``SqlTx``, and its faster
statements."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg.pq import TransactionStatus

from sqew import errors
from sqew.backends.base import NewMessage
from sqew.backends.paramstyle import PyformatConnection
from sqew.backends.postgres.connection import CHANNEL, KEPT_MAX_S, EndWatch
from sqew.backends.postgres.hot import Limits, PostgresHot
from sqew.backends.sql import SqlTx

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)
LARGE_ANSWER = 1 << 20
"""Payload bytes of a claim's answer past which its cursor is replaced (``drop_large_answer``)."""

# One statement for any number of messages: the rows travel as one array per column (a
# statement of one shape, prepared once, where a multi-row VALUES list has a shape per size).
_INSERT_MANY = (
    "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
    "available_at, expires_at, lifo, traceparent, tracestate) "
    "SELECT q, p, pr, a, 0, e, av, x, l, tp, ts FROM unnest("
    "CAST(:q AS BIGINT[]), CAST(:p AS TEXT[]), CAST(:pr AS INT[]), CAST(:a AS TEXT[]), "
    "CAST(:e AS BIGINT[]), CAST(:av AS BIGINT[]), CAST(:x AS BIGINT[]), "
    "CAST(:l AS BOOLEAN[]), CAST(:tp AS TEXT[]), CAST(:ts AS TEXT[])) "
    "AS r(q, p, pr, a, e, av, x, l, tp, ts) RETURNING id"
)
_INSERT_ONE = (
    "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
    "available_at, expires_at, lifo, traceparent, tracestate) "
    "VALUES (:q, :p, :pr, :a, 0, :e, :av, :x, :l, :tp, :ts) RETURNING id"
)
_COLUMNS = ("q", "p", "pr", "a", "e", "av", "x", "l", "tp", "ts")


_NOTIFY = (
    f"SELECT pg_notify('{CHANNEL}', %(origin)s || ' ' || q) "
    "FROM unnest(CAST(%(qs)s AS TEXT[])) AS q"
)


_LOCK_ALL = "SELECT id FROM queues ORDER BY id FOR NO KEY UPDATE"
_LOCK_NAMED = (
    "SELECT id FROM queues WHERE name = ANY(CAST(:names AS TEXT[])) ORDER BY id "
    "FOR NO KEY UPDATE"
)


# Every lease of a keep-alive in one statement: the items travel as one array per column. The
# ids are the index condition; the unary `+` keeps the planner off the indexes that lead with
# queue_id (see ``hot``'s ack).
_EXTEND = (
    "UPDATE messages m SET lease_expires_at = v.until FROM unnest(CAST(:ids AS BIGINT[]), "
    "CAST(:tokens AS TEXT[]), CAST(:untils AS BIGINT[])) AS v(id, token, until) "
    "WHERE m.id = v.id AND m.token = v.token AND +m.queue_id = :q RETURNING m.id, m.token"
)
_THERE = "SELECT id FROM messages WHERE id = ANY(CAST(:ids AS BIGINT[])) AND +queue_id = :q"


class _Statements(PyformatConnection):
    """``PyformatConnection`` that sends a pending ``BEGIN`` in one round trip with the
    transaction's first statement (psycopg's pipeline mode)."""

    def __init__(self, conn: Any) -> None:
        super().__init__(conn)
        self.begin: str | None = None

    def execute(self, sql: str, params: Any = None) -> Any:
        return self._after_begin(lambda: super(_Statements, self).execute(sql, params))

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


class PostgresTx(PostgresHot, SqlTx):
    """``SqlTx`` on a psycopg connection (autocommit mode, inside a ``BEGIN``).

    The hooks' defaults are PostgreSQL's already (``TRUE``/``FALSE``, a token from
    ``gen_random_uuid()``, claims ``FOR UPDATE SKIP LOCKED``); psycopg takes ``%(name)s``.
    Round trips are saved at both ends of a transaction: ``start`` leaves ``BEGIN`` to go out
    with the first statement, and ``commit`` sends the notifications with ``COMMIT``. In a
    transaction of one operation (``solo``), a hot path's statement sent first goes without
    ``BEGIN``: a transaction by itself, one round trip (``PostgresHot``).
    """

    PARAMSTYLE = "pyformat"

    def __init__(self, conn: Any, origin: str, limits: Limits, *, solo: bool = False) -> None:
        """``origin``: the sending process's mark on its notifications (its own waiter has
        woken its waits already and skips them); ``limits``: what the backend's hot paths
        remember of its queues; ``solo``: the transaction runs one operation
        (``Backend.write``), not a group commit's many."""
        super().__init__(conn)
        self.conn = conn
        self.origin = origin
        self.limits = limits
        self.solo = solo
        self.c: _Statements = _Statements(conn)
        self._notify: set[str] = set()
        self.notified: set[str] = set()
        """Queues whose notification a statement that ran alone committed already."""
        self.ran_alone = False
        self.tokens_ahead: list[str] = []
        """Lease tokens drawn ahead for this object's claims (``PostgresHot``)."""
        self.cur = conn.cursor()
        """The hot paths' cursor (``_solo``): one for all their statements, whose answers
        are read at once. A fresh cursor would look every parameter's type up again."""
        self.closed_by_server = EndWatch(conn)
        """Whether the server ended the connection while it was idle (``Transactions``)."""
        self.kept_until = time.monotonic() + KEPT_MAX_S
        """Until when ``Transactions`` may keep this object between transactions."""

    def start(self, begin: str = "BEGIN", *, solo: bool | None = None) -> None:
        """Open a transaction: ``begin`` is sent with the first statement; ``solo``, if
        given, says whether it runs one operation (see ``__init__``)."""
        if solo is not None:
            self.solo = solo
        self._notify.clear()
        self.notified.clear()
        self.c.begin = begin

    def drop_large_answer(self, size: int) -> None:
        """Let go of the hot cursor's last answer if its payloads came to ``LARGE_ANSWER``
        bytes or more (``size``): a cursor holds its answer until its next statement, which a
        kept transaction object may wait long for. A fresh cursor replaces it."""
        if size >= LARGE_ANSWER:
            self.cur = self.conn.cursor()

    def _solo(self, sql: str, params: dict[str, Any]) -> Any:
        """Run a hot path's statement (``%(name)s`` parameters): as a transaction of its own
        when it is the first of a ``solo`` transaction (``BEGIN`` then goes out with the next
        statement, if any; ``ran_alone`` says which), in the open transaction otherwise."""
        self.ran_alone = self.solo and self.c.begin is not None
        if self.ran_alone:
            return self.cur.execute(sql, params)
        return self.c.execute_pyformat(sql, params, self.cur)

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
            queues, self._notify = sorted(self._notify - self.notified), set()
        if self.c.begin is not None:  # nothing was sent (or a solo statement committed)
            self.c.begin = None
            if queues:
                self.conn.execute(_NOTIFY, {"origin": self.origin, "qs": queues})
            return
        if self.conn.info.transaction_status == TransactionStatus.INERROR:
            self.rollback()
            raise errors.InternalError("a statement of the transaction failed")
        with self.conn.pipeline():
            if queues:
                self.conn.execute(_NOTIFY, {"origin": self.origin, "qs": queues})
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
            self.c.execute(_LOCK_ALL)
            return
        wanted = sorted(set(names))
        if wanted:
            self.c.execute(_LOCK_NAMED, {"names": wanted})

    def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]:
        """One statement whatever the count; the ids sorted (a sequence draws them in the
        order of the rows, as the neutral statement relies on too)."""
        if len(rows) == 1:
            return [int(self._one(_INSERT_ONE, dict(zip(_COLUMNS, rows[0], strict=True)))[0])]
        columns = zip(*rows, strict=True)
        params = {col: list(values) for col, values in zip(_COLUMNS, columns, strict=True)}
        return sorted(int(r[0]) for r in self._all(_INSERT_MANY, params))

    def extend(self, queue_id: int, items: Sequence[tuple[int, str, int]]) -> list[bool | None]:
        """One statement for every item, and one more for the items that missed, if any.
        (An UPDATE changes a row once: of an item repeated, the last ``until`` is sent.)"""
        last = {(msg_id, token): until for msg_id, token, until in items}
        done = {(int(i), str(t)) for i, t in self._all(_EXTEND, {
            "ids": [i for i, _ in last], "tokens": [t for _, t in last],
            "untils": list(last.values()), "q": queue_id})}
        missed = sorted({i for i, t, _ in items if (i, t) not in done})
        there: set[int] = set()
        if missed:
            there = {int(r[0]) for r in self._all(_THERE, {"ids": missed, "q": queue_id})}
        return [True if (i, t) in done else (False if i in there else None)
                for i, t, _ in items]

    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        """By ``ctid`` (the row's physical address): no key lookup per deleted row. Records an
        enqueue holds (reusing an expired key) are skipped, not waited for: the reaper locks no
        queue for this, so waiting could close a cycle with that enqueue."""
        where = "expires_at <= :now" + (" AND queue_id = :q" if queue_id is not None else "")
        return self._rowcount(
            "DELETE FROM dedup WHERE ctid = ANY(ARRAY("
            f"SELECT ctid FROM dedup WHERE {where} LIMIT :n FOR UPDATE SKIP LOCKED))",
            {"now": now, "q": queue_id, "n": limit},
        )
