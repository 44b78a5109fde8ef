"""``PostgresFast``: the by-name writes as transactions of one statement each (``FastPaths``).

A statement sent without ``BEGIN`` on a connection in autocommit mode is a transaction by
itself: one round trip, where a transaction of the same statement costs the same round trip
and its ``BEGIN``/``COMMIT`` besides (sent with it, but run by the server). The statements are
``by_name``'s, sent on a transaction object of ``TxPool`` between its transactions. Bought
(``scripts/bench pg-variants``, against every write in a transaction): +128 % on single
enqueue, +73 % on poll+ack (1 consumer, batch 1), +114 % with 4 consumers.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqew.backends.base import ClaimQueue, FastPaths, MessageRow, Missed
from sqew.backends.errors import driver_errors
from sqew.backends.postgres import by_name
from sqew.backends.postgres.by_name import RowsFor
from sqew.backends.postgres.tx_pool import TxPool


class PostgresFast(FastPaths):
    """The fast paths of a PostgreSQL backend, on its ``TxPool``."""

    def __init__(self, txs: TxPool) -> None:
        self._txs = txs

    def enqueue(self, name: str, count: int, rows_for: RowsFor) -> list[int] | Missed:
        tx = self._txs.take()
        try:
            with driver_errors():
                return by_name.enqueue(tx, tx.cur.execute, name, count, rows_for)
        finally:
            self._txs.give_back(tx)

    def claim(
        self, name: str, now: int, limit: int, visibility_ms: int | None
    ) -> tuple[ClaimQueue, list[MessageRow]] | Missed | None:
        tx = self._txs.take()
        try:
            with driver_errors():
                found = by_name.claim(tx, tx.cur.execute, name, now, limit, visibility_ms)
        finally:
            self._txs.give_back(tx)
        if found is None or isinstance(found, Missed):
            return found
        q, rows = found
        if rows is None:  # leases ended: nothing claimed
            return Missed.MISSED
        return q, rows

    def ack(
        self, name: str, items: Sequence[tuple[int, str]], now: int
    ) -> list[bool | None] | Missed | None:
        tx = self._txs.take()
        try:
            with driver_errors():
                return by_name.ack(tx, tx.cur.execute, name, items, now)
        finally:
            self._txs.give_back(tx)
