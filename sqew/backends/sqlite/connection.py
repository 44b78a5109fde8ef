"""How sqew opens a SQLite connection: the pragmas every connection gets, and their constants."""

from __future__ import annotations

import re
import sqlite3
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
        sqew.errors.Unavailable: the database cannot use WAL mode.
        sqlite3.Error: the file is not a database, or cannot be opened.
    """
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


def bare_connection(path: Path, read_only: bool = False) -> sqlite3.Connection:
    """A connection that changes nothing about the file (no WAL switch, no pragmas)."""
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
