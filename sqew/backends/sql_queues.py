"""The queue table's statements of ``SqlTx`` (dialect-neutral, ``:name`` parameters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from sqew.backends.base import QueueCounts, QueueLimits, QueueRow

_QUEUE_COLS = ", ".join(QueueRow._fields)
_LIMITS_COLS = ", ".join(QueueLimits._fields)
_COUNTERS = frozenset(
    {"depth", "enqueued_total", "acked_total", "nacked_total", "dead_lettered_total",
     "expired_total"}
)
_COUNTER_SQL: dict[tuple[str, ...], str] = {}
_ALL_COUNTS_SQL: dict[type, str] = {}
_COUNTS_FROM_ROW = QueueCounts._fields.index("leased")
"""QueueCounts' first fields are columns of the queue row."""


ENDED_LEASES = (
    "SELECT {key}SUM(CASE WHEN q.parent_id IS NULL AND m.attempts >= q.max_attempts THEN 1 "
    "ELSE 0 END) AS ending, MIN(CASE WHEN q.parent_id IS NOT NULL "
    "OR m.attempts < q.max_attempts THEN m.lease_expires_at END) AS oldest "
    "FROM messages m JOIN queues q ON q.id = m.queue_id WHERE {where} "
    "AND m.lease_expires_at IS NOT NULL AND m.lease_expires_at <= :now "
    "AND m.expires_at > :now{group}"
)
"""Of the unexpired messages whose lease ended at ``now``: how many had their last allowed
attempt (``ending``: the next poll moves them to the DLQ) and when the first of the others
became ready again (``oldest``: its lease's end). ``{where}`` picks the messages (``m``),
``{key}`` and ``{group}`` group them by queue."""


class QueueStatements:
    """Finding, creating, changing and counting queues: a part of ``SqlTx``, which supplies
    the connection ``c`` and the helpers."""

    c: Any
    TRUE: ClassVar[str]
    FALSE: ClassVar[str]

    if TYPE_CHECKING:
        def _one(self, sql: str, params: Any = ()) -> Any: ...
        def _all(self, sql: str, params: Any = ()) -> list[Any]: ...
        def _bool(self, value: bool) -> str: ...

    def get_queue(self, name: str) -> QueueRow | None:
        row = self._one(f"SELECT {_QUEUE_COLS} FROM queues WHERE name = :name", {"name": name})
        return QueueRow._make(row) if row else None

    def get_queue_by_id(self, queue_id: int) -> QueueRow | None:
        row = self._one(f"SELECT {_QUEUE_COLS} FROM queues WHERE id = :id", {"id": queue_id})
        return QueueRow._make(row) if row else None

    def list_queues(self) -> list[QueueRow]:
        rows = self._all(f"SELECT {_QUEUE_COLS} FROM queues ORDER BY name")
        return [QueueRow._make(r) for r in rows]

    def queues_to_reap(self, now: int, limit: int) -> list[str]:
        # Seeks per queue: ix_messages_expiry, ix_messages_leased (its partial condition
        # spelled out), and at most ``limit`` entries of ix_archive_queue_id.
        rows = self._all(
            "SELECT q.name FROM queues q WHERE EXISTS (SELECT 1 FROM messages m "
            "WHERE m.queue_id = q.id AND m.expires_at <= :now) "
            "OR (q.parent_id IS NULL AND EXISTS (SELECT 1 FROM messages m "
            "WHERE m.queue_id = q.id AND m.lease_expires_at IS NOT NULL "
            "AND m.lease_expires_at <= :now AND m.attempts >= q.max_attempts)) "
            f"OR (q.archive = {self.TRUE} AND EXISTS (SELECT 1 FROM (SELECT a.acked_at "
            "FROM archive a WHERE a.queue_id = q.id ORDER BY a.id LIMIT :n) head "
            "WHERE head.acked_at <= :now - q.retention_ms)) ORDER BY q.name",
            {"now": now, "n": limit},
        )
        return [str(r[0]) for r in rows]

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
        # The messages first, by this statement: PostgreSQL has no key from them to their
        # queue to cascade (schema.MESSAGES_QUEUE_KEY). The rest cascades.
        params = {"id": queue_id}
        self.c.execute("DELETE FROM messages WHERE queue_id IN (SELECT id FROM queues "
                       "WHERE id = :id OR parent_id = :id)", params)
        self.c.execute("DELETE FROM queues WHERE id = :id OR parent_id = :id", params)

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

    def reserve(self, name: str, count: int) -> QueueLimits | None:
        row = self._one(
            "UPDATE queues SET depth = depth + :n, enqueued_total = enqueued_total + :n "
            f"WHERE name = :name RETURNING {_LIMITS_COLS}",
            {"n": count, "name": name},
        )
        return QueueLimits._make(row) if row else None

    def all_counts(self, now: int) -> list[QueueCounts]:
        # One statement for every queue: the leased and expired counts are seeks per queue
        # (correlated, on ix_messages_leased and ix_messages_expiry); the delayed count and
        # the oldest ready message need the unleased messages, read once per claim index in
        # index order (grouped by queue_id, the index's first column), as ``counts`` does;
        # the ended leases (few) are read once, grouped. As CTEs: written as subqueries in
        # FROM, SQLite scanned ix_messages_expiry instead (and read every message's row).
        out: list[QueueCounts] = []
        for r in self._all(self._all_counts_sql(), {"now": now}):
            *head, leased, expired, delayed_f, oldest_f, delayed_l, oldest_l, ending, oldest_e = r
            oldest = min((int(t) for t in (oldest_f, oldest_l, oldest_e) if t is not None),
                         default=None)
            out.append(QueueCounts._make((
                *head, int(leased), int(delayed_f or 0) + int(delayed_l or 0), int(expired),
                int(ending or 0), oldest,
            )))
        return out

    def _all_counts_sql(self) -> str:
        sql = _ALL_COUNTS_SQL.get(type(self))
        if sql is None:
            cols = ", ".join(f"q.{c}" for c in QueueCounts._fields[:_COUNTS_FROM_ROW])

            def unleased(lifo: str) -> str:
                return (
                    "SELECT queue_id, "
                    "SUM(CASE WHEN available_at > :now THEN 1 ELSE 0 END) AS delayed, "
                    "MIN(CASE WHEN available_at <= :now THEN available_at END) AS oldest "
                    "FROM messages WHERE lease_expires_at IS NULL "
                    f"AND lifo = {lifo} AND +expires_at > :now GROUP BY queue_id"
                )

            ended = ENDED_LEASES.format(key="m.queue_id, ", where=self.TRUE,
                                        group=" GROUP BY m.queue_id")
            sql = _ALL_COUNTS_SQL[type(self)] = (
                f"WITH f AS ({unleased(self.FALSE)}), l AS ({unleased(self.TRUE)}), "
                f"e AS ({ended}) "
                f"SELECT {cols}, "
                "(SELECT COUNT(*) FROM messages m WHERE m.queue_id = q.id "
                "AND m.lease_expires_at IS NOT NULL AND m.lease_expires_at > :now "
                "AND m.expires_at > :now), "
                "(SELECT COUNT(*) FROM messages m WHERE m.queue_id = q.id "
                "AND m.expires_at <= :now), "
                "f.delayed, f.oldest, l.delayed, l.oldest, e.ending, e.oldest FROM queues q "
                "LEFT JOIN f ON f.queue_id = q.id LEFT JOIN l ON l.queue_id = q.id "
                "LEFT JOIN e ON e.queue_id = q.id ORDER BY q.name"
            )
        return sql

    def set_messages_lifo(self, queue_id: int, lifo: bool) -> None:
        self.c.execute(
            f"UPDATE messages SET lifo = {self._bool(lifo)} WHERE queue_id = :q", {"q": queue_id}
        )
