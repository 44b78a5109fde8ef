"""The scan's statements of ``SqlTx`` (export: messages and the archive by id, read-only;
dialect-neutral, ``:name`` parameters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqew.backends.base import MessageRow
from sqew.backends.columns import MESSAGE as _MSG_COLS


class ScanStatements:
    """Paging a queue's messages or archive by id: a part of ``SqlTx``, which supplies the
    helpers."""

    if TYPE_CHECKING:
        def _one(self, sql: str, params: Any = ()) -> Any: ...
        def _all(self, sql: str, params: Any = ()) -> list[Any]: ...

    def scan_messages(
        self, queue_id: int, after_id: int, max_id: int, now: int, limit: int
    ) -> list[MessageRow]:
        # ``+queue_id``: walk the primary key from ``after`` (SQLite would otherwise pick the
        # (queue_id, expires_at) index and sort every message of the queue for each page).
        rows = self._all(
            f"SELECT {_MSG_COLS} FROM messages WHERE +queue_id = :q AND id > :after "
            "AND id <= :max AND expires_at > :now ORDER BY id LIMIT :n",
            {"q": queue_id, "after": after_id, "max": max_id, "now": now, "n": limit},
        )
        return [MessageRow._make(r) for r in rows]

    def scan_archive(
        self, queue_id: int, after_id: int, max_id: int, retention_ms: int, limit: int
    ) -> list[MessageRow]:
        rows = self._all(
            "SELECT id, queue_id, payload, priority, attributes, attempts, enqueued_at, "
            "acked_at, acked_at + :ret, last_error, NULL, NULL, NULL, traceparent, tracestate, "
            "NULL FROM archive "
            "WHERE queue_id = :q AND id > :after AND id <= :max ORDER BY id LIMIT :n",
            {"q": queue_id, "after": after_id, "max": max_id, "ret": retention_ms, "n": limit},
        )
        return [MessageRow._make(r) for r in rows]

    def idempotency_keys(
        self, queue_id: int, first_id: int, last_id: int, now: int
    ) -> dict[int, str]:
        rows = self._all(
            "SELECT message_id, key FROM dedup WHERE queue_id = :q AND message_id >= :first "
            "AND message_id <= :last AND expires_at > :now",
            {"q": queue_id, "first": first_id, "last": last_id, "now": now},
        )
        return {int(r[0]): str(r[1]) for r in rows}

    def high_water(self, queue_id: int, archive: bool) -> int | None:
        # Newest first and the first that matches: a backward walk of the primary key that
        # stops at once on a queue with recent messages (MAX(id) with this filter reads them
        # all on SQLite: no index leads with (queue_id, id)).
        # ``+queue_id`` keeps SQLite on that walk for messages (not the expiry index and a
        # sort); the archive's (queue_id, id) index serves it directly.
        column = "queue_id" if archive else "+queue_id"
        table = "archive" if archive else "messages"
        row = self._one(
            f"SELECT id FROM {table} WHERE {column} = :q ORDER BY id DESC LIMIT 1",
            {"q": queue_id},
        )
        return None if row is None else int(row[0])
