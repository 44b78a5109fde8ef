"""Kill a migrating process after a chosen write: the program the migration crash tests
(``tests/engine/test_migration_crash.py``) and the chaos harness's ``kill-migration`` scenario
run, and what they read a database with.

Run as a program (``python migration_kills.py MODE START TARGET [N [PAUSED GO]]``) it migrates
TARGET as sqew does: START ``new`` opens it with ``sqew.Client`` (a new database is created), any
other START runs ``sqew db upgrade`` (``sqew.cli.run``). A hook on every SQLAlchemy engine
(``after_cursor_execute``) counts the statements that write. MODE:

- ``kill N``: SIGKILL this process right after the Nth write (printing it first).
- ``pause N PAUSED GO``: after the Nth write, create PAUSED and wait (inside the migration's
  transaction) until GO exists.
- ``chain``: kill after every write in turn, on the one database. The process imports sqew
  once and forks a child per kill; after each kill it prints what the database holds
  (``state``; for a SQLite file also its ``PRAGMA integrity_check``), and the next child
  starts from there: it must open or upgrade it. After a kill that left the database a
  revision further, the count starts again at the next revision's second write (its first
  was the kill just made). The chain ends when a child finishes unkilled, so every write of
  every revision is a kill point, revisions added later included.

Every line for the test starts with ``@@`` and is JSON.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any

WRITES = ("CREATE", "ALTER", "DROP", "INSERT", "UPDATE", "DELETE", "REPLACE")
State = tuple[str | None, list[list[str]]]

_SQLITE_SCHEMA = "SELECT type, name, coalesce(sql, '') FROM sqlite_master"
_PG_SCHEMA = """
SELECT 'column', table_name || '.' || column_name,
       data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = current_schema()
UNION ALL
SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()
UNION ALL
SELECT 'constraint', conrelid::regclass::text || '.' || conname, pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
"""


def state(target: str) -> State:
    """The revision a database is at (None: no sqew schema) and its schema: every table,
    column, index and constraint with its definition. Reads only (a SQLite file read-only)."""
    if target.startswith("postgresql"):
        import psycopg

        from sqew.backends.postgres import connection

        with psycopg.connect(connection.conninfo(target), autocommit=True) as conn:
            schema = conn.execute(_PG_SCHEMA).fetchall()
            has_version = conn.execute(
                "SELECT to_regclass('alembic_version')").fetchone() != (None,)
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall() \
                if has_version else []
    else:
        lite = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
        try:
            schema = lite.execute(_SQLITE_SCHEMA).fetchall()
            rows = lite.execute("SELECT version_num FROM alembic_version").fetchall() \
                if any(row[1] == "alembic_version" for row in schema) else []
        finally:
            lite.close()
    return (str(rows[0][0]) if rows else None,
            sorted([" ".join(str(v).split()) for v in row] for row in schema))


def integrity(target: str) -> str | None:
    """``PRAGMA integrity_check`` of a SQLite file, read-only (``ok``); None on PostgreSQL."""
    if target.startswith("postgresql"):
        return None
    conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True)
    try:
        return "; ".join(str(row[0]) for row in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


def downgrade_to(target: str, revision: str) -> None:
    """Alembic's own downgrade of ``target`` to ``revision`` (its rows kept where the older
    schema has their columns): an older database holding data, for an upgrade to kill."""
    alembic_to(target, "downgrade", revision)


def upgrade_to(target: str, revision: str) -> None:
    """Alembic's own upgrade to ``revision`` (for starting points and reference schemas)."""
    alembic_to(target, "upgrade", revision)


def alembic_to(target: str, direction: str, revision: str) -> None:
    """Alembic's ``upgrade`` or ``downgrade`` (``direction``) of ``target`` to ``revision``."""
    from alembic import command
    from sqlalchemy import create_engine, pool

    from sqew import migrate

    url = target if target.startswith("postgresql") else f"sqlite:///{target}"
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            getattr(command, direction)(migrate.alembic_config(conn), revision)
            conn.commit()
    finally:
        engine.dispose()


def after_writes(n: int, then: Callable[[str], None]) -> None:
    """Call ``then(statement)`` right after the ``n``-th statement that writes, on any engine."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen = 0

    def hook(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        nonlocal seen
        if statement.lstrip().split(None, 1)[0].upper() in WRITES:
            seen += 1
            if seen == n:
                then(statement)

    event.listen(Engine, "after_cursor_execute", hook)


def migrate(start: str, target: str) -> int:
    """What sqew does to ``target``: open it (``new``) or ``sqew db upgrade`` it; exit status."""
    import sqew
    import sqew.cli

    if start == "new":
        sqew.Client(target).close()  # type: ignore[abstract]
        return 0
    return sqew.cli.run(["--db", target, "db", "upgrade"])


def report(**fields: object) -> None:
    print("@@", json.dumps(fields), flush=True)


def die(statement: str) -> None:
    report(killed_after=" ".join(statement.split())[:120])
    os.kill(os.getpid(), signal.SIGKILL)


def pause(paused: str, go: str) -> Callable[[str], None]:
    def wait(_: str) -> None:
        open(paused, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                os._exit(3)
            time.sleep(0.005)

    return wait


def chain(start: str, target: str) -> None:
    import sqew.migrate
    from chaos.suite import from_tests

    # Before forking, what a ``sqew`` command loads (alembic too), its CLI built: each child
    # starts migrating at once.
    from_tests("forkserver").preload()
    sqew.migrate.known_revisions()  # (loads the revision scripts once, here)
    n, revision = 1, None if start == "new" else start
    for _ in range(1000):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                after_writes(n, die)
                code = migrate(start, target)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            report(done=os.waitstatus_to_exitcode(status))
            return
        now = state(target)
        report(n=n, state=now, integrity=integrity(target))
        n = 2 if now[0] != revision else n + 1
        revision = now[0]
    report(done="no end")


def main(argv: list[str]) -> None:
    mode, start, target, *rest = argv
    if mode == "chain":
        chain(start, target)
        return
    after_writes(int(rest[0]), die if mode == "kill" else pause(*rest[1:3]))
    sys.exit(migrate(start, target))


if __name__ == "__main__":
    main(sys.argv[1:])
