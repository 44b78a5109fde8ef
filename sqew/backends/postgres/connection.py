"""Reaching PostgreSQL: database URLs, connections, and the limits that size them.

A target names PostgreSQL when it is a ``postgresql+psycopg://`` or ``postgresql://`` URL
(docs/postgres.md); the rest of the URL is libpq's (``user:password@host:port/dbname?sslmode=…``,
``?host=/run/postgresql`` for a unix socket). Every connection is in autocommit mode: sqew
issues ``BEGIN``/``COMMIT`` itself, so it knows when a transaction starts and ends.

Limits (per ``sqew serve`` process or embedded Client; PostgreSQL's default
``max_connections`` is 100, so about six replicas fit with room for tools):

- ``POOL_MAX`` connections for reads, admin writes and an embedded Client's writes (a server's
  32 database threads share them), ``POOL_MIN`` kept open;
- one connection for the group committer (``PostgresWriteSession``), one listening for
  ``NOTIFY`` (``PostgresWaiter``) once a long poll waited, one holding the reaper's advisory
  lock in the process that reaps;
- ``POOL_TIMEOUT_S``: a call that finds no connection free (or the database down) for this
  long fails with ``Unavailable`` (503) rather than hang;
- ``KEPT_MAX_S``: how long one of the pool's connections is kept out of it between
  transactions before it goes back (the pool renews connections past its ``max_lifetime``);
- ``CONNECT_TIMEOUT_S`` for each new connection unless the URL sets ``connect_timeout``.
"""

from __future__ import annotations

import select
import selectors
from typing import Any

import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg.pq import TransactionStatus

POOL_MIN = 1
POOL_MAX = 10
POOL_TIMEOUT_S = 5.0
KEPT_MAX_S = 600.0
CONNECT_TIMEOUT_S = 5
_IDLE = TransactionStatus.IDLE
PREPARE_THRESHOLD = 2
"""Executions of a statement on a connection after which psycopg prepares it server-side (a
claim or an ack is then parsed and planned once per connection)."""
CHANNEL = "sqew"
"""The ``LISTEN``/``NOTIFY`` channel; a notification's payload is a queue name."""
LISTENER_NAME = "sqew-listen"
"""The ``application_name`` of the ``LISTEN`` connection: whether a session listens is visible
to that session only (``pg_listening_channels``), so ``pg_stat_activity`` tells it apart by
this name (docs/postgres.md)."""


def conninfo(url: str) -> str:
    """The libpq connection string of a ``postgresql+psycopg://`` or ``postgresql://`` URL,
    with sqew's connect timeout unless the URL sets one."""
    text = "postgresql://" + url.split("://", 1)[1]
    params = pg_conninfo.conninfo_to_dict(text)  # raises ProgrammingError on a bad URL
    if "connect_timeout" not in params:
        text = pg_conninfo.make_conninfo(text, connect_timeout=CONNECT_TIMEOUT_S)
    return text


def connect(info: str, application_name: str | None = None) -> psycopg.Connection[Any]:
    """A new connection in autocommit mode (sqew begins and commits itself), named
    ``application_name`` if given (else as the URL says)."""
    if application_name is not None:
        info = pg_conninfo.make_conninfo(info, application_name=application_name)
    return psycopg.connect(info, autocommit=True, prepare_threshold=PREPARE_THRESHOLD)


class PoolConnection(psycopg.Connection[Any]):
    """The class of a backend's pooled connections: its ``connect`` hands over the
    connection waiting in ``handed`` (a list the backend fills, at most one) before it makes
    a new one. A backend checks the schema on a connection of its own (its errors say why a
    database cannot be opened, where a pool would only time out) and hands that connection
    to its pool as the pool's first: one server process to start fewer per open."""

    @classmethod
    def connect(cls, conninfo: str = "", *,  # type: ignore[override]
                handed: list[psycopg.Connection[Any]] | None = None,
                **kwargs: Any) -> psycopg.Connection[Any]:
        try:
            conn = handed.pop() if handed else None  # (atomic: one of the pool's threads gets it)
        except IndexError:
            conn = None
        if conn is not None:
            if not closed_by_server(conn) and conn.pgconn.transaction_status == _IDLE:
                return conn
            conn.close()
        return super().connect(conninfo, **kwargs)


class EndWatch:
    """``closed_by_server`` of one connection, its poller made once: a kept connection is
    checked before every transaction."""

    __slots__ = ("_conn", "_poll")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._poll: Any = None
        if hasattr(select, "poll") and not (conn.closed or conn.broken):
            poller = select.poll()
            poller.register(conn.pgconn.socket, select.POLLIN)
            self._poll = poller.poll

    def __call__(self) -> bool:
        conn = self._conn
        if self._poll is None or conn.closed or conn.broken:
            return closed_by_server(conn)
        return bool(self._poll(0))


def closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection is gone, asked of its socket, not the server (no round
    trip): an idle connection has nothing to read unless the server ended it (a restart
    sends a last error and closes; a crash closes)."""
    if conn.closed or conn.broken:
        return True
    if not hasattr(select, "poll"):  # (Windows)
        with selectors.DefaultSelector() as selector:
            selector.register(conn.pgconn.socket, selectors.EVENT_READ)
            return bool(selector.select(0))
    poller = select.poll()
    poller.register(conn.pgconn.socket, select.POLLIN)
    return bool(poller.poll(0))
