"""Schema migrations through Alembic's API: upgrade, current revision, head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, inspect, pool

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for sqew's bundled migrations, optionally bound to a connection."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
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


def has_tables(connection: Connection) -> bool:
    """Whether the database has any table at all."""
    return bool(inspect(connection).get_table_names())


def upgrade(connection: Connection) -> None:
    """Apply every pending revision on ``connection`` and commit."""
    command.upgrade(alembic_config(connection), "head")
    connection.commit()


def upgrade_file(path: str | Path) -> None:
    """Apply every pending revision to the SQLite file at ``path``."""
    engine = create_engine(f"sqlite:///{path}", poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            upgrade(conn)
    finally:
        engine.dispose()
