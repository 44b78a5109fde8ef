"""The reaper's statements of ``SqlTx``: expired messages, idempotency records and archived
messages past retention, a bounded number at a time (dialect-neutral, ``:name`` parameters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


class ReapStatements:
    """Deleting what has expired: a part of ``SqlTx``, which supplies the helpers."""

    if TYPE_CHECKING:
        def _rowcount(self, sql: str, params: Any = ()) -> int: ...

    def reap_messages(self, queue_id: int, now: int, limit: int) -> int:
        return self._rowcount(
            "DELETE FROM messages WHERE id IN (SELECT id FROM messages WHERE queue_id = :q "
            "AND expires_at <= :now LIMIT :n)",
            {"now": now, "q": queue_id, "n": limit},
        )

    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        # (queue_id, key) is the table's key (its unique constraint).
        where = "expires_at <= :now" + (" AND queue_id = :q" if queue_id is not None else "")
        return self._rowcount(
            "DELETE FROM dedup WHERE (queue_id, key) IN "
            f"(SELECT queue_id, key FROM dedup WHERE {where} LIMIT :n)",
            {"now": now, "q": queue_id, "n": limit},
        )

    def reap_archive(self, queue_id: int, acked_before: int, limit: int) -> int:
        # (queue_id, id) leads the archive's index: the inner select walks one queue's rows.
        return self._rowcount(
            "DELETE FROM archive WHERE id IN (SELECT id FROM archive WHERE queue_id = :q "
            "AND acked_at <= :before LIMIT :n)",
            {"q": queue_id, "before": acked_before, "n": limit},
        )

    def reap_archive_head(self, queue_id: int, acked_before: int, limit: int) -> int:
        # Reads at most ``limit`` index entries and rows, however large the archive.
        return self._rowcount(
            "DELETE FROM archive WHERE id IN (SELECT id FROM (SELECT id, acked_at FROM archive "
            "WHERE queue_id = :q ORDER BY id LIMIT :n) AS head WHERE acked_at <= :before)",
            {"q": queue_id, "before": acked_before, "n": limit},
        )
