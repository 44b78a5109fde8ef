"""``PostgresTx``: the PostgreSQL values of the dialect hooks of ``SqlTx``, and its faster
statements."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from psycopg.pq import TransactionStatus

from sqew.backends.base import NewMessage
from sqew.backends.postgres.connection import CHANNEL
from sqew.backends.sql import SqlTx

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)

# One statement for any number of messages: the rows travel as one array per column (a
# statement of one shape, prepared once, where a multi-row VALUES list has a shape per size).
_INSERT_MANY = (
    "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
    "available_at, expires_at, lifo) SELECT q, p, pr, a, 0, e, av, x, l FROM unnest("
    "CAST(:q AS BIGINT[]), CAST(:p AS TEXT[]), CAST(:pr AS INT[]), CAST(:a AS TEXT[]), "
    "CAST(:e AS BIGINT[]), CAST(:av AS BIGINT[]), CAST(:x AS BIGINT[]), "
    "CAST(:l AS BOOLEAN[])) AS r(q, p, pr, a, e, av, x, l) RETURNING id"
)
_INSERT_ONE = (
    "INSERT INTO messages (queue_id, payload, priority, attributes, attempts, enqueued_at, "
    "available_at, expires_at, lifo) VALUES (:q, :p, :pr, :a, 0, :e, :av, :x, :l) RETURNING id"
)
_COLUMNS = ("q", "p", "pr", "a", "e", "av", "x", "l")


class PostgresTx(SqlTx):
    """``SqlTx`` on a psycopg connection (autocommit mode, inside a ``BEGIN``).

    The hooks' defaults are PostgreSQL's already (``TRUE``/``FALSE``, a token from
    ``gen_random_uuid()``, claims ``FOR UPDATE SKIP LOCKED``); psycopg takes ``%(name)s``.
    """

    PARAMSTYLE = "pyformat"

    def __init__(self, conn: Any, origin: str) -> None:
        """``origin``: the sending process's mark on its notifications (its own waiter has
        woken its waits already and skips them)."""
        super().__init__(conn)
        self.conn = conn
        self.origin = origin

    def _in_transaction(self) -> bool:
        # After a failed statement the transaction is still there (aborted: a savepoint's
        # rollback revives it); after a lost connection it is not.
        return self.conn.info.transaction_status in _OPEN

    def notify(self, queues: Iterable[str]) -> None:
        # PostgreSQL delivers notifications at commit, and one per distinct payload of a
        # transaction (coalesced), to every listening process: the waiters of other replicas.
        # The payload is "<origin> <queue>" (a queue name has no spaces).
        self.c.execute(
            f"SELECT pg_notify('{CHANNEL}', :origin || ' ' || q) "
            "FROM unnest(CAST(:qs AS TEXT[])) AS q",
            {"origin": self.origin, "qs": list(queues)},
        )

    def insert_messages(self, rows: Sequence[NewMessage]) -> list[int]:
        """One statement whatever the count; the ids sorted (a sequence draws them in the
        order of the rows, as the neutral statement relies on too)."""
        if len(rows) == 1:
            return [int(self._one(_INSERT_ONE, dict(zip(_COLUMNS, rows[0], strict=True)))[0])]
        columns = zip(*rows, strict=True)
        params = {col: list(values) for col, values in zip(_COLUMNS, columns, strict=True)}
        return sorted(int(r[0]) for r in self._all(_INSERT_MANY, params))

    def reap_dedup(self, queue_id: int | None, now: int, limit: int) -> int:
        """By ``ctid`` (the row's physical address): no key lookup per deleted row."""
        where = "expires_at <= :now" + (" AND queue_id = :q" if queue_id is not None else "")
        return self._rowcount(
            "DELETE FROM dedup WHERE ctid = ANY(ARRAY("
            f"SELECT ctid FROM dedup WHERE {where} LIMIT :n))",
            {"now": now, "q": queue_id, "n": limit},
        )
