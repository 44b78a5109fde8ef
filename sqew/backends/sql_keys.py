"""The API-key table's statements of ``SqlTx`` (dialect-neutral, ``:name`` parameters)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqew.backends.base import KeyRow

_KEY_COLS = ", ".join(KeyRow._fields)


class KeyStatements:
    """Storing, finding and removing API keys: a part of ``SqlTx``, which supplies the
    connection ``c`` and the helpers."""

    c: Any

    if TYPE_CHECKING:
        def _one(self, sql: str, params: Any = ()) -> Any: ...
        def _all(self, sql: str, params: Any = ()) -> list[Any]: ...
        def _rowcount(self, sql: str, params: Any = ()) -> int: ...

    def insert_key(self, row: KeyRow) -> None:
        marks = ", ".join(f":{k}" for k in KeyRow._fields)
        self.c.execute(f"INSERT INTO api_keys ({_KEY_COLS}) VALUES ({marks})", row._asdict())

    def get_key(self, key_id: str) -> KeyRow | None:
        row = self._one(f"SELECT {_KEY_COLS} FROM api_keys WHERE id = :id", {"id": key_id})
        return KeyRow._make(row) if row else None

    def list_keys(self) -> list[KeyRow]:
        rows = self._all(f"SELECT {_KEY_COLS} FROM api_keys ORDER BY created_at, id")
        return [KeyRow._make(r) for r in rows]

    def delete_key(self, key_id: str) -> bool:
        return self._rowcount("DELETE FROM api_keys WHERE id = :id", {"id": key_id}) > 0

    def delete_keys_of_queue(self, queue: str) -> int:
        return self._rowcount("DELETE FROM api_keys WHERE queue = :q", {"q": queue})

    def auth_required(self) -> bool:
        return self._one(
            "SELECT 1 FROM api_keys UNION ALL SELECT 1 FROM meta "
            "WHERE name = 'auth_required' AND value = '1' LIMIT 1"
        ) is not None

    def set_auth_required(self, required: bool) -> None:
        self.c.execute(
            "INSERT INTO meta (name, value) VALUES ('auth_required', :v) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            {"v": "1" if required else "0"},
        )

    def touch_keys(self, used: Sequence[tuple[str, int]]) -> None:
        self.c.executemany(
            "UPDATE api_keys SET last_used_at = :at WHERE id = :id",
            [{"id": key_id, "at": at} for key_id, at in used],
        )
