"""Driver errors → SqewError, at the backend boundary (one table, raise … from exc).

SQLite errors are told apart by their result code (``sqlite_errorcode``, Python 3.11), never
by message text: the text is for people and changes between SQLite versions.
"""

from __future__ import annotations

import sqlite3

from sqew import errors

_BUSY = "the database is busy; try again"
_SQLITE_CODES: dict[int, tuple[type[errors.SqewError], str]] = {
    # primary result code → (error, message); extended codes map through their primary code
    sqlite3.SQLITE_BUSY: (errors.Unavailable, _BUSY),
    sqlite3.SQLITE_LOCKED: (errors.Unavailable, _BUSY),
    sqlite3.SQLITE_PROTOCOL: (errors.Unavailable, _BUSY),
    sqlite3.SQLITE_READONLY: (errors.Unavailable, "the database is read-only"),
    sqlite3.SQLITE_FULL: (errors.Unavailable, "the disk holding the database is full"),
    sqlite3.SQLITE_IOERR: (
        errors.Unavailable, "the database could not be read or written (I/O error)"
    ),
    sqlite3.SQLITE_NOTADB: (errors.Unavailable, "the file is not a SQLite database"),
    sqlite3.SQLITE_CORRUPT: (errors.Unavailable, "the database file is corrupt"),
    sqlite3.SQLITE_CANTOPEN: (errors.Unavailable, "the database file cannot be opened"),
    sqlite3.SQLITE_PERM: (errors.Unavailable, "permission to the database file is denied"),
    sqlite3.SQLITE_AUTH: (errors.Unavailable, "permission to the database file is denied"),
    sqlite3.SQLITE_NOMEM: (errors.Unavailable, "the database ran out of memory"),
    sqlite3.SQLITE_NOLFS: (errors.Unavailable, "the database file is too large for this system"),
}


def sqlite_code(exc: BaseException) -> int | None:
    """The primary SQLite result code of a sqlite3 error (None for other exceptions, and for
    sqlite3 errors raised by the module itself, such as a closed connection)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or not isinstance(code, int):
        return None
    return code & 0xFF  # extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_IOERR_WRITE…) → primary


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` says another connection holds the lock (try again later)."""
    return sqlite_code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def translate(exc: BaseException) -> errors.SqewError:
    """The SqewError a driver exception means to a user (InternalError if unknown)."""
    if isinstance(exc, errors.SqewError):
        return exc
    code = sqlite_code(exc)
    if code is not None and code in _SQLITE_CODES:
        cls, message = _SQLITE_CODES[code]
        return cls(message)
    orig = getattr(exc, "orig", None)  # SQLAlchemy wraps driver errors
    if orig is not None and orig is not exc:
        return translate(orig)
    return errors.InternalError()
