"""The reaper's lead on PostgreSQL: a session advisory lock (``pg_try_advisory_lock``).

A lead held for long (a server's reaper timer) has a connection of its own, so that the lock
ends with that connection and a replica that dies or loses the database hands the role over
by itself. A brief lead (a poll or read reaping once, then letting go) borrows one of the
backend's pooled connections instead: opening a connection costs a handshake and a server
process start, and a Client whose polls reap every ``reap_interval_ms`` would pay that each
time.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg

from sqew.backends.coordination import Lead
from sqew.backends.postgres.tx import PostgresTx
from sqew.backends.postgres.tx_pool import TxPool


class AdvisoryLead(Lead):
    """A session advisory lock held on a connection of its own."""

    def __init__(self, conn: psycopg.Connection[Any], key: int) -> None:
        self._conn = conn
        self._key = key

    @property
    def held(self) -> bool:
        """Asks the server (one round trip): the lock lives as long as the connection."""
        return _alive(self._conn)

    def release(self) -> None:
        if not self._conn.closed:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
            self._conn.close()


class PooledLead(Lead):
    """A session advisory lock held for a moment on a connection of the backend's pool, which
    goes back to the pool once unlocked (or closed, if the unlock could not be made sure of:
    a pooled session must never keep the lock)."""

    def __init__(self, txs: TxPool, tx: PostgresTx, key: int) -> None:
        self._txs = txs
        self._tx: PostgresTx | None = tx
        self._key = key

    @property
    def held(self) -> bool:
        return self._tx is not None and _alive(self._tx.conn)

    def release(self) -> None:
        tx, self._tx = self._tx, None
        if tx is None:
            return
        try:
            tx.conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
        except BaseException as exc:
            tx.conn.close()  # (the session, and with it the lock, ends; the pool replaces it)
            self._txs.give_back(tx)
            if not isinstance(exc, psycopg.Error):
                raise
            return
        self._txs.give_back(tx)


def try_brief(txs: TxPool, key: int) -> Lead | None:
    """``key``'s lock on a pooled connection, or None when another session holds it."""
    tx = txs.take()
    try:
        got = tx.conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    except BaseException:
        tx.conn.close()
        txs.give_back(tx)
        raise
    if got and got[0]:
        return PooledLead(txs, tx, key)
    txs.give_back(tx)
    return None


def _alive(conn: psycopg.Connection[Any]) -> bool:
    if conn.closed or conn.broken:
        return False
    try:
        conn.execute("SELECT 1").fetchone()
    except psycopg.Error:
        return False
    return True
