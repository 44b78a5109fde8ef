"""The reaper's part of the storage contract (``sqew.backends.base.Tx``): what is due for
removal (expired messages and idempotency records, archived messages past retention), found
and deleted in bounded steps (``sqew.core.maintenance``)."""

from __future__ import annotations

import abc


class ReapStatementsContract(abc.ABC):
    """The reaper's statements of a transaction (a part of ``Tx``)."""

    @abc.abstractmethod
    def queues_to_reap(self, now: int, limit: int) -> list[str]:
        """The names, in order, of the queues with work for the reaper at ``now``, in one
        statement: expired messages; messages whose last allowed lease ended (not in a DLQ);
        archiving, archived messages past retention among the ``limit`` with the smallest ids.
        (Idempotency records are reaped for all queues at once.)"""

    @abc.abstractmethod
    def reap_messages(self, queue_id: int, now: int, limit: int) -> int:
        """Delete up to ``limit`` expired messages of a queue; returns how many."""

    @abc.abstractmethod
    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        """Delete up to ``limit`` expired idempotency records; returns how many."""

    @abc.abstractmethod
    def reap_archive(self, queue_id: int, acked_before: int, limit: int) -> int:
        """Delete up to ``limit`` archived messages of a queue acked at or before
        ``acked_before`` (past the queue's retention); returns how many."""

    @abc.abstractmethod
    def reap_archive_head(self, queue_id: int, acked_before: int, limit: int) -> int:
        """Of the ``limit`` archived messages of a queue with the smallest ids, delete those
        acked at or before ``acked_before``; returns how many (bounded work for the reaper:
        the archive has no index on ``acked_at``)."""
