"""Schema migrations through Alembic's API: upgrade, current revision, head.

The Alembic scripts live in the repository's top-level ``alembic/`` directory. A wheel ships
them inside the package as ``sqew/_alembic`` (hatch ``force-include``), so ``sqew db upgrade``
works after ``pip install``; an editable install reads them from the source tree.

A migration is atomic: a new database gets its whole schema in one transaction, an existing
one is upgraded one revision per transaction (the revisions done stay done), so a process
killed at any point leaves the database at a revision, never between two. PostgreSQL's DDL is
transactional as it is; SQLite's is too, but Python's ``sqlite3`` commits DDL on its own in
its default transaction handling, so a SQLite engine here says ``BEGIN`` itself
(``sqlite_engine``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, pool

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


def alembic_config(connection: Connection | None = None, *, per_revision: bool = True) -> Config:
    """An Alembic config for sqew's migrations, optionally bound to a connection.

    Args:
        connection: the connection ``env.py`` runs the migrations on (not in a transaction,
            or Alembic leaves the transactions to its owner).
        per_revision: a transaction per revision; else one around all of them.
    """
    cfg = Config()
    cfg.set_main_option("script_location", str(scripts_dir()))
    cfg.attributes["transaction_per_migration"] = per_revision
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
    """Apply every pending revision on ``connection``, atomically (see the module's
    docstring); log what changed (event ``migrations_applied`` on ``sqew.migrate``).

    ``connection`` must begin real transactions (``sqlite_engine`` on SQLite).
    """
    before = current(connection)
    # The read's transaction ends here, so that Alembic's own begin and commit are the
    # migration's transactions (it leaves a transaction it finds open to its owner).
    connection.commit()
    command.upgrade(alembic_config(connection, per_revision=before is not None), "head")
    after = current(connection)
    connection.commit()
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


def sqlite_engine(path: str | Path) -> Engine:
    """An engine on the SQLite file at ``path`` whose transactions hold its DDL.

    In its default transaction handling Python's ``sqlite3`` begins a transaction only before
    an INSERT, UPDATE, DELETE or REPLACE, so a ``CREATE`` or ``ALTER`` outside one commits at
    once. Here the driver begins none (``isolation_level = None``) and SQLAlchemy's begin says
    ``BEGIN IMMEDIATE``: every statement of a transaction, DDL included, commits or rolls back
    with it, and the write lock is taken up front.
    """
    engine = create_engine(f"sqlite:///{path}", poolclass=pool.NullPool)
    sqlite_transactions(engine)
    return engine


def sqlite_transactions(engine: Engine) -> None:
    """Make a SQLite ``engine``'s transactions real ones (``sqlite_engine``); a no-op on
    another database."""
    if engine.dialect.name != "sqlite":
        return

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def upgrade_file(path: str | Path) -> None:
    """Apply every pending revision to the SQLite file at ``path`` (see ``upgrade``)."""
    engine = sqlite_engine(path)
    try:
        with engine.connect() as conn:
            upgrade(conn)
    finally:
        engine.dispose()
