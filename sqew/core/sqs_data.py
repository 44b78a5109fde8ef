"""The SQS endpoint's data of a queue (docs/sqs.md): what the endpoint keeps of a queue that
sqew's settings have no field for (tags, queue-level delay and receive wait), one JSON object
per queue, kept with the queue's row and removed with it. The core reads it and changes it in
one transaction; what the object holds is the endpoint's business (``sqew.sqs.meta``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from sqew.backends.base import Tx
from sqew.core.delivering import queue_row
from sqew.core.writer import Op, Writer

Data = dict[str, Any]
Change = Callable[[Data], Data]
"""The change of a queue's data: the new object from the current one (it may raise, and then
nothing changes)."""


def read(tx: Tx, name: str) -> Data:
    """The data of queue ``name`` (``QueueNotFound`` if there is none; ``{}``: none kept)."""
    return _decoded(tx.get_sqs_data(queue_row(tx, name).id))


def _decoded(text: str | None) -> Data:
    if not text:
        return {}
    data = msgspec.json.decode(text)
    return data if isinstance(data, dict) else {}


class ChangeSqsData(Op[Data]):
    """Change a queue's data with ``change``, read and written in one transaction."""

    __slots__ = ("change", "name")

    def __init__(self, name: str, change: Change) -> None:
        self.name = name
        self.change = change

    def run(self, tx: Tx, now: int) -> Data:
        row = queue_row(tx, self.name)
        data = self.change(_decoded(tx.get_sqs_data(row.id)))
        tx.set_sqs_data(row.id, msgspec.json.encode(data).decode() if data else None)
        return data


class SqsDataMethods:
    """``QueueService``'s methods on the SQS data (a part of it, which supplies the reads and
    the writer)."""

    _writer: Writer

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[Tx, int], Data]) -> Data: ...

    async def sqs_data(self, name: str) -> Data:
        """What the SQS endpoint keeps of queue ``name`` (``{}``: nothing)."""
        return await self._read(lambda tx, now: read(tx, name))

    async def change_sqs_data(self, name: str, change: Change) -> Data:
        """Change what the SQS endpoint keeps of queue ``name``, in one transaction."""
        return await self._writer.write(ChangeSqsData(name, change))
