"""Dialect-neutral statements of the storage contract, run on a DB-API connection.

Hot paths are single statements executed on the driver connection directly (SQLAlchemy's
per-statement overhead would cost most of SQLite's throughput); the schema itself is
SQLAlchemy Core (``schema.py``) managed by Alembic.

Every statement here is valid on SQLite and on PostgreSQL. What differs between dialects is a
named hook that a backend's subclass overrides (see ``SqlTx``). Statements use ``:name``
parameters only (DB-API ``named``, what sqlite3 takes). A driver that takes ``%(name)s``
(DB-API ``pyformat``: psycopg) sets ``PARAMSTYLE = "pyformat"``: each statement is then
converted once, the first time it runs (``sqew.backends.paramstyle``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from sqew.backends.base import LiveCounts, MessageRow, NewMessage, QueueRow, Tx
from sqew.backends.columns import INSERT_MESSAGES, INSERTED
from sqew.backends.columns import MESSAGE as _MSG_COLS
from sqew.backends.errors import driver_errors
from sqew.backends.paramstyle import PyformatConnection
from sqew.backends.sql_by_name import ByNameStatements
from sqew.backends.sql_held import HeldStatements
from sqew.backends.sql_keys import KeyStatements
from sqew.backends.sql_moves import MoveTaskStatements
from sqew.backends.sql_queues import ENDED_LEASES, QueueStatements
from sqew.backends.sql_reaps import ReapStatements
from sqew.backends.sql_scans import ScanStatements
from sqew.backends.sql_sqs import GROUP_HEAD, SqsStatements

_KEYS_PER_LOOKUP = 500  # idempotency keys looked up per statement (a batch holds up to 1000)
INSERT_CHUNK = 100
"""Rows per multi-row ``INSERT`` of the neutral ``insert_messages`` (800 parameters)."""

_NO_LIMIT = 2**31 - 1  # attempts, where none moves a message on (a DLQ's)
LEASE_EXPIRED = "lease expired"
"""``last_error`` of a message dead-lettered because its last allowed lease ran out."""


class SqlTx(
    ByNameStatements, HeldStatements, QueueStatements, KeyStatements, ScanStatements,
    ReapStatements, SqsStatements, MoveTaskStatements, Tx,
):
    """The contract's statements on one DB-API connection inside an open transaction.

    Hooks a dialect overrides (the defaults are PostgreSQL's, which is also plain SQL):

    - ``TRUE`` / ``FALSE``: boolean literals as the dialect writes them, matching the
      ``lifo`` terms of the partial claim indexes;
    - ``NEW_TOKEN``: an SQL expression giving each claimed row a fresh, unguessable token
      (32 hex characters) from the database's secure random source;
    - ``CLAIM_LOCK``: appended to the claim's inner select, so two transactions never pick
      the same row (``FOR UPDATE SKIP LOCKED``; empty where a write transaction holds the
      whole database, as on SQLite);
    - ``CLAIM_IDS``: how the claim's ``UPDATE`` names the rows its inner select picked
      (``{}``: the select). PostgreSQL may run an ``IN (…)`` subquery again during the
      update, and a second run under ``SKIP LOCKED`` picks rows past the ``LIMIT``;
      ``id = ANY(ARRAY(…))`` runs it once;
    - ``PARAMSTYLE``: ``"named"`` or ``"pyformat"`` (see the module docstring);
    - ``insert_messages``, ``reap_dedup`` and ``extend``: may be replaced by faster
      statements of the dialect (SQLite: ids from the last rowid; deletes by rowid;
      PostgreSQL: every lease of a keep-alive in one statement).
    """

    TRUE: ClassVar[str] = "TRUE"
    FALSE: ClassVar[str] = "FALSE"
    NEW_TOKEN: ClassVar[str] = "replace(CAST(gen_random_uuid() AS TEXT), '-', '')"
    CLAIM_LOCK: ClassVar[str] = " FOR UPDATE SKIP LOCKED"
    CLAIM_IDS: ClassVar[str] = "id = ANY(ARRAY({}))"
    PARAMSTYLE: ClassVar[str] = "named"

    def __init__(self, conn: Any) -> None:
        """``conn``: a connection (or a cursor) whose ``execute``/``executemany`` take this
        class's ``PARAMSTYLE`` and return a cursor (``fetchone``, ``fetchall``, ``rowcount``)."""
        self.c = conn if self.PARAMSTYLE == "named" else PyformatConnection(conn)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse an unknown paramstyle when the class is made, not at its first statement."""
        super().__init_subclass__(**kwargs)
        if cls.PARAMSTYLE not in ("named", "pyformat"):
            raise ValueError(f"unsupported paramstyle {cls.PARAMSTYLE!r}")

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Driver errors of the block come out as ``SqewError``s (``driver_errors``)."""
        with driver_errors():
            self.c.execute("SAVEPOINT op")
            try:
                yield
            except BaseException:
                # After some errors (SQLite's full disk) the whole transaction has ended: there
                # is no savepoint left, and the original error is the one that tells.
                if self._in_transaction():
                    self.c.execute("ROLLBACK TO SAVEPOINT op")
                    self.c.execute("RELEASE SAVEPOINT op")
                raise
            self.c.execute("RELEASE SAVEPOINT op")

    # helpers
    def _in_transaction(self) -> bool:
        """Whether the connection's transaction is still open (hook: a driver that can tell
        says so; the default assumes it is)."""
        return True

    def _one(self, sql: str, params: Any = ()) -> Any:
        return self.c.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Any = ()) -> list[Any]:
        return list(self.c.execute(sql, params).fetchall())

    def _rowcount(self, sql: str, params: Any = ()) -> int:
        return int(self.c.execute(sql, params).rowcount)

    def _bool(self, value: bool) -> str:
        return self.TRUE if value else self.FALSE

    # --- enqueue --------------------------------------------------------------------------------
    def find_dedup(self, queue_id: int, keys: Sequence[str], now: int) -> dict[str, int]:
        found: dict[str, int] = {}
        for start in range(0, len(keys), _KEYS_PER_LOOKUP):  # one statement per chunk
            chunk = keys[start:start + _KEYS_PER_LOOKUP]
            names = ", ".join(f":k{i}" for i in range(len(chunk)))
            params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(chunk)}
            params.update(q=queue_id, now=now)
            for key, message_id in self._all(
                f"SELECT key, message_id FROM dedup WHERE queue_id = :q AND key IN ({names}) "
                "AND expires_at > :now",
                params,
            ):
                found[str(key)] = int(message_id)
        return found

    def put_dedup(self, rows: Sequence[tuple[int, str, int, int]]) -> None:
        self.c.executemany(
            "INSERT INTO dedup (queue_id, key, message_id, expires_at) "
            "VALUES (:q, :key, :id, :exp) "
            "ON CONFLICT (queue_id, key) DO UPDATE SET message_id = excluded.message_id, "
            "expires_at = excluded.expires_at",
            [{"q": q, "key": key, "id": msg_id, "exp": exp} for q, key, msg_id, exp in rows],
        )

    def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]:
        """Multi-row ``INSERT … RETURNING id`` in chunks.

        RETURNING has no defined order, but the ids of one statement are drawn in the order
        of its rows (a sequence, or SQLite's rowid counter), so sorting them restores input
        order.
        """
        ids: list[int] = []
        for start in range(0, len(rows), INSERT_CHUNK):
            chunk = rows[start : start + INSERT_CHUNK]
            params = {
                f"{col}{i}": value
                for i, row in enumerate(chunk)
                for col, value in zip(INSERTED, row, strict=True)
            }
            ids.extend(sorted(int(r[0]) for r in self._all(_insert_sql(len(chunk)), params)))
        return ids

    # --- leases ---------------------------------------------------------------------------------
    def dead_letter_expired(
        self, queue_id: int, now: int, max_attempts: int, dlq: QueueRow, origin: str
    ) -> int:
        return self._rowcount(
            "UPDATE messages SET queue_id = :dlq, lease_expires_at = NULL, token = NULL, "
            f"available_at = :now, expires_at = :exp, lifo = {self._bool(dlq.lifo)}, "
            "origin_queue = :origin, last_error = :err || "
            "COALESCE('; before: ' || last_error, '') "
            "WHERE queue_id = :q AND lease_expires_at IS NOT NULL "
            "AND lease_expires_at <= :now AND attempts >= :max",
            {"dlq": dlq.id, "now": now, "exp": now + dlq.retention_ms, "origin": origin,
             "q": queue_id, "max": max_attempts, "err": LEASE_EXPIRED},
        )

    def release_expired(self, queue_id: int, now: int) -> int:
        return self._rowcount(
            "UPDATE messages SET available_at = lease_expires_at, lease_expires_at = NULL "
            "WHERE queue_id = :q AND lease_expires_at IS NOT NULL AND lease_expires_at <= :now",
            {"q": queue_id, "now": now},
        )

    def _ready_select(
        self, lifo: bool, cols: str, lock: str = "", queue: str = ":q", limit: str = ":n"
    ) -> str:
        # The literal `lifo = TRUE/FALSE` and `lease_expires_at IS NULL` match a partial claim
        # index; the unary `+` keeps the planner off the expiry index (a sort over the whole
        # queue).
        order = "priority DESC, id DESC" if lifo else "priority DESC, available_at, id"
        return (
            f"SELECT {cols} FROM messages WHERE queue_id = {queue} AND lease_expires_at IS NULL "
            f"AND lifo = {self._bool(lifo)} AND available_at <= :now AND +expires_at > :now "
            f"AND {GROUP_HEAD.format(now=':now')} ORDER BY {order} LIMIT {limit}{lock}"
        )

    def claim(
        self, queue_id: int, lifo: bool, now: int, limit: int, lease_until: int,
        shuffle: bool = False,
    ) -> list[MessageRow]:
        picked = (self._shuffled_select(lifo) if shuffle
                  else self._ready_select(lifo, "id", self.CLAIM_LOCK))
        rows = self._all(
            f"UPDATE messages SET lease_expires_at = :until, token = {self.NEW_TOKEN}, "
            "attempts = attempts + 1, first_leased_at = COALESCE(first_leased_at, :now) WHERE "
            + self.CLAIM_IDS.format(picked)
            + f" RETURNING {_MSG_COLS}",
            {"q": queue_id, "now": now, "n": limit, "until": lease_until,
             "window": SHUFFLE_WINDOW},
        )
        claimed = [MessageRow._make(r) for r in rows]
        return claimed if shuffle else in_delivery_order(claimed, lifo)

    def _shuffled_select(self, lifo: bool) -> str:
        # Random rows among the first SHUFFLE_WINDOW ready ones in delivery order: a bounded
        # walk of the claim index and a sort of at most that many ids, never of the whole
        # queue. The pick is locked afterwards (skipping rows another claim holds), not the
        # window, so a shuffled poll never blocks the claims of other polls.
        window = self._ready_select(lifo, "id", limit=":window")
        pick = f"SELECT id FROM ({window}) AS w ORDER BY random() LIMIT :n"
        return (f"SELECT id FROM messages WHERE id IN ({pick}) "
                f"AND lease_expires_at IS NULL{self.CLAIM_LOCK}")

    # --- reads and admin ------------------------------------------------------------------------
    def peek(
        self, queue_id: int, lifo: bool, now: int, limit: int, max_attempts: int | None
    ) -> list[MessageRow]:
        # The ready rows (a walk of the claim index) and the rows whose lease ended (few:
        # polls and the reaper sweep them), merged in delivery order; a swept row is ready
        # from its lease's end (``release_expired``).
        order = ("priority DESC, id DESC" if lifo else
                 "priority DESC, COALESCE(lease_expires_at, available_at), id")
        rows = self._all(
            f"SELECT {_MSG_COLS} FROM (SELECT * FROM ({self._ready_select(lifo, _MSG_COLS)}) "
            f"AS ready UNION ALL SELECT {_MSG_COLS} FROM messages WHERE queue_id = :q "
            "AND lease_expires_at IS NOT NULL AND lease_expires_at <= :now "
            "AND expires_at > :now AND attempts < :max) AS due "
            f"ORDER BY {order} LIMIT :n",
            {"q": queue_id, "now": now, "n": limit,
             "max": _NO_LIMIT if max_attempts is None else max_attempts},
        )
        return [MessageRow._make(r) for r in rows]

    def get_message(self, queue_id: int, msg_id: int) -> MessageRow | None:
        row = self._one(
            f"SELECT {_MSG_COLS} FROM messages WHERE id = :id AND queue_id = :q",
            {"id": msg_id, "q": queue_id},
        )
        return MessageRow._make(row) if row else None

    def delete_message(self, queue_id: int, msg_id: int) -> bool:
        return self._rowcount(
            "DELETE FROM messages WHERE id = :id AND queue_id = :q", {"id": msg_id, "q": queue_id}
        ) == 1

    def purge(self, queue_id: int) -> int:
        return self._rowcount("DELETE FROM messages WHERE queue_id = :q", {"q": queue_id})

    def list_messages(self, queue_id: int, after_id: int, limit: int) -> list[MessageRow]:
        rows = self._all(
            f"SELECT {_MSG_COLS} FROM messages WHERE queue_id = :q AND id > :after "
            "ORDER BY id LIMIT :n",
            {"q": queue_id, "after": after_id, "n": limit},
        )
        return [MessageRow._make(r) for r in rows]

    def move_all(
        self, from_id: int, to: QueueRow, ids: Sequence[int] | None, now: int,
        limit: int | None = None,
    ) -> tuple[int, int]:
        # A live lease stays with its holder (its ack must still succeed); an expired message
        # is gone (only the reaper has yet to remove it); the origin is forgotten: on an
        # ordinary queue a message has none. The conditions are on the UPDATE itself, so a
        # row a concurrent claim leased after the ids were picked is skipped.
        params: dict[str, Any] = {"to": to.id, "now": now, "exp": now + to.retention_ms,
                                  "from": from_id}
        movable = (
            "queue_id = :from AND (lease_expires_at IS NULL OR lease_expires_at <= :now) "
            "AND expires_at > :now"
        )
        update = (
            "UPDATE messages SET queue_id = :to, attempts = 0, first_leased_at = NULL, "
            "lease_expires_at = NULL, "
            f"token = NULL, available_at = :now, expires_at = :exp, lifo = {self._bool(to.lifo)}, "
            f"origin_queue = NULL WHERE {movable}"
        )
        if ids is None and limit is None:
            return self._rowcount(update, params), 0
        if ids is None:  # the first ``limit`` by id, and how many there are
            assert limit is not None
            total = int(self._one(f"SELECT COUNT(*) FROM messages WHERE {movable}", params)[0])
            chosen = [int(r[0]) for r in self._all(
                f"SELECT id FROM messages WHERE {movable} ORDER BY id LIMIT :n",
                {**params, "n": max(limit, 0)})]
        else:
            found: set[int] = set()
            for chunk in _chunks(sorted(set(ids)), _KEYS_PER_LOOKUP):
                named = {**params}
                found.update(int(r[0]) for r in self._all(
                    f"SELECT id FROM messages WHERE {movable} AND id IN "
                    f"({_marks(chunk, named)})", named))
            total = len(found)
            chosen = sorted(found)[:None if limit is None else max(limit, 0)]
        moved = 0
        for chunk in _chunks(chosen, _KEYS_PER_LOOKUP):
            named = {**params}
            moved += self._rowcount(f"{update} AND id IN ({_marks(chunk, named)})", named)
        return moved, total - len(chosen)

    def next_due(self, queue_id: int, now: int) -> int | None:
        # A message that expires by the time it is due (or already has) never becomes ready:
        # waking a long poll for it would only find nothing, again and again.
        params = {"q": queue_id, "now": now}
        lease = self._one(
            "SELECT MIN(lease_expires_at) FROM messages WHERE queue_id = :q "
            "AND lease_expires_at IS NOT NULL AND expires_at > lease_expires_at "
            "AND expires_at > :now",
            params,
        )[0]
        avail = self._one(
            "SELECT MIN(available_at) FROM messages WHERE queue_id = :q "
            "AND lease_expires_at IS NULL AND expires_at > available_at AND expires_at > :now",
            params,
        )[0]
        due = [int(t) for t in (lease, avail) if t is not None]
        return min(due) if due else None

    def counts(self, queue_id: int, now: int) -> LiveCounts:
        leased = self._one(
            "SELECT COUNT(*) FROM messages WHERE queue_id = :q AND lease_expires_at IS NOT NULL "
            "AND lease_expires_at > :now AND expires_at > :now",
            {"q": queue_id, "now": now},
        )[0]
        delayed, oldest = 0, None
        for lifo in (False, True):  # each a covering scan of one claim index
            n, first = self._one(
                "SELECT SUM(CASE WHEN available_at > :now THEN 1 ELSE 0 END), "
                "MIN(CASE WHEN available_at <= :now THEN available_at END) FROM messages "
                f"WHERE queue_id = :q AND lease_expires_at IS NULL AND lifo = {self._bool(lifo)} "
                "AND +expires_at > :now",
                {"q": queue_id, "now": now},
            )
            delayed += int(n or 0)
            oldest = _earliest(oldest, first)
        ending, first = self._one(
            ENDED_LEASES.format(key="", where="m.queue_id = :q", group=""),
            {"q": queue_id, "now": now},
        )
        expired = self._one(
            "SELECT COUNT(*) FROM messages WHERE queue_id = :q AND expires_at <= :now",
            {"q": queue_id, "now": now},
        )[0]
        return LiveCounts(int(leased), delayed, int(expired), int(ending or 0),
                          _earliest(oldest, first))


def _chunks(items: Sequence[int], size: int) -> list[Sequence[int]]:
    """``items`` in slices of at most ``size``."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def _marks(ids: Sequence[int], params: dict[str, Any]) -> str:
    """``:i0, :i1, …`` for ``ids``, added to ``params``."""
    for i, value in enumerate(ids):
        params[f"i{i}"] = value
    return ", ".join(f":i{i}" for i in range(len(ids)))


def _earliest(a: int | None, b: Any) -> int | None:
    """The earlier of two times, either of which may be missing."""
    if b is None:
        return a
    return int(b) if a is None or b < a else a


SHUFFLE_WINDOW = 1000
"""A shuffled poll picks among this many ready messages at the head of the delivery order."""


def in_delivery_order(rows: list[MessageRow], lifo: bool) -> list[MessageRow]:
    """Claimed ``rows`` sorted as the claim picked them (RETURNING has no order)."""
    if len(rows) > 1:
        if lifo:
            rows.sort(key=lambda m: (-m.priority, -m.id))
        else:
            rows.sort(key=lambda m: (-m.priority, m.available_at, m.id))
    return rows


@functools.lru_cache(maxsize=INSERT_CHUNK)
def _insert_sql(rows: int) -> str:
    """``INSERT INTO messages … VALUES (…), … RETURNING id`` for ``rows`` rows."""
    values = ", ".join(
        "(" + ", ".join(f":{col}{i}" for col in INSERTED) + ", 0)" for i in range(rows)
    )
    return f"{INSERT_MESSAGES} VALUES {values} RETURNING id"
