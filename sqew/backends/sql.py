"""Dialect-neutral statements of the storage contract, run on a DB-API connection.

Hot paths are single statements executed on the driver connection directly (SQLAlchemy's
per-statement overhead would cost most of SQLite's throughput); the schema itself is
SQLAlchemy Core (``schema.py``) managed by Alembic. Statements use ``:name`` parameters;
a backend whose driver uses another style rewrites them once, at class creation.
A concrete backend overrides only the class attributes that differ between dialects.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqew.backends.base import MessageRow, NewMessage, QueueRow, Tx

_MSG_COLS = (
    "id, queue_id, payload, priority, attributes, attempts, enqueued_at, available_at, "
    "expires_at, last_error, token, lease_expires_at"
)
_QUEUE_COLS = ", ".join(QueueRow._fields)
_COUNTERS = frozenset(
    {"depth", "enqueued_total", "acked_total", "nacked_total", "dead_lettered_total",
     "expired_total"}
)

_COUNTER_SQL: dict[tuple[str, ...], str] = {}
LEASE_EXPIRED = "lease expired"
"""``last_error`` of a message dead-lettered because its last allowed lease ran out."""


class SqlTx(Tx):
    """The contract's statements on one DB-API connection inside an open transaction."""

    TRUE = "1"
    FALSE = "0"
    NEW_TOKEN = "lower(hex(randomblob(16)))"

    def __init__(self, conn: Any) -> None:
        self.c = conn

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        self.c.execute("SAVEPOINT op")
        try:
            yield
        except BaseException:
            self.c.execute("ROLLBACK TO op")
            self.c.execute("RELEASE op")
            raise
        self.c.execute("RELEASE op")

    # helpers
    def _one(self, sql: str, params: Any = ()) -> Any:
        return self.c.execute(sql, params).fetchone()

    def _all(self, sql: str, params: Any = ()) -> list[Any]:
        return list(self.c.execute(sql, params).fetchall())

    def _rowcount(self, sql: str, params: Any = ()) -> int:
        return int(self.c.execute(sql, params).rowcount)

    def _bool(self, value: bool) -> str:
        return self.TRUE if value else self.FALSE

    # --- queues ---------------------------------------------------------------------------------
    def get_queue(self, name: str) -> QueueRow | None:
        row = self._one(f"SELECT {_QUEUE_COLS} FROM queues WHERE name = ?", (name,))
        return QueueRow._make(row) if row else None

    def get_queue_by_id(self, queue_id: int) -> QueueRow | None:
        row = self._one(f"SELECT {_QUEUE_COLS} FROM queues WHERE id = ?", (queue_id,))
        return QueueRow._make(row) if row else None

    def list_queues(self) -> list[QueueRow]:
        rows = self._all(f"SELECT {_QUEUE_COLS} FROM queues ORDER BY name")
        return [QueueRow._make(r) for r in rows]

    def insert_queue(self, values: dict[str, Any]) -> int:
        cols = ", ".join(values)
        marks = ", ".join(f":{k}" for k in values)
        sql = f"INSERT INTO queues ({cols}) VALUES ({marks}) RETURNING id"
        return int(self._one(sql, values)[0])

    def update_queue(self, queue_id: int, values: dict[str, Any]) -> None:
        if not values:
            return
        sets = ", ".join(f"{k} = :{k}" for k in values)
        self.c.execute(f"UPDATE queues SET {sets} WHERE id = :_id", {**values, "_id": queue_id})

    def delete_queue(self, queue_id: int) -> None:
        self.c.execute("DELETE FROM queues WHERE id = ? OR parent_id = ?", (queue_id, queue_id))

    def add_counters(self, queue_id: int, **deltas: int) -> None:
        deltas = {k: v for k, v in deltas.items() if v}
        if not deltas:
            return
        names = tuple(deltas)
        sql = _COUNTER_SQL.get(names)
        if sql is None:
            if not _COUNTERS.issuperset(names):
                raise ValueError(f"unknown counters {set(names) - _COUNTERS}")
            sets = ", ".join(f"{k} = {k} + :{k}" for k in names)
            sql = _COUNTER_SQL[names] = f"UPDATE queues SET {sets} WHERE id = :_id"
        deltas["_id"] = queue_id
        self.c.execute(sql, deltas)

    def add_counters_by_name(self, name: str, **deltas: int) -> QueueRow | None:
        names = tuple(deltas)
        key = ("by_name", *names)
        sql = _COUNTER_SQL.get(key)
        if sql is None:
            if not _COUNTERS.issuperset(names):
                raise ValueError(f"unknown counters {set(names) - _COUNTERS}")
            sets = ", ".join(f"{k} = {k} + :{k}" for k in names)
            sql = _COUNTER_SQL[key] = (
                f"UPDATE queues SET {sets} WHERE name = :_name RETURNING {_QUEUE_COLS}"
            )
        row = self._one(sql, {**deltas, "_name": name})
        return QueueRow._make(row) if row else None

    _CLAIM_QUEUE = (
        f"SELECT {_QUEUE_COLS}, EXISTS (SELECT 1 FROM messages m WHERE m.queue_id = queues.id "
        "AND m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= :now) "
        "FROM queues WHERE name = :name"
    )

    def get_queue_for_claim(self, name: str, now: int) -> tuple[QueueRow, bool] | None:
        row = self._one(self._CLAIM_QUEUE, {"name": name, "now": now})
        return (QueueRow._make(row[:-1]), bool(row[-1])) if row else None

    def reserve(self, name: str, count: int) -> QueueRow | None:
        row = self._one(
            "UPDATE queues SET depth = depth + :n, enqueued_total = enqueued_total + :n "
            f"WHERE name = :name RETURNING {_QUEUE_COLS}",
            {"n": count, "name": name},
        )
        return QueueRow._make(row) if row else None

    def set_messages_lifo(self, queue_id: int, lifo: bool) -> None:
        self.c.execute(
            f"UPDATE messages SET lifo = {self._bool(lifo)} WHERE queue_id = ?", (queue_id,)
        )

    # --- enqueue --------------------------------------------------------------------------------
    def find_dedup(self, queue_id: int, key: str, now: int) -> int | None:
        row = self._one(
            "SELECT message_id FROM dedup WHERE queue_id = ? AND key = ? AND expires_at > ?",
            (queue_id, key, now),
        )
        return int(row[0]) if row else None

    def put_dedup(self, rows: Sequence[tuple[int, str, int, int]]) -> None:
        self.c.executemany(
            "INSERT INTO dedup (queue_id, key, message_id, expires_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (queue_id, key) DO UPDATE SET message_id = excluded.message_id, "
            "expires_at = excluded.expires_at",
            rows,
        )

    _INSERT = (
        "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
        "available_at, expires_at, lifo) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)"
    )

    def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]:
        if len(rows) == 1:
            return [int(self.c.execute(self._INSERT, rows[0]).lastrowid)]
        self.c.executemany(self._INSERT, rows)
        # Inside one write transaction AUTOINCREMENT ids are consecutive: we hold the only writer.
        last = int(self._one("SELECT last_insert_rowid()")[0])
        return list(range(last - len(rows) + 1, last + 1))

    # --- leases ---------------------------------------------------------------------------------
    def has_expired_leases(self, queue_id: int, now: int) -> bool:
        return (
            self._one(
                "SELECT 1 FROM messages WHERE queue_id = ? AND lease_expires_at IS NOT NULL "
                "AND lease_expires_at <= ? LIMIT 1",
                (queue_id, now),
            )
            is not None
        )

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
            "WHERE queue_id = ? AND lease_expires_at IS NOT NULL AND lease_expires_at <= ?",
            (queue_id, now),
        )

    def _ready_select(self, lifo: bool, cols: str) -> str:
        # The literal `lifo = 0/1` and `lease_expires_at IS NULL` match a partial claim index;
        # the unary `+` keeps the planner off the expiry index (a sort over the whole queue).
        order = "priority DESC, id DESC" if lifo else "priority DESC, available_at, id"
        return (
            f"SELECT {cols} FROM messages WHERE queue_id = :q AND lease_expires_at IS NULL "
            f"AND lifo = {self._bool(lifo)} AND available_at <= :now AND +expires_at > :now "
            f"ORDER BY {order} LIMIT :n"
        )

    def claim(
        self, queue_id: int, lifo: bool, now: int, limit: int, lease_until: int
    ) -> list[MessageRow]:
        rows = self._all(
            f"UPDATE messages SET lease_expires_at = :until, token = {self.NEW_TOKEN}, "
            f"attempts = attempts + 1 WHERE id IN ({self._ready_select(lifo, 'id')}) "
            f"RETURNING {_MSG_COLS}",
            {"q": queue_id, "now": now, "n": limit, "until": lease_until},
        )
        out = [MessageRow._make(r) for r in rows]
        if len(out) > 1:  # RETURNING has no order: restore delivery order
            if lifo:
                out.sort(key=lambda m: (-m.priority, -m.id))
            else:
                out.sort(key=lambda m: (-m.priority, m.available_at, m.id))
        return out

    def ack(self, queue_id: int, msg_id: int, token: str, archive: bool, now: int) -> bool:
        params = {"id": msg_id, "q": queue_id, "t": token, "now": now}
        if archive:
            self.c.execute(
                "INSERT INTO archive (id, queue_id, payload, priority, attributes, attempts, "
                "enqueued_at, acked_at, last_error) SELECT id, queue_id, payload, priority, "
                "attributes, attempts, enqueued_at, :now, last_error FROM messages "
                "WHERE id = :id AND queue_id = :q AND token = :t",
                params,
            )
        return self._rowcount(
            "DELETE FROM messages WHERE id = :id AND queue_id = :q AND token = :t", params
        ) == 1

    def message_exists(self, queue_id: int, msg_id: int) -> bool:
        return (
            self._one("SELECT 1 FROM messages WHERE id = ? AND queue_id = ?", (msg_id, queue_id))
            is not None
        )

    def attempts_if_token(self, queue_id: int, msg_id: int, token: str) -> int | None:
        row = self._one(
            "SELECT attempts FROM messages WHERE id = ? AND queue_id = ? AND token = ?",
            (msg_id, queue_id, token),
        )
        return int(row[0]) if row else None

    def release(self, msg_id: int, available_at: int, error: str | None) -> None:
        self.c.execute(
            "UPDATE messages SET lease_expires_at = NULL, token = NULL, available_at = ?, "
            "last_error = COALESCE(?, last_error) WHERE id = ?",
            (available_at, error, msg_id),
        )

    def dead_letter(
        self, msg_id: int, dlq: QueueRow, now: int, error: str | None, origin: str
    ) -> None:
        self.c.execute(
            "UPDATE messages SET queue_id = :dlq, lease_expires_at = NULL, token = NULL, "
            f"available_at = :now, expires_at = :exp, lifo = {self._bool(dlq.lifo)}, "
            "origin_queue = :origin, last_error = COALESCE(:err, last_error) WHERE id = :id",
            {"dlq": dlq.id, "now": now, "exp": now + dlq.retention_ms, "origin": origin,
             "err": error, "id": msg_id},
        )

    def extend(self, queue_id: int, msg_id: int, token: str, until: int) -> bool:
        return self._rowcount(
            "UPDATE messages SET lease_expires_at = ? WHERE id = ? AND queue_id = ? AND token = ?",
            (until, msg_id, queue_id, token),
        ) == 1

    # --- reads and admin ------------------------------------------------------------------------
    def peek(self, queue_id: int, lifo: bool, now: int, limit: int) -> list[MessageRow]:
        rows = self._all(
            self._ready_select(lifo, _MSG_COLS), {"q": queue_id, "now": now, "n": limit}
        )
        return [MessageRow._make(r) for r in rows]

    def get_message(self, queue_id: int, msg_id: int) -> MessageRow | None:
        row = self._one(
            f"SELECT {_MSG_COLS} FROM messages WHERE id = ? AND queue_id = ?", (msg_id, queue_id)
        )
        return MessageRow._make(row) if row else None

    def delete_message(self, queue_id: int, msg_id: int) -> bool:
        return self._rowcount(
            "DELETE FROM messages WHERE id = ? AND queue_id = ?", (msg_id, queue_id)
        ) == 1

    def purge(self, queue_id: int) -> int:
        return self._rowcount("DELETE FROM messages WHERE queue_id = ?", (queue_id,))

    def list_messages(self, queue_id: int, after_id: int, limit: int) -> list[MessageRow]:
        rows = self._all(
            f"SELECT {_MSG_COLS} FROM messages WHERE queue_id = ? AND id > ? ORDER BY id LIMIT ?",
            (queue_id, after_id, limit),
        )
        return [MessageRow._make(r) for r in rows]

    def move_all(self, from_id: int, to: QueueRow, ids: Sequence[int] | None, now: int) -> int:
        sql = (
            "UPDATE messages SET queue_id = :to, attempts = 0, lease_expires_at = NULL, "
            f"token = NULL, available_at = :now, expires_at = :exp, lifo = {self._bool(to.lifo)} "
            "WHERE queue_id = :from"
        )
        params: dict[str, Any] = {"to": to.id, "now": now, "exp": now + to.retention_ms,
                                  "from": from_id}
        if ids is None:
            return self._rowcount(sql, params)
        moved = 0
        for msg_id in ids:
            moved += self._rowcount(sql + " AND id = :id", {**params, "id": msg_id})
        return moved

    def next_due(self, queue_id: int, now: int) -> int | None:
        lease = self._one(
            "SELECT MIN(lease_expires_at) FROM messages WHERE queue_id = ? "
            "AND lease_expires_at IS NOT NULL AND expires_at > ?", (queue_id, now),
        )[0]
        avail = self._one(
            "SELECT MIN(available_at) FROM messages WHERE queue_id = ? "
            "AND lease_expires_at IS NULL AND expires_at > available_at AND expires_at > ?",
            (queue_id, now),
        )[0]
        due = [t for t in (lease, avail) if t is not None]
        return min(due) if due else None

    def counts(self, queue_id: int, now: int) -> tuple[int, int, int, int | None]:
        leased = self._one(
            "SELECT COUNT(*) FROM messages WHERE queue_id = ? AND lease_expires_at IS NOT NULL "
            "AND lease_expires_at > ? AND expires_at > ?",
            (queue_id, now, now),
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
            if first is not None and (oldest is None or first < oldest):
                oldest = first
        expired = self._one(
            "SELECT COUNT(*) FROM messages WHERE queue_id = ? AND expires_at <= ?",
            (queue_id, now),
        )[0]
        return int(leased), delayed, int(expired), oldest

    def reap_messages(self, queue_id: int, now: int, limit: int) -> int:
        return self._rowcount(
            "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE queue_id = :q "
            "AND expires_at <= :now LIMIT :n)",
            {"now": now, "q": queue_id, "n": limit},
        )

    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        where = "expires_at <= :now" + (" AND queue_id = :q" if queue_id is not None else "")
        return self._rowcount(
            f"DELETE FROM dedup WHERE rowid IN (SELECT rowid FROM dedup WHERE {where} LIMIT :n)",
            {"now": now, "q": queue_id, "n": limit},
        )
