"""``PostgresBackend``: sqew's schema in a PostgreSQL database, shared by any number of
processes (``sqew serve`` replicas, CLIs, embedded Clients).

Transactions run on connections of a pool (``psycopg_pool``; limits in ``connection``), one of
which is kept out of it between transactions for the next one (``tx_pool``), in autocommit
mode with an explicit ``BEGIN``, sent with the first statement. The fast paths (``fast``) send
one statement without ``BEGIN``: a transaction of its own. Writes
run at READ COMMITTED (claims lock their rows ``FOR UPDATE SKIP LOCKED``; enqueues, acks and
nacks lock their queue's row, so the counters and quotas of one queue change one transaction
at a time), reads in a REPEATABLE READ READ ONLY snapshot. A statement's failure aborts the
transaction but keeps it open, and ``COMMIT`` of an aborted transaction only rolls back: a
commit checks first.

Opening checks the schema like SQLite's: an empty database gets the schema (one process at
a time, under an advisory lock), an older one needs ``sqew db upgrade``, a newer one or a
database of another application is refused untouched.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from sqew import errors, locations
from sqew.backends.base import Backend, FastPaths, Lead, Tx, Waiter, WriteSession
from sqew.backends.errors import driver_errors, translate
from sqew.backends.postgres import connection, leads, server_clock
from sqew.backends.postgres.by_name import QueueCache
from sqew.backends.postgres.fast import PostgresFast
from sqew.backends.postgres.session import PostgresWriteSession
from sqew.backends.postgres.tx_pool import TxPool, TxScope
from sqew.backends.postgres.waiter import PostgresWaiter
from sqew.backends.revisions import SCHEMA_HEAD, check_known

_MIGRATION_LOCK = "migrate"


def lock_key(role: str) -> int:
    """The advisory-lock key of a role (a signed 64-bit number derived from its name)."""
    digest = hashlib.sha256(f"sqew:{role}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresBackend(Backend):
    """sqew's schema in a PostgreSQL database.

    A group commit runs its statements through ``offload`` (``statements_on_loop`` is False):
    each is a round trip to the server.

    Args:
        url: ``postgresql+psycopg://…`` or ``postgresql://…`` (libpq's URL after the scheme).
        durability: accepted for symmetry with SQLite: a commit is durable as the server's
            ``synchronous_commit`` says (on by default: safe against power loss).
        upgrade: apply pending migrations to an existing database instead of refusing it.
        trace: called with every SQL statement run on this backend's pooled connections.
        create: create sqew's schema in a database that has none (else ``Unavailable``).
    """

    statements_on_loop = False

    def __init__(self, url: str, *, durability: str = "normal", upgrade: bool = False,
                 trace: Callable[[str], None] | None = None, create: bool = True) -> None:
        if durability not in ("normal", "full"):
            raise errors.ValidationError("durability must be 'normal' or 'full'")
        self.url = url
        self.shown = locations.shown(url)
        try:
            self._info = connection.conninfo(url)
        except psycopg.Error:
            raise errors.ValidationError(f"not a valid PostgreSQL URL: '{self.shown}'") from None
        self._trace = trace
        self._origin = secrets.token_hex(8)  # this process's mark on its notifications
        self._cache = QueueCache()  # what the by-name writes assume of the queues
        self._closed = False
        handed = [self._prepare(upgrade, create)]  # the pool's first (``PoolConnection``)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self._info, min_size=connection.POOL_MIN, max_size=connection.POOL_MAX,
            timeout=connection.POOL_TIMEOUT_S, open=False, configure=self._configure,
            connection_class=connection.PoolConnection,
            kwargs={"autocommit": True, "prepare_threshold": connection.PREPARE_THRESHOLD,
                    "handed": handed},
            name="sqew",
        )
        try:
            # Waits for its first connection: a call made before it was ready would make the
            # pool open a second one, and a pool hands its connections out in turn (the one
            # idle longest first), so a one-thread Client would alternate between two server
            # processes for the next ten minutes (``max_idle``), each a cache to warm again.
            self._pool.open(wait=True, timeout=connection.POOL_TIMEOUT_S)
        except PoolTimeout:  # (the pool closed itself)
            raise errors.Unavailable(
                f"cannot open database '{self.shown}': no connection could be made") from None
        finally:
            for conn in handed:  # (the pool did not take it: it failed to open)
                conn.close()
        self._txs = TxPool(self._pool, self._origin, self._cache)
        self._fast = PostgresFast(self._txs)
        self.clock.start(self._txs.connection)

    # --- opening --------------------------------------------------------------------------------
    def _connect(self, application_name: str | None = None) -> psycopg.Connection[Any]:
        conn = connection.connect(self._info, application_name)
        self._configure(conn)
        return conn

    def _connect_listener(self) -> psycopg.Connection[Any]:
        return self._connect(connection.LISTENER_NAME)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self._trace is not None:
            conn.cursor_factory = _traced_cursor(self._trace)

    def _prepare(self, upgrade: bool, create: bool) -> psycopg.Connection[Any]:
        """Check the schema; create it in an empty database (with ``create``), or migrate with
        ``upgrade``. The connection it checked on, for the pool (``PoolConnection``)."""
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            raise self._opening_error(exc) from exc
        try:
            self._clock = server_clock.ServerClock(conn)  # measured at once, refreshed later
            self._check_schema(conn, upgrade, create)
        except errors.SqewError as exc:
            conn.close()
            raise type(exc)(f"cannot open database '{self.shown}': {exc.message}") from None
        except Exception as exc:
            conn.close()
            raise self._opening_error(exc) from exc
        except BaseException:  # (an interrupt: the connection is not the pool's either)
            conn.close()
            raise
        return conn

    def _check_schema(self, conn: psycopg.Connection[Any], upgrade: bool, create: bool) -> None:
        rev = _schema_revision(conn)
        if rev == SCHEMA_HEAD:
            return
        # One process at a time checks again and migrates; the others wait for it here.
        conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(_MIGRATION_LOCK),))
        try:
            rev = _schema_revision(conn)
            if rev is None and not create:
                raise errors.Unavailable(
                    "the database has no sqew schema yet: sqew creates it when it first "
                    f"writes there (`sqew --db {self.shown} db upgrade`, or `queue add`)")
            if rev != SCHEMA_HEAD:
                _refuse(conn, rev, upgrade)
                from sqew import migrate  # Alembic only when a schema must be written

                migrate.upgrade_postgres(self._info)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(_MIGRATION_LOCK),))

    def _opening_error(self, exc: BaseException) -> errors.SqewError:
        err = translate(exc)
        if isinstance(err, errors.InternalError):
            err = errors.Unavailable("the database cannot be opened")
        return type(err)(f"cannot open database '{self.shown}': {err.message}")

    # --- transactions ---------------------------------------------------------------------------
    # A transaction's ``BEGIN`` goes out with its first statement (``PostgresTx.start``), so a
    # transaction costs no round trip of its own.
    def write(self) -> AbstractContextManager[Tx]:
        return TxScope(self._txs, "BEGIN")

    def read(self) -> AbstractContextManager[Tx]:
        return TxScope(self._txs, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    def fast_paths(self) -> FastPaths:
        return self._fast

    def write_session(self) -> WriteSession:
        return PostgresWriteSession(self._connect, self._origin, self._cache)

    def waiter(self) -> Waiter:
        return PostgresWaiter(self._connect_listener, self._origin)

    def maintain(self) -> None:
        with driver_errors(), self._txs.connection() as conn:
            conn.execute("VACUUM (ANALYZE) messages, dedup, archive, queues")

    def ping(self) -> None:
        with driver_errors(), self._txs.connection() as conn:
            conn.execute("SELECT 1").fetchone()

    def schema_revision(self) -> str | None:
        with driver_errors(), self._txs.connection() as conn:
            return _schema_revision(conn)

    @property
    def schema_head(self) -> str:
        return SCHEMA_HEAD

    @property
    def clock(self) -> server_clock.ServerClock:
        """The database server's time (``server_clock``): replicas on several hosts share
        its rows, so they stamp times by one clock."""
        return self._clock

    def try_lead(self, role: str, *, brief: bool = False) -> Lead | None:
        """An advisory lock (``leads``): on a connection of its own, held while leading, or
        ``brief``ly on a pooled one."""
        key = lock_key(role)
        with driver_errors():
            if brief:
                return leads.try_brief(self._txs, key)
            conn = self._connect()
            try:
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            except BaseException:
                conn.close()
                raise
        if not got or not got[0]:
            conn.close()
            return None
        return leads.AdvisoryLead(conn, key)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.clock.stop()
        try:
            self._txs.close()
        finally:
            self._pool.close()


def _schema_revision(conn: psycopg.Connection[Any]) -> str | None:
    """The revision in ``alembic_version`` (on the search path), None if there is none."""
    if conn.execute("SELECT to_regclass('alembic_version')").fetchone() == (None,):
        return None
    row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if row is None else str(row[0])


def _refuse(conn: psycopg.Connection[Any], rev: str | None, upgrade: bool) -> None:
    """Raise Unavailable unless the database at revision ``rev`` may be migrated."""
    if rev is None:
        if conn.execute(
            "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() LIMIT 1"
        ).fetchone() is not None:
            raise errors.Unavailable("the database has tables but is not a sqew database")
        return
    check_known(rev, upgrade)


def _traced_cursor(trace: Callable[[str], None]) -> type[psycopg.Cursor[Any]]:
    """A cursor class that reports every statement's text to ``trace`` (diagnostics)."""

    class Traced(psycopg.Cursor[Any]):
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            trace(str(query))
            return super().execute(query, params, **kwargs)

    return Traced
