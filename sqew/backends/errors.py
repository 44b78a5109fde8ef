"""Driver errors → SqewError, at the backend boundary (one table, raise … from exc)."""

from __future__ import annotations

import sqlite3

from sqew import errors

_SQLITE_MESSAGES: tuple[tuple[str, type[errors.SqewError], str], ...] = (
    ("database is locked", errors.Unavailable, "the database is busy; try again"),
    ("database table is locked", errors.Unavailable, "the database is busy; try again"),
    ("readonly database", errors.Unavailable, "the database is read-only"),
    ("disk is full", errors.Unavailable, "the disk holding the database is full"),
    ("disk i/o error", errors.Unavailable, "the database could not be read or written (I/O error)"),
    ("file is not a database", errors.Unavailable, "the file is not a SQLite database"),
    ("malformed", errors.Unavailable, "the database file is corrupt"),
    ("unable to open", errors.Unavailable, "the database file cannot be opened"),
)


def translate(exc: BaseException) -> errors.SqewError:
    """The SqewError a driver exception means to a user (InternalError if unknown)."""
    if isinstance(exc, errors.SqewError):
        return exc
    text = str(exc).lower()
    if isinstance(exc, sqlite3.Error) or "sqlite3" in type(exc).__module__:
        for needle, cls, message in _SQLITE_MESSAGES:
            if needle in text:
                return cls(message)
    orig = getattr(exc, "orig", None)  # SQLAlchemy wraps driver errors
    if orig is not None and orig is not exc:
        return translate(orig)
    return errors.InternalError()
