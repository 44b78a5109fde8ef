"""Message move tasks (the SQS endpoint's StartMessageMoveTask, docs/sqs.md): move the messages
of a dead-letter queue to a destination queue, or each back to the queue it came from
(``origin_queue``), attempts reset, at most ``max_per_s`` a second.

A task's state is a row of ``move_tasks``, so every replica sees it. The server process that
leads the reaper runs the tasks (``MoveTaskMethods.run_move_tasks``, from its background
timer): each step is a transaction of its own that moves what the task's rate allows since its
last step, so a task cancelled between steps stops there, and a leader that dies leaves the
task to the next one.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from sqew import errors
from sqew.backends.base import QueueRow, Tx
from sqew.backends.rows import MoveTaskRow
from sqew.core.dead_letters import sources_of
from sqew.core.delivering import queue_row
from sqew.core.writer import Op, Writer

T = TypeVar("T")
MoveTask = MoveTaskRow
"""A task as the service answers it: its row."""
RUNNING, COMPLETED, CANCELLED, FAILED = "RUNNING", "COMPLETED", "CANCELLED", "FAILED"
STEP_MOST = 1000
"""The most messages one step moves (a task with no rate moves this many a step)."""
LISTED_MOST = 1000


class TaskStateError(errors.ValidationError):
    """A task's state forbids the request: a second running task of a source, or a cancel of
    a task that is not running."""


def is_dead_letter_queue(tx: Tx, q: QueueRow) -> bool:
    """Whether ``q`` is a dead-letter queue: a ``<name>.dlq``, or a queue some other names as
    its dead-letter target."""
    return q.parent_id is not None or bool(sources_of(tx, q.name))


class StartMoveTask(Op[MoveTaskRow]):
    """Start a task moving the messages of DLQ ``source`` to ``destination`` (None: each to
    its origin queue). Locks the source's row, so two starts of one source take turns."""

    __slots__ = ("destination", "max_per_s", "source")

    def __init__(self, source: str, destination: str | None, max_per_s: int | None) -> None:
        self.source = source
        self.destination = destination
        self.max_per_s = max_per_s

    def queues(self) -> tuple[str, ...] | None:
        return (self.source,)

    def run(self, tx: Tx, now: int) -> MoveTaskRow:
        src = queue_row(tx, self.source)
        if not is_dead_letter_queue(tx, src):
            raise errors.ValidationError(f"'{src.name}' is not a dead-letter queue")
        if self.destination is not None:
            queue_row(tx, self.destination)  # (QueueNotFound)
            if self.destination == src.name:
                raise errors.ValidationError("the destination is the source queue")
        if any(t.status == RUNNING for t in tx.move_tasks(src.name, LISTED_MOST)):
            raise TaskStateError(f"a move task of '{src.name}' is running already")
        row = MoveTaskRow(handle=secrets.token_hex(16), source=src.name,
                          destination=self.destination, max_per_s=self.max_per_s,
                          status=RUNNING, moved=0, to_move=src.depth, started_at=now,
                          stepped_at=now, failure_reason=None)
        tx.insert_move_task(row)
        return row


class CancelMoveTask(Op[MoveTaskRow]):
    """Cancel the running task ``handle`` (what it moved stays moved). Locks its source's
    row, as a step does, so a cancel falls between two steps."""

    __slots__ = ("handle",)

    def __init__(self, handle: str) -> None:
        self.handle = handle

    def lock_names(self, tx: Tx) -> tuple[str, ...] | None:
        task = tx.get_move_task(self.handle)
        return (task.source,) if task is not None else ()

    def run(self, tx: Tx, now: int) -> MoveTaskRow:
        task = tx.get_move_task(self.handle)
        if task is None:
            raise errors.NotFound("no such move task")
        if task.status != RUNNING:
            raise TaskStateError(f"the move task is {task.status}, not RUNNING")
        tx.update_move_task(task.handle, {"status": CANCELLED})
        return task._replace(status=CANCELLED)


class MoveStep(Op[MoveTaskRow | None]):
    """One step of the running task ``handle``: move what its rate allows since its last
    step (at most ``STEP_MOST``), in one transaction that locks the source and the
    destinations in id order (read before the lock: a destination seen only under the lock
    waits for the next step)."""

    __slots__ = ("handle", "locked", "notify")

    def __init__(self, handle: str) -> None:
        self.handle = handle
        self.notify: tuple[str, ...] = ()
        self.locked: frozenset[str] = frozenset()  # what the transaction locked first

    def lock_names(self, tx: Tx) -> tuple[str, ...] | None:
        task = tx.get_move_task(self.handle)
        if task is None or task.status != RUNNING:
            return ()
        names = (task.source, *self._plan(tx, task, STEP_MOST))
        self.locked = frozenset(names)
        return names

    def _plan(self, tx: Tx, task: MoveTaskRow, budget: int) -> dict[str, list[int]]:
        """The ids of the next ``budget`` messages of the source, by destination name."""
        src = tx.get_queue(task.source)
        if src is None:
            return {}
        parent = tx.get_queue_by_id(src.parent_id) if src.parent_id is not None else None
        plan: dict[str, list[int]] = defaultdict(list)
        for m in tx.list_messages(src.id, 0, budget):
            dest = task.destination or m.origin_queue or (parent.name if parent else None)
            plan[dest or ""].append(m.id)
        return plan

    def run(self, tx: Tx, now: int) -> MoveTaskRow | None:
        task = tx.get_move_task(self.handle)
        if task is None or task.status != RUNNING:
            return None  # (cancelled, or finished by another step)
        src = tx.get_queue(task.source)
        if src is None:
            return self._end(tx, task, FAILED, "The source queue no longer exists.")
        budget = STEP_MOST if task.max_per_s is None else min(
            STEP_MOST, task.max_per_s * max(now - task.stepped_at, 0) // 1000)
        if budget < 1:
            return task  # (too soon for the task's rate)
        plan = self._plan(tx, task, budget)
        moved = 0
        for name, ids in sorted(plan.items()):
            dest = tx.get_queue(name) if name else None
            if dest is None:
                reason = (f"The destination queue {name} no longer exists." if name else
                          "A message has no origin queue and the task no destination.")
                return self._end(tx, task, FAILED, reason, moved)
            if name not in self.locked:
                continue  # (seen only now: locked, in order, by the next step)
            room = max(dest.max_depth - dest.depth, 0) if dest.max_depth else None
            n, _ = tx.move_all(src.id, dest, ids, now, room)
            tx.add_counters(src.id, depth=-n)
            tx.add_counters(dest.id, depth=n)
            moved += n
            if n:
                self.notify = (*self.notify, dest.name)
        done = task.moved + moved >= task.to_move or src.depth - moved <= 0
        if done:
            return self._end(tx, task, COMPLETED, None, moved)
        values = {"moved": task.moved + moved, "stepped_at": now}
        tx.update_move_task(task.handle, values)
        return task._replace(moved=task.moved + moved, stepped_at=now)

    @staticmethod
    def _end(tx: Tx, task: MoveTaskRow, status: str, reason: str | None,
             moved: int = 0) -> MoveTaskRow:
        values = {"status": status, "failure_reason": reason, "moved": task.moved + moved}
        tx.update_move_task(task.handle, values)
        return task._replace(status=status, failure_reason=reason, moved=task.moved + moved)


class MoveTaskMethods:
    """``QueueService``'s methods on move tasks (a part of it, which supplies the reads and
    the writer)."""

    _writer: Writer

    if TYPE_CHECKING:
        async def _read_now(self, fn: Callable[[Tx, int], T]) -> T: ...

    async def start_move_task(self, source: str, destination: str | None,
                              max_per_s: int | None) -> MoveTaskRow:
        """Start moving the messages of dead-letter queue ``source`` to ``destination``
        (None: each back to its origin queue), at most ``max_per_s`` a second (None: as fast
        as the steps go).

        Raises:
            sqew.errors.QueueNotFound: no such source or destination.
            sqew.errors.ValidationError: ``source`` is no dead-letter queue.
            TaskStateError: a task of ``source`` is running already.
        """
        return await self._writer.write(StartMoveTask(source, destination, max_per_s))

    async def move_tasks(self, source: str, limit: int) -> list[MoveTaskRow]:
        """The tasks of queue ``source``, newest first, at most ``limit``."""
        return await self._read_now(lambda tx, now: tx.move_tasks(source, limit))

    async def cancel_move_task(self, handle: str) -> MoveTaskRow:
        """Cancel the running task ``handle``.

        Raises:
            sqew.errors.NotFound: no such task.
            TaskStateError: the task is not running.
        """
        return await self._writer.write(CancelMoveTask(handle))

    async def run_move_tasks(self) -> int:
        """A step of every running task (the reaper's leader calls it on its timer): how
        many tasks are running."""
        running = await self._read_now(lambda tx, now: tx.move_tasks(None, LISTED_MOST))
        for task in running:
            await self._writer.write(MoveStep(task.handle))
        return len(running)
