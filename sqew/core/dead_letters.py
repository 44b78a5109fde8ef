"""A queue's dead-letter target: the queue its messages move to when they have used up their
attempts (``max_attempts``) or are nacked with ``dead_letter``, and when their last allowed
lease ends (a poll or the reaper finds them).

By default that is the queue's own ``<name>.dlq``; a queue may name any other queue instead
(the SQS endpoint's ``RedrivePolicy``, docs/sqs.md). The moves themselves all go through
``sqew.core.delivering.dead_letter_target``; each dead-lettered message keeps the name of the
queue it came from (``origin_queue``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqew import errors, models
from sqew.backends.base import Tx
from sqew.core import rules, views
from sqew.core.delivering import queue_row
from sqew.core.writer import Op, Writer


def sources_of(tx: Tx, name: str) -> list[str]:
    """The queues that dead-letter into queue ``name``, by name: those naming it as their
    target, and for a ``<q>.dlq`` its queue ``q`` when ``q`` names no other."""
    return [q.name for q in tx.list_queues() if q.parent_id is None and (
        q.dead_letter_target or rules.dlq_name(q.name)) == name]


class SetDeadLetterTarget(Op[models.Queue]):
    """Make queue ``name`` dead-letter into queue ``target`` (None: its own ``.dlq``)."""

    __slots__ = ("name", "target")

    def __init__(self, name: str, target: str | None) -> None:
        self.name = name
        self.target = target

    def queues(self) -> tuple[str, ...] | None:
        return (self.name,)

    def run(self, tx: Tx, now: int) -> models.Queue:
        row = queue_row(tx, self.name)
        if row.parent_id is not None:
            raise errors.ValidationError(
                f"'{row.name}' is a dead-letter queue: it has no dead-letter target")
        target = self.target
        if target == rules.dlq_name(row.name):
            target = None  # (its own DLQ: the default, kept as such)
        if target == row.name:
            raise errors.ValidationError(
                f"'{row.name}' cannot be its own dead-letter target",
                details=[{"field": "dead_letter_target", "message": "names the queue itself"}])
        if target is not None:
            queue_row(tx, target)  # (QueueNotFound)
        tx.update_queue(row.id, {"dead_letter_target": target})
        updated = tx.get_queue_by_id(row.id)
        assert updated is not None
        return views.queue(updated)


class DeadLetterMethods:
    """``QueueService``'s methods on dead-letter targets (a part of it, which supplies the
    writer)."""

    _writer: Writer

    if TYPE_CHECKING:
        async def _read(self, fn: Callable[[Tx, int], list[str]]) -> list[str]: ...

    async def set_dead_letter_target(self, name: str, target: str | None) -> models.Queue:
        """Make queue ``name`` dead-letter into the existing queue ``target`` (None: into its
        own ``<name>.dlq`` again). A target removed later is forgotten: the queue's own DLQ
        takes its place.

        Raises:
            sqew.errors.QueueNotFound: no queue ``name``, or no queue ``target``.
            sqew.errors.ValidationError: ``name`` is a DLQ, or ``target`` is ``name``.
        """
        return await self._writer.write(SetDeadLetterTarget(name, target))

    async def dead_letter_sources(self, name: str) -> list[str]:
        """The queues that dead-letter into queue ``name``, by name: those naming it as
        their target, and for a ``<q>.dlq`` its queue ``q`` when ``q`` names no other."""
        return await self._read(lambda tx, now: sources_of(tx, name))
