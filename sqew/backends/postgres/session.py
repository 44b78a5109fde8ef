"""``PostgresWriteSession``: a group committer's connection, its transactions taken in steps.

Every step crosses the network, so every step runs through ``offload`` (a database thread):
``begin``, the group's statements (``PostgresBackend.statements_on_loop`` is False) and
``commit``. A connection that was lost (the database restarted) is replaced at the next
``begin``: the group that was running fails with ``Unavailable``, the next one reconnects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from sqew import errors
from sqew.backends.base import Offload, WriteSession
from sqew.backends.errors import translate
from sqew.backends.postgres.tx import PostgresTx

_OPEN = (TransactionStatus.INTRANS, TransactionStatus.INERROR)


class PostgresWriteSession(WriteSession):
    """A dedicated connection for one group committer.

    Args:
        connect: opens a new connection (autocommit mode).
        origin: this process's mark on its notifications (``PostgresTx``).
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], origin: str) -> None:
        self._connect = connect
        self._origin = origin
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self.tx: PostgresTx = self._open()

    def _open(self) -> PostgresTx:
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            raise translate(exc) from exc
        self._conn = conn
        self.tx = PostgresTx(conn, self._origin)
        return self.tx

    async def begin(self, offload: Offload) -> None:
        await offload(self.begin_now)

    def begin_now(self) -> None:
        """Begin a transaction, on a new connection if the last one was lost (blocking)."""
        if self._closed:
            raise errors.Unavailable("the database is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            if self._conn is not None:
                self._conn.close()
            self._open()
        assert self._conn is not None
        try:
            self._conn.execute("BEGIN")
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def commit(self, offload: Offload) -> None:
        await offload(self.commit_now)

    def commit_now(self) -> None:
        """Commit the open transaction (blocking)."""
        assert self._conn is not None
        if self._conn.info.transaction_status == TransactionStatus.INERROR:
            # COMMIT of an aborted transaction rolls back without an error: never report
            # that as committed.
            self.rollback()
            raise errors.InternalError("a statement of the transaction failed")
        try:
            self._conn.execute("COMMIT")
        except psycopg.Error as exc:
            with contextlib.suppress(errors.SqewError):
                self.rollback()
            raise translate(exc) from exc

    def rollback(self) -> None:
        conn = self._conn
        if conn is None or conn.closed or conn.info.transaction_status not in _OPEN:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error as exc:
            raise translate(exc) from exc

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open: also when a statement failed in it (PostgreSQL
        keeps the aborted transaction, and a savepoint's rollback revives it), not when the
        connection was lost."""
        conn = self._conn
        return conn is not None and conn.info.transaction_status in _OPEN

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error, errors.SqewError):
                self.rollback()
            self._conn.close()
