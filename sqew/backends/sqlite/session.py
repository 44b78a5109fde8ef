"""``SqliteWriteSession``: a group committer's connection, its transactions taken in steps."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from sqew import errors
from sqew.backends.base import Offload, WriteSession
from sqew.backends.errors import driver_errors, is_busy, is_read_only
from sqew.backends.sqlite import connection
from sqew.backends.sqlite.checkpoint import WAL_BOUND_PAGES, Checkpointer
from sqew.backends.sqlite.lockfile import LockFile, lock_path
from sqew.backends.sqlite.tx import SqliteTx


class SqliteWriteSession(WriteSession):
    """A group committer's connection: ``BEGIN IMMEDIATE`` tried without waiting.

    Between the committers of several processes on one file (``sqew serve --workers N``) the
    write lock is an ``flock`` on the database's lock file (``<db>-lock``), taken before
    SQLite's own lock: a waiting process is woken the moment the holder commits, where
    SQLite's busy handler would sleep in steps of up to 100 ms. Writers that are not
    committers (the CLI, admin calls) take only SQLite's lock; against them the busy handler
    still waits, off the event loop in ``begin``. Checkpoints are not run by the session's
    commits but by a thread of its own (``Checkpointer``).

    Raises:
        sqew.errors.Unavailable: the lock file can neither be created nor opened.
    """

    def __init__(
        self, path: Path, connect: Callable[[], sqlite3.Connection], *, durable: bool
    ) -> None:
        self._path = path
        self._connect = connect
        self._conn = conn = self._open()
        self.tx = SqliteTx(conn, fold_wakeups=False)  # one object for every transaction
        self.commit_waits = durable
        try:
            self._lock = LockFile(path)
        except OSError as exc:
            conn.close()
            raise errors.Unavailable(
                f"cannot open the lock file '{lock_path(path)}': {exc.strerror or exc}"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._closed = False
        self._checkpointer = Checkpointer(path, connect)

    def _open(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            conn.execute("PRAGMA busy_timeout=0")  # try_begin never waits; begin sets it back
            # The checkpointer's thread checkpoints; SQLite's own, in a commit, only if the WAL
            # ever grows far past the thread's bound (the thread stopped: a safety net).
            conn.execute(f"PRAGMA wal_autocheckpoint={10 * WAL_BOUND_PAGES}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _begin(self, wait_ms: int) -> None:
        """``BEGIN IMMEDIATE``, waiting up to ``wait_ms`` for SQLite's lock.

        A connection SQLite opened read-only (the file could not be written at the time:
        ``chmod a-w``, a read-only directory) stays read-only for good: when it says it may
        not write, the session opens a new one and begins again, which writes if the file may
        be written now (else it is refused again)."""
        for last in (False, True):
            conn = self._conn
            if wait_ms:
                conn.execute(f"PRAGMA busy_timeout={wait_ms}")
            try:
                connection.begin_write(conn)
                return
            except sqlite3.Error as exc:
                if not is_read_only(exc):
                    raise
                if last:
                    raise connection.still_read_only(self._path) from exc
            finally:
                if wait_ms:
                    conn.execute("PRAGMA busy_timeout=0")
            self._conn = self._open()
            self.tx = SqliteTx(self._conn, fold_wakeups=False)
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    async def begin(self, offload: Offload) -> None:
        """Take the write lock now if it is free; else wait for it through ``offload``."""
        if not self.try_begin():
            await offload(self.begin_waiting)

    async def commit(self, offload: Offload) -> None:
        """Commit; under durability ``full`` the commit waits for the disk: offloaded."""
        if self.commit_waits:
            await offload(self.commit_now)
        else:
            self.commit_now()

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open on the connection.

        After some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM…) SQLite rolls the whole
        transaction back by itself: a committer must check this before it goes on after an
        error inside a transaction (a savepoint's rollback would fail, later statements would
        run in autocommit mode).
        """
        return self._conn.in_transaction

    def try_begin(self) -> bool:
        """Begin a write transaction if the write lock is free now; False if it is not."""
        if not self._lock.acquire(wait=False):
            return False
        try:
            self._begin(0)
        except BaseException as exc:
            self._lock.release()
            if is_busy(exc):
                return False
            with driver_errors():
                raise
        return True

    def begin_waiting(self) -> None:
        """Begin a write transaction, waiting for the write lock (blocking)."""
        self._lock.acquire(wait=True)
        try:
            with driver_errors():
                self._begin(connection.BUSY_TIMEOUT_MS)
        except BaseException:
            self._lock.release()
            raise

    def commit_now(self) -> None:
        """Commit the open transaction (blocking under durability ``full``)."""
        try:
            with driver_errors():
                self._conn.execute("COMMIT")
        except errors.SqewError:
            self.rollback()
            raise
        finally:
            self._lock.release()
        self._checkpointer.wrote()

    def rollback(self) -> None:
        try:
            with driver_errors():
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
        finally:
            self._lock.release()

    def write_backlog(self) -> int | None:
        return self._checkpointer.backlog_bytes

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(sqlite3.Error, errors.SqewError):
            self.rollback()
        self._checkpointer.close()
        self._conn.close()
        self._lock.close()
