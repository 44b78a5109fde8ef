"""What a push stream (``GET /queues/{q}/stream``, ``Client.stream``) needs of the core beyond
polls: which of its leases are still held, and giving leases back at once.

A stream holds at most ``max_in_flight`` leases. Acks, nacks and heartbeats of its messages
go through the usual calls, from anywhere, so the stream learns that a slot is free by asking
(``held``) rather than by being told. Giving back (``GiveBack``) is what a closing stream
does with the leases it still holds: each message is ready again at once in its place, its
attempt not counted (docs/consumers.md#the-stream).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqew import models
from sqew.backends.base import Tx
from sqew.core.delivering import queue_row
from sqew.core.rules import check_range
from sqew.core.writer import Op, Writer

Leases = Sequence[tuple[int, str]]
"""``(message id, lease token)`` pairs."""


def held(tx: Tx, queue: str, leases: Leases, now: int) -> dict[int, int]:
    """Of ``leases``, those still held: leased under their token, the lease not ended; each
    id with when its lease ends now (a heartbeat may have moved it)."""
    q = queue_row(tx, queue)
    out: dict[int, int] = {}
    for msg_id, token in leases:
        row = tx.get_message(q.id, msg_id)
        if (row is not None and row.token == token and row.lease_expires_at is not None
                and row.lease_expires_at > now):
            out[msg_id] = row.lease_expires_at
    return out


class GiveBack(Op[None]):
    """End the leases of ``leases`` still held under their tokens as if never made: lease
    and token cleared, the attempt not counted, the message ready again in its place.
    Leases already settled (acked, nacked, ended, leased again) are left alone."""

    __slots__ = ("leases", "notify", "queue")

    def __init__(self, queue: str, leases: Leases) -> None:
        self.queue = queue
        self.leases = leases
        self.notify = (queue,)  # ready again: wake the queue's waiting polls

    def run(self, tx: Tx, now: int) -> None:
        queue_row(tx, self.queue)  # (QueueNotFound, as for any call on a queue)
        if self.leases:
            tx.unclaim(self.leases)


class StreamMethods:
    """``QueueService``'s methods for streams (a part of it, which supplies the reads and the
    writer)."""

    _writer: Writer

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[Tx, int], dict[int, int]]) -> dict[int, int]: ...

    async def held(self, queue: str, leases: Leases) -> dict[int, int]:
        """Of ``(id, token)`` leases, the ids still held, each with its lease's end."""
        check_range("leases", len(leases), 0, models.MAX_STREAM_IN_FLIGHT)
        return await self._read(lambda tx, now: held(tx, queue, leases, now))

    async def give_back(self, queue: str, leases: Leases) -> None:
        """Give back ``(id, token)`` leases at once, their attempts not counted."""
        check_range("leases", len(leases), 0, models.MAX_STREAM_IN_FLIGHT)
        await self._writer.write(GiveBack(queue, leases))
