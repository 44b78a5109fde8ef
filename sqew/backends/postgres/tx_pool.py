"""``TxPool``: where a PostgreSQL backend's transactions (and fast paths) run, one kept
transaction object first; ``TxScope``: one transaction on it.

One transaction object (``PostgresTx``: a connection and the cursor of its by-name writes) is
kept out of the pool between transactions for the next one: a one-thread Client (or the
busiest thread of a server) runs every transaction on it, and threads working at once take it
or one of the pool's. Handing a connection out and back through the pool for each operation,
and a fresh cursor whose adapters look every parameter's type up again, would cost a
noticeable part of a single enqueue.

The kept object is checked before each use like the pool's connections (one the server ended
is replaced); only an idle connection is kept, and after ``connection.KEPT_MAX_S`` it goes back
to the pool, which renews its connections (``max_lifetime``) as they come back.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from sqew import errors
from sqew.backends.errors import driver_errors
from sqew.backends.postgres import connection
from sqew.backends.postgres.by_name import QueueCache
from sqew.backends.postgres.tx import PostgresTx

_IDLE = int(TransactionStatus.IDLE)  # (compared as a plain int: no enum lookup per call)


class TxPool:
    """Hands out a backend's transaction objects and connections.

    Args:
        pool: the backend's connection pool (closed by the backend, after ``close``).
        origin: this process's mark on its notifications (``PostgresTx``).
        cache: what the backend's by-name writes assume of its queues (``PostgresTx``).
    """

    def __init__(self, pool: ConnectionPool[psycopg.Connection[Any]], origin: str,
                 cache: QueueCache) -> None:
        self._pool = pool
        self._origin = origin
        self._cache = cache
        self._kept: list[PostgresTx] = []  # at most one (``take``)
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection for statements outside a transaction (autocommit): the kept one if
        it is free, so that a one-thread Client's occasional statements (the clock's refresh,
        a ping) need no second connection."""
        tx = self.take()
        try:
            yield tx.conn
        finally:
            self.give_back(tx)

    def take(self) -> PostgresTx:
        """The kept transaction object if it is free and its connection alive, else one on a
        connection of the pool."""
        if self._closed:
            raise errors.Unavailable("the database is closed")
        try:
            tx = self._kept.pop()  # (atomic: another thread gets it or nothing)
        except IndexError:
            pass
        else:
            if not tx.closed_by_server():
                return tx
            tx.conn.close()  # (ended by a restart: the pool replaces it)
            self._pool.putconn(tx.conn)
        return PostgresTx(self._checkout(), self._origin, self._cache)

    def give_back(self, tx: PostgresTx) -> None:
        """Keep ``tx`` for the next transaction if none is kept, it was not kept for
        ``KEPT_MAX_S`` already and its connection is idle; else return its connection to
        the pool (which resets or replaces it)."""
        conn = tx.conn
        if (not self._kept and not self._closed and time.monotonic() < tx.kept_until
                and conn.pgconn.transaction_status == _IDLE):
            self._kept.append(tx)
            if not self._closed:
                return
            try:  # close() ran meanwhile: unless it took this one back, it goes back here
                self._kept.remove(tx)
            except ValueError:
                return
        self._pool.putconn(conn)

    def _checkout(self) -> psycopg.Connection[Any]:
        """A pooled connection that looks alive. One the pool kept while the database
        restarted is dead: it is closed (the pool replaces it) and another taken."""
        for _ in range(connection.POOL_MAX + 1):
            if self._closed:
                raise errors.Unavailable("the database is closed")
            with driver_errors():
                conn = self._pool.getconn()
            if not connection.closed_by_server(conn):
                return conn
            conn.close()
            self._pool.putconn(conn)
        raise errors.Unavailable("the database closed every connection")

    def close(self) -> None:
        """Refuse new transactions and return the kept connection to the pool."""
        self._closed = True
        while True:
            try:
                kept = self._kept.pop()  # (a transaction may take it meanwhile: not here)
            except IndexError:
                return
            self._pool.putconn(kept.conn)


class TxScope:
    """A transaction on one of ``source``'s transaction objects, opened by ``begin`` (sent with
    its first statement): committed at the end of the block or rolled back if it raised (a
    database error raised as sqew's). A class rather than a generator-based context manager:
    this wraps every operation."""

    __slots__ = ("begin", "source", "tx")

    def __init__(self, source: TxPool, begin: str) -> None:
        self.source = source
        self.begin = begin

    def __enter__(self) -> PostgresTx:
        self.tx = tx = self.source.take()
        tx.start(self.begin)
        return tx

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        tx = self.tx
        try:
            if exc is not None:
                _rollback(tx)
                # A driver error raised as the SqewError it means; any other goes on as it is.
                driver_errors().__exit__(kind, exc, tb)
                return
            with driver_errors():
                try:
                    tx.commit()  # with the notifications, in one round trip
                except BaseException:
                    _rollback(tx)
                    raise
        finally:
            self.source.give_back(tx)


def _rollback(tx: PostgresTx) -> None:
    """``tx.rollback()``, a failure of which (a lost connection) leaves the first error to
    be reported."""
    with contextlib.suppress(psycopg.Error):
        tx.rollback()
