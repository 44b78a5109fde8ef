"""Schema migrations through Alembic's API: upgrade, current revision, head.

The Alembic scripts live in the repository's top-level ``alembic/`` directory. A wheel ships
them inside the package as ``sqew/_alembic`` (hatch ``force-include``), so ``sqew db upgrade``
works after ``pip install``; an editable install reads them from the source tree.
"""

from __future__ import annotations

import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, pool

log = logging.getLogger("sqew.migrate")
_PACKAGE = Path(__file__).resolve().parent
_CANDIDATES = (
    _PACKAGE / "_alembic",  # an installed wheel
    _PACKAGE.parent / "alembic",  # the source tree (editable install, checkout)
)


def scripts_dir() -> Path:
    """The directory holding Alembic's ``env.py`` and ``versions/`` for this sqew.

    Raises:
        RuntimeError: neither the installed copy nor the source tree's is there (a broken
            install); said plainly rather than as an Alembic error about a missing file.
    """
    for candidate in _CANDIDATES:
        # Next to an installed sqew, ``../alembic`` is the Alembic *library*: only a directory
        # with sqew's env.py and versions/ counts.
        if (candidate / "env.py").is_file() and (candidate / "versions").is_dir():
            return candidate
    raise RuntimeError(
        "sqew's migration scripts are missing (looked in "
        + ", ".join(str(c) for c in _CANDIDATES) + "); reinstall sqew"
    )


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for sqew's migrations, optionally bound to a connection."""
    cfg = Config()
    cfg.set_main_option("script_location", str(scripts_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head() -> str:
    """The newest revision this code knows."""
    rev = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert rev is not None
    return rev


def known_revisions() -> set[str]:
    """Every revision this code knows."""
    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def current(connection: Connection) -> str | None:
    """The revision a database is at (None when it has no sqew schema)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection) -> None:
    """Apply every pending revision on ``connection`` and commit; log what changed (event
    ``migrations_applied`` on ``sqew.migrate``)."""
    before = current(connection)
    command.upgrade(alembic_config(connection), "head")
    connection.commit()
    after = current(connection)
    if after != before:
        log.info("migrations applied: schema %s -> %s", before or "(new database)", after,
                 extra={"event": "migrations_applied", "from_revision": before,
                        "to_revision": after})


def upgrade_postgres(conninfo: str) -> None:
    """Apply every pending revision to the PostgreSQL database of a libpq connection string."""
    import psycopg  # the postgres extra

    engine = create_engine(
        "postgresql+psycopg://", creator=lambda: psycopg.connect(conninfo),
        poolclass=pool.NullPool,
    )
    try:
        with engine.connect() as conn:
            upgrade(conn)
    finally:
        engine.dispose()


def upgrade_file(path: str | Path) -> None:
    """Apply every pending revision to the SQLite file at ``path``."""
    engine = create_engine(f"sqlite:///{path}", poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            upgrade(conn)
    finally:
        engine.dispose()
