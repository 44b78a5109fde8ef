"""Alembic environment: runs on the connection sqew hands over (``config.attributes``).

sqew.migrate points Alembic here (or at the copy a wheel ships as ``sqew/_alembic``);
``alembic.ini`` does for developers running ``alembic revision --autogenerate``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import engine_from_config, pool

from sqew.backends.schema import include_object, metadata
from sqew.migrate import sqlite_transactions

config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,  # type: ignore[arg-type]
        target_metadata=metadata,
        render_as_batch=True,
        compare_type=True,
        include_object=include_object(connection.dialect.name),  # type: ignore[attr-defined]
        # Each revision, or a new database's whole schema, in one transaction: DDL is
        # transactional on PostgreSQL and on SQLite (through sqew.migrate.sqlite_engine),
        # so a process killed mid-migration leaves the database at a revision.
        transactional_ddl=True,
        transaction_per_migration=config.attributes.get("transaction_per_migration", True),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section) or {},
        prefix="sqlalchemy.",
        poolclass=pool.NullPool,
    )
    sqlite_transactions(engine)
    with engine.connect() as conn:
        _run(conn)


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_online()
