"""``PostgresWriteSession``: a group committer's connection, its transactions taken in steps.

Every step that crosses the network runs through ``offload`` (a database thread): the group's
statements (``PostgresBackend.statements_on_loop`` is False) and ``commit``; ``begin`` sends
nothing (``BEGIN`` goes out with the first statement). A connection that was lost (the
database restarted) is replaced at the next ``begin``: the group that was running fails with
``Unavailable``, the next one reconnects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import psycopg

from sqew import errors
from sqew.backends.base import Offload, WriteSession
from sqew.backends.errors import driver_errors
from sqew.backends.postgres.by_name import QueueCache
from sqew.backends.postgres.tx import PostgresTx


class PostgresWriteSession(WriteSession):
    """A dedicated connection for one group committer.

    Args:
        connect: opens a new connection (autocommit mode).
        origin: this process's mark on its notifications (``PostgresTx``).
        cache: what the backend's by-name writes assume of its queues (``PostgresTx``).
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], origin: str,
                 cache: QueueCache) -> None:
        self._connect = connect
        self._origin = origin
        self._cache = cache
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self.tx: PostgresTx = self._open()

    def _open(self) -> PostgresTx:
        with driver_errors():
            conn = self._connect()
        self._conn = conn
        self.tx = PostgresTx(conn, self._origin, self._cache)
        return self.tx

    async def begin(self, offload: Offload) -> None:
        """Begin a transaction; ``BEGIN`` goes out with the first statement. A lost connection
        is replaced first, through ``offload`` (connecting waits for the network)."""
        if self._closed:
            raise errors.Unavailable("the database is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
            await offload(self.reconnect)
        self.tx.start()

    def reconnect(self) -> None:
        """Replace a lost connection (blocking)."""
        if self._conn is not None:
            self._conn.close()
        self._open()

    async def commit(self, offload: Offload) -> None:
        await offload(self.commit_now)

    def commit_now(self) -> None:
        """Commit the open transaction, its notifications in the same round trip (blocking)."""
        with driver_errors():
            try:
                self.tx.commit()
            except psycopg.Error:
                with contextlib.suppress(psycopg.Error):
                    self.tx.rollback()
                raise

    def rollback(self) -> None:
        with driver_errors():
            self.tx.rollback()

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (or begun and not yet sent): also when a statement
        failed in it (a savepoint's rollback revives it), not when the connection was lost."""
        return self.tx.open

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error, errors.SqewError):
                self.rollback()
            self._conn.close()
