"""The move tasks' statements of ``SqlTx`` (dialect-neutral, ``:name`` parameters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqew.backends.rows import MoveTaskRow

_COLS = ", ".join(MoveTaskRow._fields)
_SETTABLE = frozenset({"status", "moved", "to_move", "stepped_at", "failure_reason"})


class MoveTaskStatements:
    """The rows of ``move_tasks``: a part of ``SqlTx``, which supplies the connection ``c``
    and the helpers."""

    c: Any

    if TYPE_CHECKING:
        def _one(self, sql: str, params: Any = ()) -> Any: ...
        def _all(self, sql: str, params: Any = ()) -> list[Any]: ...

    def insert_move_task(self, row: MoveTaskRow) -> None:
        marks = ", ".join(f":{name}" for name in MoveTaskRow._fields)
        self.c.execute(f"INSERT INTO move_tasks ({_COLS}) VALUES ({marks})", row._asdict())

    def move_tasks(self, source: str | None, limit: int) -> list[MoveTaskRow]:
        where = "source = :s" if source is not None else "status = 'RUNNING'"
        rows = self._all(f"SELECT {_COLS} FROM move_tasks WHERE {where} "
                         "ORDER BY started_at DESC, handle LIMIT :n", {"s": source, "n": limit})
        return [MoveTaskRow._make(r) for r in rows]

    def get_move_task(self, handle: str) -> MoveTaskRow | None:
        row = self._one(f"SELECT {_COLS} FROM move_tasks WHERE handle = :h", {"h": handle})
        return MoveTaskRow._make(row) if row else None

    def update_move_task(self, handle: str, values: dict[str, Any]) -> None:
        names = sorted(values)
        if not set(names) <= _SETTABLE:  # (column names are never the caller's text)
            raise ValueError(f"not a settable column of move_tasks: {names}")
        sets = ", ".join(f"{n} = :{n}" for n in names)
        self.c.execute(f"UPDATE move_tasks SET {sets} WHERE handle = :_h",
                       {**values, "_h": handle})
