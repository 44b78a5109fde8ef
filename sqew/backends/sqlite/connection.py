"""How sqew opens a SQLite connection: the pragmas every connection gets, and their constants."""

from __future__ import annotations

import re
import sqlite3
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
    path: Path, *, synchronous: str, trace: Callable[[str], None] | None = None
) -> sqlite3.Connection:
    """A connection in WAL mode with sqew's pragmas, in autocommit mode (sqew says BEGIN).

    Raises:
        sqew.errors.Unavailable: the database cannot use WAL mode.
        sqlite3.Error: the file is not a database, or cannot be opened.
    """
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False,
        timeout=BUSY_TIMEOUT_MS / 1000, cached_statements=256,
    )
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # fails fast on a non-database
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
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


def bare_connection(path: Path) -> sqlite3.Connection:
    """A connection that changes nothing about the file (no WAL switch, no pragmas)."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    return conn
