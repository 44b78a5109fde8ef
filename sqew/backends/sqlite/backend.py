"""``SqliteBackend``: opening a SQLite file (checks, migration), connections, transactions.

Writes start with ``BEGIN IMMEDIATE`` so a transaction takes the write lock up front (no
deadlock on lock upgrade); readers never block the writer (WAL). Each thread has its own
connection. Another process's commit is seen through ``PRAGMA data_version``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from sqew import errors
from sqew.backends.base import Backend, Lead, Tx, Waiter, WriteSession
from sqew.backends.errors import driver_errors, is_read_only, translate
from sqew.backends.revisions import SCHEMA_HEAD, check_known
from sqew.backends.sqlite import connection, lockfile
from sqew.backends.sqlite.session import SqliteWriteSession
from sqew.backends.sqlite.tx import SqliteTx
from sqew.backends.sqlite.waiter import SqliteWaiter


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
        create: create the database if the file does not exist (else ``Unavailable``).
        read_only: open the file for reading only (a file its reader may not write): nothing
            is created or migrated, and every write is ``Unavailable`` ("read-only").
    """

    statements_on_loop = True

    def __init__(self, path: str | os.PathLike[str], *, durability: str = "normal",
                 upgrade: bool = False, trace: Callable[[str], None] | None = None,
                 create: bool = True, read_only: bool = False) -> None:
        if durability not in ("normal", "full"):
            raise errors.ValidationError("durability must be 'normal' or 'full'")
        self.path = Path(path)
        self.read_only = read_only
        self._create = create and not read_only
        self._sync = "FULL" if durability == "full" else "NORMAL"
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False
        self._trace = trace
        try:
            _check_path(self.path)
        except OSError as exc:  # a directory on the way this user may not enter, say
            raise _opening_error(self.path, exc) from exc
        self._prepare(upgrade)

    # --- opening --------------------------------------------------------------------------------
    def _prepare(self, upgrade: bool) -> None:
        """Check the schema, migrating a new file; refuse a foreign or newer one untouched.

        The checks run on a bare connection, before WAL mode is switched on, so a refused file
        is left exactly as it was.

        Below the head the file is judged under the migration lock: a process creating or
        upgrading it holds that lock, and what it has committed so far (no schema yet, or an
        older revision) is not what the file will be; so the holder is waited for and the
        file read again. A file that looks refused waits for the lock only if its lock file
        exists (sqew makes it before writing a schema): another application's file is refused
        with its directory left exactly as it was.
        """
        try:
            if not self.path.exists():
                if not self._create:
                    raise errors.Unavailable(
                        f"no database at '{self.path}' (create one with `sqew --db "
                        f"{self.path} db upgrade`, or make a queue with `queue add`)")
                _create_private(self.path)
            rev = _schema_revision(self.path, self.read_only)
            if rev == SCHEMA_HEAD:
                return
            if self.read_only:  # nothing may be migrated: judged as it is
                try:
                    _refuse(self.path, rev, upgrade=False)
                except errors.SqewError as exc:
                    raise type(exc)(f"cannot open database '{self.path}': {exc.message}") \
                        from None
                raise errors.Unavailable(f"cannot open database '{self.path}': it has no "
                                         "sqew schema, and it is opened read-only")
            try:
                try:
                    _refuse(self.path, rev, upgrade)
                    refused = False
                except errors.Unavailable:
                    refused = True
                with lockfile.holding(self.path, create=not refused):
                    self._migrate(upgrade)  # judged again: refuses it, or migrates it
            except errors.SqewError as exc:
                raise type(exc)(f"cannot open database '{self.path}': {exc.message}") from None
        except errors.SqewError:
            raise
        except Exception as exc:
            raise _opening_error(self.path, exc) from exc

    def _migrate(self, upgrade: bool) -> None:
        rev = _schema_revision(self.path)  # again: another process may have migrated meanwhile
        if rev == SCHEMA_HEAD:
            return
        _refuse(self.path, rev, upgrade)
        from sqew import migrate  # Alembic only when a schema must be written

        self._connect().close()  # WAL from the first write on
        migrate.upgrade_file(self.path)

    def _connect(self) -> sqlite3.Connection:
        return connection.connect(self.path, synchronous=self._sync, trace=self._trace,
                                  read_only=self.read_only)

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
        if self.read_only:
            raise errors.Unavailable(
                f"the database '{self.path}' is read-only here: this user may read it, not "
                "write it")
        return self._transaction("BEGIN IMMEDIATE")  # (begun by ``_begun``)

    def read(self) -> AbstractContextManager[Tx]:
        return self._transaction("BEGIN")

    def _forget(self, conn: sqlite3.Connection) -> None:
        """Close this thread's connection ``conn``: its next call opens a new one."""
        self._local.conn = None
        with self._lock:
            if conn in self._all:
                self._all.remove(conn)
        with contextlib.suppress(sqlite3.Error):
            conn.close()

    def _begun(self, begin: str) -> sqlite3.Connection:
        """This thread's connection, its transaction begun with ``begin``.

        SQLite opens a file it may not write (``chmod a-w``, a read-only directory) read-only
        without a word, and the connection stays read-only for good, whatever becomes of the
        file's modes. So a write whose connection says it may not write is tried once more on
        a new connection: refused again while the file is read-only, done once it is not.
        """
        conn = self._conn()
        if begin == "BEGIN":
            conn.execute(begin)
            return conn
        try:
            connection.begin_write(conn)
        except sqlite3.Error as exc:
            if not is_read_only(exc):
                raise
            self._forget(conn)
            conn = self._conn()
            try:
                connection.begin_write(conn)
            except sqlite3.Error as again:
                if is_read_only(again):
                    raise connection.still_read_only(self.path) from again
                raise
        return conn

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        with driver_errors():
            conn = self._begun(begin)
            try:
                yield SqliteTx(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def write_session(self) -> WriteSession:
        return SqliteWriteSession(self.path, self._connect, durable=self._sync == "FULL")

    def waiter(self) -> Waiter:
        return SqliteWaiter(self._conn)

    def try_lead(self, role: str, *, brief: bool = False) -> Lead | None:
        """A lock of the role's own file (``lockfile.try_lead``), never the database file
        (taken the same way when ``brief``: a lock file costs no connection)."""
        try:
            return lockfile.try_lead(self.path, role)
        except OSError as exc:
            raise errors.Unavailable(
                f"cannot open the lock file '{lockfile.lead_path(self.path, role)}': "
                f"{exc.strerror or exc}"
            ) from exc

    def maintain(self) -> None:
        conn = self._conn()
        with driver_errors():
            conn.execute("ANALYZE")
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            if pages and free / pages > 0.25:  # only worth the full rewrite when much is free
                conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def ping(self) -> None:
        with driver_errors():
            self._conn().execute("SELECT 1").fetchone()

    def schema_revision(self) -> str | None:
        with driver_errors():
            row = self._conn().execute("SELECT version_num FROM alembic_version").fetchone()
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


def _check_path(path: Path) -> None:
    where = f"cannot open database '{path}'"
    if path.is_dir():
        raise errors.Unavailable(f"{where}: it is a directory")
    if not path.parent.is_dir():
        raise errors.Unavailable(f"{where}: directory '{path.parent}' does not exist")
    if path.exists() and not os.access(path, os.R_OK):
        raise errors.Unavailable(f"{where}: permission denied")


def _create_private(path: Path) -> None:
    """Create an empty database file readable by its owner only (0600): it will hold HMAC
    secrets. SQLite gives the ``-wal`` and ``-shm`` files it makes the database's mode.

    Made under another name and linked into place, so that no descriptor of the file is ever
    closed by this process while a connection of it may hold a lock on it (a close drops the
    process's POSIX locks on the file). Someone else creating it first is fine; where links
    cannot be made, it is created in place (a connection of this process opening it in that
    instant would lose its locks; only a file system without hard links gets there).
    """
    spare = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.new")
    try:
        os.close(os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            os.link(spare, path)
        except FileExistsError:
            pass
        except OSError:
            with contextlib.suppress(FileExistsError):
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        finally:
            os.unlink(spare)
    except OSError:  # a read-only directory, say: opening the file will tell
        return


def _opening_error(path: Path, exc: BaseException) -> errors.SqewError:
    if isinstance(exc, PermissionError):
        return errors.Unavailable(f"cannot open database '{path}': permission denied")
    if isinstance(exc, OSError):
        return errors.Unavailable(f"cannot open database '{path}': {exc.strerror or exc}")
    err = translate(exc)
    return type(err)(f"cannot open database '{path}': {err.message}")


def _schema_revision(path: Path, read_only: bool = False) -> str | None:
    """The revision in ``alembic_version``, or None when there is no such table.

    Raises sqlite3.DatabaseError for a file that is not a database.
    """
    conn = connection.bare_connection(path, read_only)
    try:
        if conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
        ).fetchone() is None:  # (this read also fails fast on a file that is no database)
            return None
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        return None if row is None else str(row[0])
    finally:
        conn.close()


def _refuse(path: Path, rev: str | None, upgrade: bool) -> None:
    """Raise Unavailable unless the file at revision ``rev`` may be migrated to the head."""
    if rev is None:
        if _has_tables(path):
            raise errors.Unavailable("the file is a SQLite database but not a sqew database")
        return
    check_known(rev, upgrade)


def _has_tables(path: Path) -> bool:
    conn = connection.bare_connection(path)
    try:
        return conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
    finally:
        conn.close()
