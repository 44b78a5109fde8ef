"""``Checkpointer``: copies a write session's commits from the WAL into the database, on a
thread of its own."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from sqew.backends.sqlite.lockfile import LockFile

CHECKPOINT_INTERVAL_S = 0.1
"""How long a write session's checkpointer lets commits gather before it copies them."""
WAL_BOUND_PAGES = 1000
"""The WAL length past which the checkpointer makes SQLite start the WAL over (its own
``wal_autocheckpoint`` default)."""
log = logging.getLogger("sqew.sqlite")


class Checkpointer:
    """Copies a write session's commits from the WAL into the database, on a thread of its own.

    SQLite checkpoints inside the commit that takes the WAL past 1000 pages. For a group
    committer that commit runs on the server's event loop, and copying the pages with their
    two fsyncs stopped every request for milliseconds: it was most of the enqueue p99
    (docs/benchmarks.md). Here a thread copies them instead (sqlite3 lets go of the GIL), a
    moment after commits, while the loop goes on serving.

    Under steady writes a checkpoint never reaches the end of the WAL, and SQLite starts the
    WAL over only from a fully copied one: it would grow without bound. So once the WAL is past
    ``WAL_BOUND_PAGES`` the thread takes the committers' write lock (the database's lock file,
    see ``lockfile``) and copies the few pages written meanwhile; the next transaction can then
    start the WAL over (if no reader holds an older snapshot; otherwise a later pass tries
    again). Committers wait for that off the event loop, as for any other holder of the lock.
    Should the thread stop, the session's own automatic checkpoint at ten times the bound keeps
    the WAL finite.
    """

    def __init__(self, path: Path, connect: Callable[[], sqlite3.Connection]) -> None:
        self._path = path
        self._connect = connect
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self.backlog_bytes = 0
        """The WAL's bytes not yet copied into the database after the last checkpoint (all
        processes' commits; written by the thread, read by backpressure)."""
        self._page_size = 0
        self._thread = threading.Thread(target=self._run, name="sqew-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        """A commit happened: checkpoint soon."""
        self._dirty.set()

    def close(self) -> None:
        """Stop the thread (the last connection to close checkpoints what is left)."""
        self._stopping.set()  # before the wake-up: the thread looks at it after every pass
        self._dirty.set()
        self._thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        lock: LockFile | None = None
        try:
            # A close that comes after the gathering pause ended but before ``_dirty`` is
            # cleared has its wake-up cleared with the commits': ``_stopping`` is looked at
            # again before the thread waits for the next commit, or it would wait for ever
            # (and ``close`` with it).
            while not self._stopping.is_set():
                self._dirty.wait()
                if self._stopping.wait(CHECKPOINT_INTERVAL_S):  # meanwhile, commits gather
                    return
                self._dirty.clear()
                try:
                    if conn is None:
                        conn = self._connect()
                    if lock is None:
                        lock = LockFile(self._path)
                    self._checkpoint(conn, lock)
                except Exception:  # keep the thread: the next commit retries
                    log.warning("checkpointing the WAL failed; retrying after the next commit",
                                exc_info=True)
                    # On a new connection: this one may be one SQLite opened read-only (the
                    # file was, then), which never checkpoints.
                    if conn is not None:
                        conn.close()
                        conn = None
        finally:
            if conn is not None:
                conn.close()
            if lock is not None:
                lock.close()

    def _passive(self, conn: sqlite3.Connection) -> int:
        """Copy what readers allow without stopping the writers; the WAL's length in pages."""
        _, pages, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
        if not self._page_size:
            self._page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        self.backlog_bytes = max(0, pages - copied) * self._page_size
        return int(pages)

    def _checkpoint(self, conn: sqlite3.Connection, lock: LockFile) -> None:
        # Copy what is committed, without stopping the writers (the bulk of the work).
        pages = self._passive(conn)
        if pages <= WAL_BOUND_PAGES or self._stopping.is_set():
            return
        # Then, with the writers held, the pages they wrote meanwhile: the WAL is then fully
        # copied and the next write transaction starts it over from its beginning (unless a
        # reader still reads an older snapshot; then a later pass tries again).
        while not lock.acquire(wait=False):  # without blocking, so that close() never waits
            if self._stopping.wait(0.002):
                return
        try:
            self._passive(conn)
        finally:
            lock.release()
