"""A throwaway database for ``sqew serve --memory`` and ``sqew.testing.serve()`` (docs/sqs.md,
"For tests and development").

The database is a SQLite file in a private directory (mode 0700, made for it alone) in the
system's shared memory (``/dev/shm``, a RAM file system) where there is one, else in the
temporary directory, and the directory is removed when the server stops. A SQLite database
opened as ``:memory:`` is not used: sqew's SQLite backend is built on WAL mode, its
``-shm`` index and lock files beside the database, and connections of its own on several
threads, none of which an in-memory database has.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

SHARED_MEMORY = Path("/dev/shm")
"""Linux's RAM file system: a database there is never written to a disk."""


def base_directory() -> str | None:
    """Where the private directory goes: ``/dev/shm`` when usable, else the temp directory
    (None: ``tempfile``'s choice)."""
    usable = SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK | os.X_OK)
    return str(SHARED_MEMORY) if usable else None


@contextlib.contextmanager
def database() -> Iterator[Path]:
    """The path of a fresh database in a private directory, removed (with whatever is in it)
    on exit."""
    directory = tempfile.mkdtemp(prefix="sqew-memory-", dir=base_directory())
    try:
        yield Path(directory) / "sqew.db"
    finally:
        shutil.rmtree(directory, ignore_errors=True)
