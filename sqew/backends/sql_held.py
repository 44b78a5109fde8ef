"""The statements of ``SqlTx`` that act on a lease by its token: ack, nack (release or
dead-letter) and extend (dialect-neutral, ``:name`` parameters).

Each names the message by the lease it is held under and checks the token in the statement
that writes: another transaction may lease the message between a read and a write (see
``Tx``'s leases), and only the writing statement sees that lease once it committed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqew.backends.base import QueueRow
from sqew.backends.columns import ARCHIVED, INSERT_ARCHIVE

_HELD = "id = :id AND queue_id = :q AND token = :t"  # held under the lease of token :t
_ARCHIVE_ONE = f"{INSERT_ARCHIVE} VALUES ({', '.join(':' + c for c in ARCHIVED)}, :now)"


class HeldStatements:
    """Acting on held leases: a part of ``SqlTx``, which supplies the helpers."""

    if TYPE_CHECKING:
        c: Any
        def _one(self, sql: str, params: Any = ()) -> Any: ...
        def _rowcount(self, sql: str, params: Any = ()) -> int: ...
        def _bool(self, value: bool) -> str: ...

    def ack(self, queue_id: int, msg_id: int, token: str, archive: bool, now: int) -> bool:
        params = {"id": msg_id, "q": queue_id, "t": token}
        if not archive:
            return self._rowcount(f"DELETE FROM messages WHERE {_HELD}", params) == 1
        # Archived from what the delete took: a copy read before it could be of a message
        # whose lease another transaction took meanwhile (which the delete then leaves).
        row = self._one(f"DELETE FROM messages WHERE {_HELD} RETURNING {', '.join(ARCHIVED)}",
                        params)
        if row is not None:
            self.c.execute(_ARCHIVE_ONE, {**dict(zip(ARCHIVED, row, strict=True)), "now": now})
        return row is not None

    def message_exists(self, queue_id: int, msg_id: int) -> bool:
        return self._one(
            "SELECT 1 FROM messages WHERE id = :id AND queue_id = :q", {"id": msg_id, "q": queue_id}
        ) is not None

    def attempts_if_token(self, queue_id: int, msg_id: int, token: str) -> int | None:
        row = self._one(f"SELECT attempts FROM messages WHERE {_HELD}",
                        {"id": msg_id, "q": queue_id, "t": token})
        return int(row[0]) if row else None

    def release(
        self, queue_id: int, msg_id: int, token: str, available_at: int, error: str | None
    ) -> bool:
        return self._rowcount(
            "UPDATE messages SET lease_expires_at = NULL, token = NULL, available_at = :at, "
            f"last_error = COALESCE(:err, last_error) WHERE {_HELD}",
            {"at": available_at, "err": error, "id": msg_id, "q": queue_id, "t": token},
        ) == 1

    def dead_letter(
        self, queue_id: int, msg_id: int, token: str, dlq: QueueRow, now: int,
        error: str | None, origin: str,
    ) -> bool:
        return self._rowcount(
            "UPDATE messages SET queue_id = :dlq, lease_expires_at = NULL, token = NULL, "
            f"available_at = :now, expires_at = :exp, lifo = {self._bool(dlq.lifo)}, "
            f"origin_queue = :origin, last_error = COALESCE(:err, last_error) WHERE {_HELD}",
            {"dlq": dlq.id, "now": now, "exp": now + dlq.retention_ms, "origin": origin,
             "err": error, "id": msg_id, "q": queue_id, "t": token},
        ) == 1

    def extend(self, queue_id: int, items: Sequence[tuple[int, str, int]]) -> list[bool | None]:
        out: list[bool | None] = []
        for msg_id, token, until in items:
            params = {"until": until, "id": msg_id, "q": queue_id, "t": token}
            if self._rowcount(f"UPDATE messages SET lease_expires_at = :until WHERE {_HELD}",
                              params) == 1:
                out.append(True)
            else:
                out.append(False if self.message_exists(queue_id, msg_id) else None)
        return out
