"""Message move tasks' part of the storage contract (``sqew.backends.base.Tx``): the rows of
``move_tasks`` (the SQS endpoint's StartMessageMoveTask, docs/sqs.md). The core decides what a
task does (``sqew.core.move_tasks``); the storage keeps its state where every replica reads it.
"""

from __future__ import annotations

import abc
from typing import Any

from sqew.backends.rows import MoveTaskRow


class MoveTaskStatementsContract(abc.ABC):
    """The statements of a transaction on move tasks (a part of ``Tx``)."""

    @abc.abstractmethod
    def insert_move_task(self, row: MoveTaskRow) -> None:
        """Add a task."""

    @abc.abstractmethod
    def move_tasks(self, source: str | None, limit: int) -> list[MoveTaskRow]:
        """The tasks of queue ``source`` (None: of every queue, RUNNING ones only), newest
        first, at most ``limit``."""

    @abc.abstractmethod
    def get_move_task(self, handle: str) -> MoveTaskRow | None:
        """The task ``handle``, or None."""

    @abc.abstractmethod
    def update_move_task(self, handle: str, values: dict[str, Any]) -> None:
        """Set columns of task ``handle``."""
