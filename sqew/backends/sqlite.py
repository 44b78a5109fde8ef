"""The embedded default: one SQLite file in WAL mode, shared safely by many processes.

Writes start with ``BEGIN IMMEDIATE`` so a transaction takes the write lock up front (no
deadlock on lock upgrade); readers never block the writer (WAL). Each thread has its own
connection. Another process's commit is seen through ``PRAGMA data_version``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from sqew import errors
from sqew.backends.base import Backend, Offload, Tx, Waiter, WriteSession
from sqew.backends.errors import translate
from sqew.backends.sql import SqlTx
from sqew.backends.sqlite_waiter import SqliteWaiter

BUSY_TIMEOUT_MS = 30_000
CHECKPOINT_INTERVAL_S = 0.1
"""How long a write session's checkpointer lets commits gather before it copies them."""
WAL_BOUND_PAGES = 1000
"""The WAL length past which the checkpointer makes SQLite start the WAL over (its own
``wal_autocheckpoint`` default)."""
log = logging.getLogger("sqew.sqlite")

SCHEMA_HEAD = "0001"
"""The Alembic head revision this code writes (a test keeps it equal to Alembic's head).

Known here so that opening an up-to-date database costs one query, without importing
SQLAlchemy's engine or Alembic (a CLI command starts in a fraction of the time).
"""


class SqliteBackend(Backend):
    """sqew's schema in one SQLite file.

    A group commit runs its statements on the event loop (``statements_on_loop``): once the
    write lock is held they take microseconds and never wait.

    Args:
        path: the database file (created and migrated if new).
        durability: ``"normal"`` (synchronous=NORMAL: safe against a process crash) or
            ``"full"`` (synchronous=FULL: safe against power loss).
        upgrade: apply pending migrations to an existing database instead of refusing it.
        trace: called with every SQL statement run on the connections of this backend.
    """

    statements_on_loop = True

    def __init__(self, path: str | os.PathLike[str], *, durability: str = "normal",
                 upgrade: bool = False, trace: Callable[[str], None] | None = None) -> None:
        if durability not in ("normal", "full"):
            raise errors.ValidationError("durability must be 'normal' or 'full'")
        self.path = Path(path)
        self._sync = "FULL" if durability == "full" else "NORMAL"
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._trace = trace
        _check_path(self.path)
        self._prepare(upgrade)

    # --- opening --------------------------------------------------------------------------------
    def _prepare(self, upgrade: bool) -> None:
        """Check the schema, migrating a new file; refuse a foreign or newer one untouched.

        The checks run on a bare connection, before WAL mode is switched on, so a refused file
        is left exactly as it was.
        """
        try:
            if _schema_revision(self.path) == SCHEMA_HEAD:
                return
            with _file_lock(self.path):  # first open: one process migrates, others wait
                try:
                    self._check_and_migrate(upgrade)
                except errors.SqewError as exc:
                    raise type(exc)(f"cannot open database '{self.path}': {exc.message}") from None
        except errors.SqewError:
            raise
        except Exception as exc:
            raise _opening_error(self.path, exc) from exc

    def _check_and_migrate(self, upgrade: bool) -> None:
        rev = _schema_revision(self.path)
        if rev == SCHEMA_HEAD:
            return
        from sqew import migrate  # Alembic only when a schema must be checked or written

        if rev is None:
            if _has_tables(self.path):
                raise errors.Unavailable("the file is a SQLite database but not a sqew database")
        elif rev not in migrate.known_revisions():
            raise errors.Unavailable(
                f"the database schema ({rev}) is newer than this sqew knows; upgrade sqew"
            )
        elif not upgrade:
            raise errors.Unavailable(
                f"the database schema ({rev}) is older than this sqew's ({SCHEMA_HEAD}); "
                "run `sqew db upgrade`"
            )
        self._connect().close()  # WAL from the first write on
        migrate.upgrade_file(self.path)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000, cached_statements=256,
        )
        try:
            conn.execute("PRAGMA schema_version").fetchone()  # fails fast on a non-database
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise errors.Unavailable("the database cannot use WAL mode (read-only location?)")
            conn.execute(f"PRAGMA synchronous={self._sync}")
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA cache_size=-65536")
            conn.execute("PRAGMA mmap_size=268435456")
            conn.execute("PRAGMA temp_store=MEMORY")
            if self._trace is not None:
                conn.set_trace_callback(self._trace)
        except BaseException:
            conn.close()
            raise
        return conn

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise errors.Unavailable("the database is closed")
            try:
                conn = self._connect()
            except errors.SqewError:
                raise
            except Exception as exc:
                raise _opening_error(self.path, exc) from exc
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    # --- transactions ---------------------------------------------------------------------------
    def write(self) -> AbstractContextManager[Tx]:
        return self._transaction("BEGIN IMMEDIATE")

    def read(self) -> AbstractContextManager[Tx]:
        return self._transaction("BEGIN")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        conn = self._conn()
        try:
            conn.execute(begin)
        except sqlite3.Error as exc:
            raise translate(exc) from exc
        try:
            yield SqlTx(conn)
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise translate(exc) from exc
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise translate(exc) from exc

    def write_session(self) -> WriteSession:
        return SqliteWriteSession(self.path, self._connect, durable=self._sync == "FULL")

    def waiter(self) -> Waiter:
        return SqliteWaiter(self._conn)

    def maintain(self) -> None:
        conn = self._conn()
        try:
            conn.execute("ANALYZE")
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            if pages and free / pages > 0.25:  # only worth the full rewrite when much is free
                conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error as exc:
            raise translate(exc) from exc

    def ping(self) -> None:
        try:
            self._conn().execute("SELECT 1").fetchone()
        except sqlite3.Error as exc:
            raise translate(exc) from exc

    def schema_revision(self) -> str | None:
        try:
            row = self._conn().execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.Error as exc:
            raise translate(exc) from exc
        return None if row is None else str(row[0])

    @property
    def schema_head(self) -> str:
        return SCHEMA_HEAD

    def close(self) -> None:
        self._closed = True
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()


class SqliteWriteSession(WriteSession):
    """A group committer's connection: ``BEGIN IMMEDIATE`` tried without waiting.

    Between the committers of several processes on one file (``sqew serve --workers N``) the
    write lock is an ``flock`` on the database file, taken before SQLite's own lock: a waiting
    process is woken the moment the holder commits, where SQLite's busy handler would sleep in
    steps of up to 100 ms. Writers that are not committers (the CLI, admin calls) take only
    SQLite's lock; against them the busy handler still waits, off the event loop in ``begin``.
    Checkpoints are not run by the session's commits but by a thread of its own
    (``_Checkpointer``).
    """

    def __init__(
        self, path: Path, connect: Callable[[], sqlite3.Connection], *, durable: bool
    ) -> None:
        self._conn = conn = connect()
        self.tx = SqlTx(conn)
        self.commit_waits = durable
        conn.execute("PRAGMA busy_timeout=0")  # try_begin never waits; begin sets it back
        # The checkpointer's thread checkpoints; SQLite's own, in a commit, only if the WAL
        # ever grows far past the thread's bound (the thread stopped: a safety net).
        conn.execute(f"PRAGMA wal_autocheckpoint={10 * WAL_BOUND_PAGES}")
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except OSError:
            conn.close()
            raise
        self._locked = False
        self._checkpointer = _Checkpointer(path, connect)

    def _lock(self, wait: bool) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._locked = True
        return True

    def _unlock(self) -> None:
        if self._locked:
            self._locked = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    async def begin(self, offload: Offload) -> None:  # type: ignore[override]
        """Take the write lock now if it is free; else wait for it through ``offload``."""
        if not self.try_begin():
            await offload(self.begin_waiting)

    async def commit(self, offload: Offload) -> None:  # type: ignore[override]
        """Commit; under durability ``full`` the commit waits for the disk: offloaded."""
        if self.commit_waits:
            await offload(self.commit_now)
        else:
            self.commit_now()

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def try_begin(self) -> bool:
        """Begin a write transaction if the write lock is free now; False if it is not."""
        if not self._lock(wait=False):
            return False
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            self._unlock()
            if exc.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                return False
            raise translate(exc) from exc
        except BaseException:
            self._unlock()
            raise
        return True

    def begin_waiting(self) -> None:
        """Begin a write transaction, waiting for the write lock (blocking)."""
        self._lock(wait=True)
        try:
            self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            finally:
                self._conn.execute("PRAGMA busy_timeout=0")
        except BaseException as exc:
            self._unlock()
            if isinstance(exc, sqlite3.Error):
                raise translate(exc) from exc
            raise

    def commit_now(self) -> None:
        """Commit the open transaction (blocking under durability ``full``)."""
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.rollback()
            raise translate(exc) from exc
        finally:
            self._unlock()
        self._checkpointer.wrote()

    def rollback(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise translate(exc) from exc
        finally:
            self._unlock()

    def close(self) -> None:
        if self._fd < 0:
            return
        with contextlib.suppress(sqlite3.Error, errors.SqewError):
            self.rollback()
        self._checkpointer.close()
        self._conn.close()
        os.close(self._fd)
        self._fd = -1


class _Checkpointer:
    """Copies a write session's commits from the WAL into the database, on a thread of its own.

    SQLite checkpoints inside the commit that takes the WAL past 1000 pages. For a group
    committer that commit runs on the server's event loop, and copying the pages with their
    two fsyncs stopped every request for milliseconds: it was most of the enqueue p99
    (docs/benchmarks.md). Here a thread copies them instead (sqlite3 lets go of the GIL), a
    moment after commits, while the loop goes on serving.

    Under steady writes a checkpoint never reaches the end of the WAL, and SQLite starts the
    WAL over only from a fully copied one: it would grow without bound. So once the WAL is past
    ``WAL_BOUND_PAGES`` the thread takes the committers' write lock (their ``flock``) and copies
    the few pages written meanwhile; the next transaction can then start the WAL over (if no
    reader holds an older snapshot; otherwise a later pass tries again). Committers wait for
    that off the event loop, as for any other holder of the lock. Should the thread stop, the
    session's own automatic checkpoint at ten times the bound keeps the WAL finite.
    """

    def __init__(self, path: Path, connect: Callable[[], sqlite3.Connection]) -> None:
        self._path = path
        self._connect = connect
        self._dirty = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqew-checkpoint", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        """A commit happened: checkpoint soon."""
        self._dirty.set()

    def close(self) -> None:
        """Stop the thread (the last connection to close checkpoints what is left)."""
        self._stopping.set()
        self._dirty.set()
        self._thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        fd = -1
        try:
            while True:
                self._dirty.wait()
                if self._stopping.wait(CHECKPOINT_INTERVAL_S):  # meanwhile, commits gather
                    return
                self._dirty.clear()
                try:
                    if conn is None:
                        conn = self._connect()
                    if fd < 0:
                        fd = os.open(self._path, os.O_RDONLY)
                    self._checkpoint(conn, fd)
                except Exception:  # keep the thread: the next commit retries
                    log.warning("checkpointing the WAL failed; retrying after the next commit",
                                exc_info=True)
        finally:
            if conn is not None:
                conn.close()
            if fd >= 0:
                os.close(fd)

    def _checkpoint(self, conn: sqlite3.Connection, fd: int) -> None:
        # Copy what is committed, without stopping the writers (the bulk of the work).
        _, pages, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()[0]
        if pages <= WAL_BOUND_PAGES or self._stopping.is_set():
            return
        # Then, with the writers held, the pages they wrote meanwhile: the WAL is then fully
        # copied and the next write transaction starts it over from its beginning (unless a
        # reader still reads an older snapshot; then a later pass tries again).
        while True:  # the lock without blocking, so that close() never waits for it
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if self._stopping.wait(0.002):
                    return
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def _check_path(path: Path) -> None:
    where = f"cannot open database '{path}'"
    if path.is_dir():
        raise errors.Unavailable(f"{where}: it is a directory")
    if not path.parent.is_dir():
        raise errors.Unavailable(f"{where}: directory '{path.parent}' does not exist")
    if path.exists() and not os.access(path, os.R_OK):
        raise errors.Unavailable(f"{where}: permission denied")


def _opening_error(path: Path, exc: BaseException) -> errors.SqewError:
    if isinstance(exc, PermissionError):
        return errors.Unavailable(f"cannot open database '{path}': permission denied")
    if isinstance(exc, OSError):
        return errors.Unavailable(f"cannot open database '{path}': {exc.strerror or exc}")
    err = translate(exc)
    return type(err)(f"cannot open database '{path}': {err.message}")


def _bare_connection(path: Path) -> sqlite3.Connection:
    """A connection that changes nothing about the file (no WAL switch, no pragmas)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _schema_revision(path: Path) -> str | None:
    """The revision in ``alembic_version``, or None when there is no such table.

    Raises sqlite3.DatabaseError for a file that is not a database.
    """
    conn = _bare_connection(path)
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # fails fast on a non-database
        try:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        return None if row is None else str(row[0])
    finally:
        conn.close()


def _has_tables(path: Path) -> bool:
    conn = _bare_connection(path)
    try:
        return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
    finally:
        conn.close()


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Serialise first-open migration between processes (flock is independent of SQLite's locks)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # a read-only file still gets its schema checked
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
