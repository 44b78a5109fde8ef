"""Driver errors → SqewError, at the backend boundary: ``driver_errors``, one table per driver.

Every place where a backend's statements run on behalf of the service (a transaction of
``Backend.write``/``read``, a write session's steps and ``WriteSession.driver_errors`` blocks,
a savepoint, the backend's own calls) runs them inside ``driver_errors()``: above the backend,
code sees ``SqewError``s only, a transaction the database aborted for a conflict with another
as ``Conflict`` (which the writers run again).

SQLite errors are told apart by their result code (``sqlite_errorcode``), PostgreSQL's
(psycopg) by their SQLSTATE, never by message text: the text is for people and changes
between versions. Nothing here imports psycopg: it is an optional dependency, and its errors
are recognised by their module and their ``sqlstate``.
"""

from __future__ import annotations

import sqlite3
from types import TracebackType

from sqew import errors


class Conflict(errors.Unavailable):
    """The database aborted the transaction for a conflict with another (a deadlock, a
    serialization failure): nothing of it was written, and it may simply run again. To a
    client it is ``Unavailable`` (503), should it still conflict after the writer's retries."""


class _DriverErrors:
    """The context manager ``driver_errors`` returns (one instance: it keeps no state)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None,
    ) -> None:
        if exc is not None and not isinstance(exc, errors.SqewError) and is_driver_error(exc):
            raise translate(exc) from exc


_DRIVER_ERRORS = _DriverErrors()


def driver_errors() -> _DriverErrors:
    """A block whose driver errors (sqlite3's, psycopg's, SQLAlchemy's) come out as the
    ``SqewError`` they mean (``translate``; the driver's error is its ``__cause__``). Other
    exceptions pass unchanged."""
    return _DRIVER_ERRORS


def is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a database driver (or SQLAlchemy around one)."""
    if isinstance(exc, sqlite3.Error):
        return True
    return type(exc).__module__.startswith(("psycopg", "sqlalchemy"))

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


_PG_RETRY = "the database aborted a conflicting transaction; try again"
_PG_CONFLICT = "40"  # SQLSTATE class: serialization failure, deadlock
_PG_DOWN = "the database is unreachable or restarting; try again"
_PG_CLASSES: dict[str, tuple[type[errors.SqewError], str]] = {
    # SQLSTATE class (its first two characters) → (error, message)
    "08": (errors.Unavailable, _PG_DOWN),  # connection exception
    _PG_CONFLICT: (Conflict, _PG_RETRY),
    "53": (errors.Unavailable, "the database is out of resources (disk, memory, connections)"),
    "57": (errors.Unavailable, _PG_DOWN),  # admin/crash shutdown, cannot connect now, cancel
    "58": (errors.Unavailable, "the database could not be read or written (I/O error)"),
    "28": (errors.Unavailable, "the database refused the credentials"),
    "3D": (errors.Unavailable, "the database does not exist"),
    "55": (errors.Unavailable, "the database is busy; try again"),  # lock not available
    "XX": (errors.Unavailable, "the database reported an internal error (corruption?)"),
}
_PG_NUL = ("a text value (an attribute, an error text, a secret) holds a NUL character "
           "(\\u0000), which PostgreSQL cannot store")
_PG_CODES: dict[str, tuple[type[errors.SqewError], str]] = {
    "22021": (errors.ValidationError, _PG_NUL),  # character not in repertoire
    "22P05": (errors.ValidationError, _PG_NUL),  # untranslatable character (\u0000 in JSON)
    "25006": (errors.Unavailable, "the database is read-only (a standby?)"),
    "42501": (errors.Unavailable, "permission to the database is denied"),
}


def pg_sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg error (None for other exceptions, and for errors psycopg
    raises itself, such as a lost or closed connection)."""
    if not type(exc).__module__.startswith("psycopg"):
        return None
    state = getattr(exc, "sqlstate", None)
    return state if isinstance(state, str) else None


def _pg_translate(exc: BaseException) -> errors.SqewError | None:
    module = type(exc).__module__
    if not module.startswith("psycopg"):
        return None
    state = pg_sqlstate(exc)
    if state is not None:
        found = _PG_CODES.get(state) or _PG_CLASSES.get(state[:2])
        return found[0](found[1]) if found else None
    if module.startswith("psycopg_pool"):  # no connection free in time, or the pool closed
        return errors.Unavailable("no database connection became free in time; try again")
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"OperationalError", "InterfaceError"}:  # connecting failed; connection lost
        return errors.Unavailable(_PG_DOWN)
    if "DataError" in names:  # psycopg's own refusal to send a value: a text holding NUL
        return errors.ValidationError(_PG_NUL)
    return None


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


def is_read_only(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection may not write (``SQLITE_READONLY``, any of its
    extended codes)."""
    return sqlite_code(exc) == sqlite3.SQLITE_READONLY


def translate(exc: BaseException) -> errors.SqewError:
    """The SqewError a driver exception means to a user (InternalError if unknown)."""
    if isinstance(exc, errors.SqewError):
        return exc
    pg = _pg_translate(exc)
    if pg is not None:
        return pg
    code = sqlite_code(exc)
    if code is not None and code in _SQLITE_CODES:
        cls, message = _SQLITE_CODES[code]
        return cls(message)
    orig = getattr(exc, "orig", None)  # SQLAlchemy wraps driver errors
    if orig is not None and orig is not exc:
        return translate(orig)
    return errors.InternalError()
