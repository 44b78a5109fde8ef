"""Storage backends behind one contract (``base.py``); ``open_backend`` picks one by target."""

from __future__ import annotations

import os
from collections.abc import Callable

from sqew.backends.base import Backend
from sqew.errors import ValidationError
from sqew.locations import in_memory, sqlite_path

__all__ = ["Backend", "open_backend", "sqlite_path"]


def open_backend(
    target: str | os.PathLike[str], *, durability: str = "normal", upgrade: bool = False,
    trace: Callable[[str], None] | None = None,
) -> Backend:
    """Open the database a target names: a file path or ``sqlite:///path``.

    ``trace`` is called with the text of every SQL statement the backend runs (diagnostics).

    Raises:
        sqew.errors.Unavailable: the database cannot be opened or is not a sqew database.
        sqew.errors.ValidationError: the target names an unsupported kind of database.

    (``sqew.errors`` is imported by name here: the submodule ``sqew.backends.errors`` would
    shadow a module-level ``errors``.)
    """
    path = sqlite_path(target)
    if path is None:
        scheme = os.fspath(target).split("://", 1)[0]
        raise ValidationError(f"unsupported database URL scheme '{scheme}'")
    if not path:
        raise ValidationError("empty database path")
    if in_memory(path):
        raise ValidationError("an in-memory database (:memory:) cannot hold a queue; give a file")
    from sqew.backends.sqlite import SqliteBackend

    return SqliteBackend(path, durability=durability, upgrade=upgrade, trace=trace)
