"""SQLite errors become sqew errors by their result code, never by their message text.

Each error here is a real one, made by SQLite on a real file.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy.exc

from sqew import errors
from sqew.backends import open_backend
from sqew.backends.errors import translate


def raised(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except Exception as exc:
        return exc
    raise AssertionError("no error")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "q.db"
    open_backend(path).close()
    return path


def busy_error(db: Path) -> sqlite3.Error:
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as holder, \
            contextlib.closing(sqlite3.connect(db, isolation_level=None, timeout=0)) as other:
        holder.execute("BEGIN IMMEDIATE")
        exc = raised(lambda: other.execute("BEGIN IMMEDIATE"))
        holder.execute("ROLLBACK")
    assert isinstance(exc, sqlite3.Error)
    return exc


def test_busy(db: Path) -> None:
    err = translate(busy_error(db))
    assert (type(err), err.message) == (errors.Unavailable, "the database is busy; try again")


def test_read_only(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        err = translate(raised(lambda: conn.execute("CREATE TABLE t (a)")))
    assert (type(err), err.message) == (errors.Unavailable, "the database is read-only")


def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        err = translate(raised(lambda: conn.execute("PRAGMA schema_version").fetchone()))
    assert (type(err), err.message) == (errors.Unavailable, "the file is not a SQLite database")


def test_cannot_open(tmp_path: Path) -> None:
    err = translate(raised(lambda: sqlite3.connect(tmp_path / "no-such-dir" / "q.db")))
    assert (type(err), err.message) == (errors.Unavailable, "the database file cannot be opened")


def test_anything_else_is_an_internal_error_and_the_message_text_is_not_read(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert type(translate(raised(lambda: conn.execute("SELEC 1")))) is errors.InternalError
    closed = sqlite3.connect(db)
    closed.close()
    assert type(translate(raised(lambda: closed.execute("SELECT 1")))) is errors.InternalError
    # The words of a busy error, without its code: nothing to go by.
    assert type(translate(sqlite3.OperationalError("database is locked"))) is errors.InternalError


def test_sqlalchemy_wrapped_errors_are_unwrapped(db: Path) -> None:
    wrapped = sqlalchemy.exc.OperationalError("BEGIN IMMEDIATE", None, busy_error(db))
    assert translate(wrapped).message == "the database is busy; try again"


def test_a_write_session_after_the_disk_filled_up(db: Path) -> None:
    """SQLITE_FULL rolls the whole transaction back: the session says so, and goes on."""
    backend = open_backend(db)
    session = backend.write_session()
    try:
        conn = session.tx.c  # type: ignore[attr-defined]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count={pages + 3}")  # a disk with 3 pages left
        session.begin_waiting()  # type: ignore[attr-defined]
        assert session.in_transaction
        conn.execute("CREATE TABLE big (a)")
        exc = raised(lambda: conn.execute("INSERT INTO big VALUES (?)", ("x" * 100_000,)))
        err = translate(exc)
        assert (type(err), err.message) == (
            errors.Unavailable, "the disk holding the database is full"
        )
        assert not session.in_transaction
        session.rollback()
        assert session.try_begin()  # type: ignore[attr-defined]
        session.commit_now()  # type: ignore[attr-defined]
    finally:
        session.close()
        backend.close()
