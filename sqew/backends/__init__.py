"""Storage backends behind one contract (``base.py``); ``open_backend`` picks one by target."""

from __future__ import annotations

import os
from collections.abc import Callable

from sqew.backends.base import Backend
from sqew.errors import ValidationError
from sqew.locations import in_memory, is_postgres, sqlite_path

__all__ = ["Backend", "open_backend", "sqlite_path"]


def open_backend(
    target: str | os.PathLike[str], *, durability: str = "normal", upgrade: bool = False,
    trace: Callable[[str], None] | None = None, create: bool = True, read_only: bool = False,
) -> Backend:
    """Open the database a target names: a file path, ``sqlite:///path``, or a PostgreSQL URL
    (``postgresql+psycopg://…``, ``postgresql://…``; needs the ``postgres`` extra).

    ``trace`` is called with the text of every SQL statement the backend runs (diagnostics).
    Without ``create`` a database that does not exist (no file; no sqew schema in a
    PostgreSQL database) is ``Unavailable`` instead of created; ``read_only`` opens a SQLite
    file for reading only (nothing is created or migrated; writes are ``Unavailable``).

    Raises:
        sqew.errors.Unavailable: the database cannot be opened or is not a sqew database.
        sqew.errors.ValidationError: the target names an unsupported kind of database.

    (``sqew.errors`` is imported by name here: the submodule ``sqew.backends.errors`` would
    shadow a module-level ``errors``.)
    """
    text = os.fspath(target)
    if is_postgres(text):
        return _postgres(text, durability=durability, upgrade=upgrade, trace=trace,
                         create=create)
    path = sqlite_path(target)
    if path is None:
        scheme = os.fspath(target).split("://", 1)[0]
        raise ValidationError(f"unsupported database URL scheme '{scheme}'")
    if not path:
        raise ValidationError("empty database path")
    if in_memory(path):
        raise ValidationError("an in-memory database (:memory:) cannot hold a queue; give a file")
    from sqew.backends.sqlite import SqliteBackend

    return SqliteBackend(path, durability=durability, upgrade=upgrade, trace=trace,
                         create=create, read_only=read_only)


def _postgres(
    url: str, *, durability: str, upgrade: bool, trace: Callable[[str], None] | None,
    create: bool,
) -> Backend:
    try:
        from sqew.backends.postgres import PostgresBackend
    except ImportError:
        raise ValidationError(
            "a PostgreSQL database needs the postgres extra: pip install 'sqew[postgres]'"
        ) from None
    return PostgresBackend(url, durability=durability, upgrade=upgrade, trace=trace,
                           create=create)
