"""The SQS endpoint's data of a queue (docs/sqs.md): what the endpoint keeps of a queue that
sqew's settings have no field for (tags, queue-level delay and receive wait), one JSON object
per queue, kept with the queue's row and removed with it. The core reads it and changes it in
one transaction; what the object holds is the endpoint's business (``sqew.sqs.meta``).

A send or a receive reads a queue's data for its default delay or wait: ``recent_sqs_data``
answers it from a copy this process read less than ``max_age_ms`` ago. The copies are dropped
whenever this process changes a queue's data or creates or removes a queue (a read under way
then keeps nothing), so here a change shows at once; a change made by another process (another
worker, another replica) shows once the copy ages out.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from sqew.backends.base import Tx
from sqew.core.delivering import queue_row
from sqew.core.writer import Op, Writer

Data = dict[str, Any]
T = TypeVar("T")
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


class Copies:
    """This process's recent copies of queues' data: name -> (read at, in ms of
    ``time.monotonic``, the data), and a generation that each drop moves on."""

    __slots__ = ("by_name", "generation")

    def __init__(self) -> None:
        self.by_name: dict[str, tuple[float, Data]] = {}
        self.generation = 0

    def drop(self) -> None:
        """Forget every copy; a read under way keeps nothing."""
        self.by_name.clear()
        self.generation += 1


class SqsDataMethods:
    """``QueueService``'s methods on the SQS data (a part of it, which supplies the reads and
    the writer)."""

    _writer: Writer
    _sqs_copies: Copies | None = None

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[Tx, int], Data]) -> Data: ...

    async def sqs_data(self, name: str) -> Data:
        """What the SQS endpoint keeps of queue ``name`` (``{}``: nothing)."""
        return await self._read(lambda tx, now: read(tx, name))

    async def recent_sqs_data(self, name: str, max_age_ms: int) -> Data:
        """``sqs_data``, or this process's copy of it if read less than ``max_age_ms`` ago
        (see the module's docstring). The caller must not change what it is given."""
        copies = self._copies()
        now = time.monotonic() * 1000
        got = copies.by_name.get(name)
        if got is not None and now - got[0] < max_age_ms:
            return got[1]
        generation = copies.generation
        data = await self.sqs_data(name)
        if copies.generation == generation:
            copies.by_name[name] = (now, data)
        return data

    async def change_sqs_data(self, name: str, change: Change) -> Data:
        """Change what the SQS endpoint keeps of queue ``name``, in one transaction."""
        try:
            return await self._writer.write(ChangeSqsData(name, change))
        finally:
            self.drop_sqs_copies()

    def drop_sqs_copies(self) -> None:
        """Forget the copies ``recent_sqs_data`` keeps (a queue's data changed here)."""
        self._copies().drop()

    async def sqs_data_gone(self, write: Awaitable[T]) -> T:
        """The result of ``write``, which makes or removes a queue here; then the copies of
        ``recent_sqs_data`` are dropped (a new queue of a removed one's name has no data)."""
        try:
            return await write
        finally:
            self.drop_sqs_copies()

    def _copies(self) -> Copies:
        if self._sqs_copies is None:
            self._sqs_copies = Copies()
        return self._sqs_copies
