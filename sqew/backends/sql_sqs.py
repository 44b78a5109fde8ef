"""The SQS data's statements of ``SqlTx`` (dialect-neutral, ``:name`` parameters)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


class SqsStatements:
    """Reading and replacing a queue's SQS data (``queues.sqs``): a part of ``SqlTx``, which
    supplies the connection ``c`` and the helpers."""

    c: Any

    if TYPE_CHECKING:
        def _one(self, sql: str, params: Any = ()) -> Any: ...

    def get_sqs_data(self, queue_id: int) -> str | None:
        row = self._one("SELECT sqs FROM queues WHERE id = :id", {"id": queue_id})
        return None if row is None else row[0]

    def set_sqs_data(self, queue_id: int, data: str | None) -> None:
        self.c.execute("UPDATE queues SET sqs = :d WHERE id = :id", {"d": data, "id": queue_id})
