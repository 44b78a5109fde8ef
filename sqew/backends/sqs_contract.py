"""The SQS endpoint's part of the storage contract (``sqew.backends.base.Tx``): what the endpoint
keeps of a queue that sqew's settings have no field for (docs/sqs.md), one JSON text per queue
in ``queues.sqs``. The core reads and changes it (``sqew.core.sqs_data``); the storage only keeps
the text. Its message move tasks' state is part of it too (``move_contract``)."""

from __future__ import annotations

import abc

from sqew.backends.move_contract import MoveTaskStatementsContract


class SqsStatementsContract(MoveTaskStatementsContract, abc.ABC):
    """The statements of a transaction on a queue's SQS data (a part of ``Tx``)."""

    @abc.abstractmethod
    def get_sqs_data(self, queue_id: int) -> str | None:
        """The SQS data (JSON text) of queue ``queue_id``; None when it has none."""

    @abc.abstractmethod
    def set_sqs_data(self, queue_id: int, data: str | None) -> None:
        """Replace the SQS data of queue ``queue_id`` (None: none)."""
