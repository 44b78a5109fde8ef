"""How sqew opens a SQLite connection: the pragmas every connection gets, and their constants."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from sqew import errors

BUSY_TIMEOUT_MS = 30_000
"""How long a statement waits for a lock another connection holds."""
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
"""The size (bytes) the ``-wal`` file is cut back to when SQLite starts it over.

SQLite reuses the WAL file from its beginning after a complete checkpoint but never shrinks
it: one long reader under steady writes once left a 309 MB WAL on disk for good. With this
limit the first commit after the restart truncates the file to 64 MiB (a size a busy server
soon reuses, so it is not regrown page by page)."""
CACHE_KIB = 65_536
"""Page cache per connection (``cache_size=-KiB``)."""
MMAP_BYTES = 256 * 1024 * 1024
"""Memory-mapped reads (``mmap_size``)."""


_LITERAL = re.compile(r"'(?:[^']|'')*'|X'[0-9A-Fa-f]*'")


def redacted(sql: str) -> str:
    """``sql`` with every string and blob literal replaced by ``'?'``.

    SQLite hands a trace callback each statement with its parameters filled in: payloads,
    queue HMAC secrets, key hashes. A statement log (``trace_sql``) shows numbers and the
    statement's shape, never those.
    """
    return _LITERAL.sub("'?'", sql)


def connect(
    path: Path, *, synchronous: str, trace: Callable[[str], None] | None = None,
    read_only: bool = False,
) -> sqlite3.Connection:
    """A connection in WAL mode with sqew's pragmas, in autocommit mode (sqew says BEGIN);
    with ``read_only``, one that can only read (the journal mode is left as it is).

    Raises:
        sqew.errors.Unavailable: the database cannot use WAL mode, or its ``-wal`` was
            deleted while another process has it open (``refuse_a_deleted_wal``).
        sqlite3.Error: the file is not a database, or cannot be opened.
    """
    if not read_only:
        refuse_a_deleted_wal(path)
    conn = sqlite3.connect(
        _uri(path, read_only), isolation_level=None, check_same_thread=False,
        timeout=BUSY_TIMEOUT_MS / 1000, cached_statements=256, uri=True,
    )
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # fails fast on a non-database
        mode = conn.execute("PRAGMA journal_mode" if read_only else "PRAGMA journal_mode=WAL"
                            ).fetchone()[0]
        if str(mode).lower() != "wal" and not read_only:
            raise errors.Unavailable("the database cannot use WAL mode (read-only location?)")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        conn.execute("PRAGMA temp_store=MEMORY")
        if trace is not None:
            conn.set_trace_callback(lambda sql: trace(redacted(sql)))
    except BaseException:
        conn.close()
        raise
    return conn


WRITE_CHECK = "UPDATE alembic_version SET version_num = version_num WHERE 0"
"""A write statement that changes nothing (``begin_write``)."""


def begin_write(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, on a connection that can write: else ``SQLITE_READONLY``, nothing
    left open.

    SQLite opens a file it may not write (``chmod a-w``, a read-only directory) read-only
    without a word, and there ``BEGIN IMMEDIATE`` begins a read transaction. A write statement
    that changes nothing says ``SQLITE_READONLY`` at once instead (under the write lock just
    taken, it costs a microsecond), before any of the transaction's work."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(WRITE_CHECK)
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def still_read_only(path: Path) -> errors.Unavailable:
    """Why a new connection of this process still may not write ``path``.

    Either the database is read-only for this process (the file, its ``-wal`` or ``-shm``, or
    their directory), or it is not any more but this process opened its ``-shm`` while it
    was: SQLite maps a process's ``-shm`` once for all its connections, and a read-only
    mapping stays so until every connection of the process to the database is closed."""
    others = [path.with_name(path.name + s) for s in ("-wal", "-shm")]
    writable = all(os.access(p, os.W_OK) for p in [path, path.parent, *others]
                   if p.exists())
    if not writable:
        return errors.Unavailable("the database is read-only")
    return errors.Unavailable(
        f"the database '{path}' may be written again, but this process opened its -shm "
        "while it was read-only, and SQLite keeps it so while the process has the database "
        "open: restart the process")


WAL_GONE_TRIES = 5
"""How often a missing ``-wal`` is looked at again before the open is refused: a process
closing the database's last connection deletes its ``-wal`` a moment before it lets go of its
locks on the ``-shm``."""


def refuse_a_deleted_wal(path: Path) -> None:
    """Refuse to open a database whose ``-wal`` is gone while another process has it open.

    Such a ``-wal`` was deleted under that process (by hand, a cleanup script, a copy put
    back): the process goes on writing into the deleted file, while a connection opened now
    would start a new ``-wal`` beside it. Both would share the one ``-shm``, which indexes
    frames by their place in *the* ``-wal``: each would read the other's frames out of its
    own file, and the database is corrupt. The open is refused until every process that had
    it open has closed it (their last close copies their commits into the file). Another
    process has it open if it holds a lock on the ``-shm`` (Linux's ``/proc/locks``; where
    there is none, nothing is checked). Connections of this very process are not seen.

    Raises:
        sqew.errors.Unavailable: the ``-wal`` is missing and another process has the
            database open.
    """
    wal, shm = path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")
    for attempt in range(WAL_GONE_TRIES):
        if wal.exists():
            return
        holders = _lock_holders(shm)
        if not holders:
            return
        if attempt + 1 < WAL_GONE_TRIES:
            time.sleep(0.02)
    raise errors.Unavailable(
        f"the database '{path}' is open in another process (pid {min(holders)}) but its -wal "
        "file is gone (deleted while in use?); opening it now would corrupt it: stop the "
        "processes that have it open, then open it again")


def _lock_holders(file: Path) -> set[int]:
    """The other processes holding a POSIX lock on ``file`` (none if it does not exist, or
    where ``/proc/locks`` cannot be read). Nothing is opened: closing a descriptor of the
    ``-shm`` would drop this process's own locks on it."""
    try:
        st = file.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return set()
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    holders = set()
    for line in table.splitlines():
        fields = line.split()
        if "->" in fields:  # a request still waiting: not a holder
            continue
        if len(fields) >= 6 and fields[1] in ("POSIX", "OFDLCK") and fields[5] == where:
            with contextlib.suppress(ValueError):
                holders.add(int(fields[4]))
    holders.discard(os.getpid())
    return holders


def bare_connection(path: Path, read_only: bool = False) -> sqlite3.Connection:
    """A connection that changes nothing about the file (no WAL switch, no pragmas).

    Raises:
        sqew.errors.Unavailable: its ``-wal`` was deleted while another process has it open
            (``refuse_a_deleted_wal``).
    """
    if not read_only:
        refuse_a_deleted_wal(path)
    conn = sqlite3.connect(_uri(path, read_only), isolation_level=None,
                           timeout=BUSY_TIMEOUT_MS / 1000, uri=True)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn


def _uri(path: Path, read_only: bool) -> str:
    """The file's URI: read and write (never ``rwc``: the caller has made the file, or made
    sure it may), or read only.

    Read only, SQLite writes nothing. It needs the ``-wal`` and ``-shm`` files of a database in
    WAL mode, which a reader that may not write the directory cannot create: while a writer
    has the database open they exist, and are read; when none is there (no ``-wal``: nobody
    has it open, every commit is in the file), the file is read as ``immutable`` (no locks, no
    ``-shm``): it is what it is, unless a writer starts meanwhile.
    """
    uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode={'ro' if read_only else 'rw'}"
    if read_only and not path.with_name(path.name + "-wal").exists():
        uri += "&immutable=1"
    return uri
