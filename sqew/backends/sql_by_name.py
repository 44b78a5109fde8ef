"""The writes of ``SqlTx`` that find their queue by name (enqueue, claim, ack), composed of
its single statements, and the claim's undo.

A backend where a round trip costs more than a statement (PostgreSQL) replaces each with one
statement (``sqew.backends.postgres.by_name``) and falls back on these where that statement's
assumptions about the queue do not hold; on SQLite, where a statement is a function call,
these compositions are the fast way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqew.backends.base import ClaimQueue, MessageRow, NewMessage, QueueLimits, QueueRow


class ByNameStatements:
    """``Tx.enqueue_by_name``, ``Tx.claim_by_name`` and ``Tx.ack_by_name`` as sequences of the
    contract's own statements: a part of ``SqlTx``."""

    if TYPE_CHECKING:
        c: Any
        def reserve(self, name: str, count: int) -> QueueLimits | None: ...
        def add_counters(self, queue_id: int, **deltas: int) -> None: ...
        def add_counters_by_name(self, name: str, **deltas: int) -> QueueRow | None: ...
        def get_queue_for_claim(self, name: str, now: int) -> tuple[QueueRow, bool] | None: ...
        def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]: ...
        def claim(self, queue_id: int, lifo: bool, now: int, limit: int,
                  lease_until: int) -> list[MessageRow]: ...
        def ack(self, queue_id: int, msg_id: int, token: str, archive: bool,
                now: int) -> bool: ...
        def message_exists(self, queue_id: int, msg_id: int) -> bool: ...

    def enqueue_by_name(
        self, name: str, count: int,
        rows_for: Callable[[QueueLimits], Sequence[NewMessage]],
    ) -> list[int] | None:
        limits = self.reserve(name, count)  # finds the queue and counts, in one statement
        if limits is None:
            return None
        rows = rows_for(limits)
        if len(rows) < count:
            refused = len(rows) - count
            self.add_counters(limits.id, depth=refused, enqueued_total=refused)
        return self.insert_messages(rows) if rows else []

    def claim_by_name(
        self, name: str, now: int, limit: int, visibility_ms: int | None
    ) -> tuple[ClaimQueue, list[MessageRow] | None] | None:
        found = self.get_queue_for_claim(name, now)
        if found is None:
            return None
        q, leases_ended = found
        queue = ClaimQueue.of(q)
        if queue.paused:  # nothing is claimed (nor swept: the reaper sweeps ended leases)
            return queue, []
        if leases_ended:
            return queue, None
        vis = q.visibility_ms if visibility_ms is None else visibility_ms
        return queue, self.claim(q.id, bool(q.lifo), now, limit, now + vis)

    def unclaim(self, items: Sequence[tuple[int, str]]) -> None:
        # Rare (a poll whose caller left before its group committed): one statement for all.
        self.c.executemany(
            "UPDATE messages SET lease_expires_at = NULL, token = NULL, "
            "attempts = attempts - 1 WHERE id = :id AND token = :t",
            [{"id": msg_id, "t": token} for msg_id, token in items],
        )

    def ack_by_name(
        self, name: str, items: Sequence[tuple[int, str]], now: int
    ) -> list[bool | None] | None:
        # Count every item as acked in the statement that finds the queue (acks rarely
        # miss), then take the misses back.
        n = len(items)
        q = self.add_counters_by_name(name, depth=-n, acked_total=n)
        if q is None:
            return None
        out: list[bool | None] = []
        for msg_id, token in items:
            if self.ack(q.id, msg_id, token, bool(q.archive), now):
                out.append(True)
            else:
                out.append(False if self.message_exists(q.id, msg_id) else None)
        missed = out.count(False) + out.count(None)
        self.add_counters(q.id, depth=missed, acked_total=-missed)  # skips a zero delta
        return out
