"""sqew's own locks between processes on one database: ``flock`` on ``<db>-lock`` (the group
committers' write lock), and on ``<db>-lock-<role>`` for a role one process leads (``Leader``).

A role has a file of its own because ``flock`` locks a whole file: a leader holding ``<db>-lock``
would stop every committer.

Never on the database file itself: closing *any* descriptor of a file drops every POSIX lock
the process holds on it, SQLite's included. A lock taken on the database file and released
with ``close()`` once let another process believe it held the last connection, checkpoint and
delete the WAL under this process's open connections, whose later commits then went into the
deleted file: acknowledged and lost. SQLite never opens ``<db>-lock``, so opening and closing
it is harmless.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from sqew.backends.base import Lead

SUFFIX = "-lock"


def lock_path(db: Path) -> Path:
    """The lock file of database ``db`` (next to it, like SQLite's ``-wal`` and ``-shm``)."""
    return db.with_name(db.name + SUFFIX)


def lead_path(db: Path, role: str) -> Path:
    """The lock file of ``role`` ("reaper") of database ``db``."""
    return db.with_name(f"{db.name}{SUFFIX}-{role}")


def _open(path: Path, create: bool = True) -> int:
    # flock needs no write access: a read-only descriptor of an existing lock file will do.
    if create:
        try:
            return os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)
        except OSError:
            pass
    return os.open(path, os.O_RDONLY)


class LockFile:
    """An exclusive ``flock`` on a database's lock file, held through one descriptor.

    ``flock`` locks belong to an open file description: two ``LockFile`` of one database
    exclude each other even within a process.

    Args:
        db: the database file.
        role: lock the file of this role (``lead_path``) instead of the write lock.
        create: make the lock file if there is none.

    Raises:
        OSError: the lock file can neither be created nor opened (or, without ``create``,
            does not exist).
    """

    def __init__(self, db: Path, role: str | None = None, *, create: bool = True) -> None:
        self._fd = _open(lock_path(db) if role is None else lead_path(db, role), create)
        self.held = False

    def acquire(self, wait: bool) -> bool:
        """Take the lock (waiting for it if ``wait``); False if another holder has it."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.held = True
        return True

    def release(self) -> None:
        """Let go of the lock if held."""
        if self.held:
            self.held = False
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Release and close the descriptor (idempotent)."""
        if self._fd >= 0:
            self.release()
            os.close(self._fd)
            self._fd = -1


@contextlib.contextmanager
def holding(db: Path, *, create: bool = True) -> Iterator[None]:
    """Hold the lock for a block, waiting for it (a migration, or the look at a file that
    may be being migrated).

    Where the lock file can be neither created nor opened (a read-only directory) nothing can
    be migrated there either: the block runs without the lock, to check the schema read-only.
    Without ``create`` a missing lock file is not made, and the block runs without the lock.
    """
    try:
        lock = LockFile(db, create=create)
    except OSError:
        yield
        return
    try:
        lock.acquire(wait=True)
        yield
    finally:
        lock.close()


class Leader(Lead):
    """A role held through an ``flock`` on its lock file, until released or the process dies
    (the kernel drops the lock with the descriptor: a follower's next try takes over)."""

    def __init__(self, lock: LockFile) -> None:
        self._lock = lock

    @property
    def held(self) -> bool:
        # An flock is never taken away from a living process that holds the descriptor.
        return self._lock.held

    def release(self) -> None:
        self._lock.close()


def try_lead(db: Path, role: str) -> Leader | None:
    """Take ``role`` of database ``db`` now if no other holder has it (never waits).

    Raises:
        OSError: the role's lock file can neither be created nor opened.
    """
    if not role.isalnum():  # it names a file
        raise ValueError(f"a role is a word, not {role!r}")
    lock = LockFile(db, role)
    if lock.acquire(wait=False):
        return Leader(lock)
    lock.close()
    return None
