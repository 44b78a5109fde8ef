"""The SQS data's statements of ``SqlTx`` (dialect-neutral, ``:name`` parameters), and the
condition that keeps a FIFO queue's message groups in order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

GROUP_HEAD = (
    "(messages.group_id IS NULL OR NOT EXISTS (SELECT 1 FROM messages g "
    "WHERE g.queue_id = messages.queue_id AND g.group_id = messages.group_id "
    "AND g.id < messages.id AND g.expires_at > {now}))"
)
"""The condition every claim puts on a ready message (``{now}``: the claim's time): it has no
group, or no earlier unexpired message of its group is left in its queue, leased, delayed or
ready. So one message of a group at most is ever leased, whoever polls: a claim that sees
two of a group ready leases the first only (a later one waits), and a concurrent claim under
``SKIP LOCKED`` that skips the locked first finds the later one behind it, not a head. A
nacked or expired lease puts its message back first in line (its id is unchanged); an ack, a
dead-lettering (the message leaves the queue) or its expiry lets the next one go."""


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
