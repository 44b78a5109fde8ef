"""PostgreSQL for the harness: a server of the run's own, its faults, and the raw reading of
its database for the oracle.

The server is started by ``tests/pgserver.py`` (the one place that starts PostgreSQL: initdb
in a temp dir, a free port of 127.0.0.1, run as the ``postgres`` user when we are root,
stopped by PID), with the server's durable defaults (``fsync`` and ``synchronous_commit``
on): an immediate restart is a crash, and an acknowledged commit must survive it.
"""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from chaos import store
from chaos.procs import SQEW_BIN, child_env
from chaos.suite import from_tests

UPGRADE_S = 120.0
_names = itertools.count(1)


def pgserver() -> ModuleType:
    """``tests/pgserver.py``: the one place that starts a PostgreSQL server."""
    return from_tests("pgserver")


def unavailable() -> str | None:
    """Why PostgreSQL cannot run here (no server binaries, no psycopg, …), or None."""
    if importlib.util.find_spec("sqew.backends.postgres") is None:
        return "sqew has no PostgreSQL backend"
    reason: str | None = pgserver().unavailable_reason()
    return reason


def start_server() -> Any:
    """A started ``pgserver.PgServer`` with durable settings (the caller destroys it)."""
    return pgserver().PgServer(prefix="sqew-chaos-pg-").start()


TEMPLATE = "chaos_template"


def _template(server: Any) -> str:
    """A database on ``server`` migrated by ``sqew db upgrade`` (the command users run), made
    once per server: each run's database is a copy of it."""
    if not getattr(server, "chaos_template", False):
        server.create_database(TEMPLATE)
        done = subprocess.run([str(SQEW_BIN), "--db", server.url(TEMPLATE), "db", "upgrade"],
                              capture_output=True, text=True, timeout=UPGRADE_S, check=False,
                              env=child_env(), stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"sqew db upgrade failed: {done.stderr[-1500:]}")
        server.chaos_template = True
    return TEMPLATE


@dataclass
class Database:
    """A fresh migrated database on ``server`` (a started ``PgServer``)."""

    server: Any
    name: str = field(default_factory=lambda: f"chaos_{next(_names)}_{int(time.time())}")

    def __post_init__(self) -> None:
        self.server.create_database(self.name, template=_template(self.server))

    @property
    def url(self) -> str:
        """The URL sqew takes (``--db``)."""
        return str(self.server.url(self.name))

    def restart(self, mode: str) -> None:
        """``pg_ctl stop -m mode`` (``fast``, or ``immediate``: a crash, recovered from the WAL
        at the next start), then start again on the same port."""
        self.server.stop(mode)
        self.server.start()

    def terminate_sessions(self) -> int:
        """``pg_terminate_backend`` of every session on the database (sqew's pools, its
        ``LISTEN`` connections, the command line's): how many were ended."""
        with self.server.connect() as conn:
            (n,) = conn.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()", (self.name,)).fetchone()
        return int(n)

    def drop(self) -> None:
        """Drop the database (its sessions ended), if the server runs."""
        if self.server.running:
            self.server.drop_database(self.name)


def read_raw(url: str) -> store.Raw:
    """The database's rows and counters in one read-only transaction (repeatable read), and
    ``amcheck``'s verdict on its B-tree indexes and their tables (``bt_index_check`` with
    ``heapallindexed``) when the extension can be created: PostgreSQL has no
    ``integrity_check``; without amcheck ``integrity`` is None (not checked)."""
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        integrity = _amcheck(conn)
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            raw = store.Raw(now_ms=time.time_ns() // 1_000_000)
            store.fill(raw, conn.execute(store.QUEUES_SQL).fetchall(),
                       conn.execute(store.MESSAGES_SQL).fetchall(),
                       conn.execute(store.ARCHIVE_SQL).fetchall())
    raw.integrity = integrity
    return raw


def _amcheck(conn: Any) -> str | None:
    import psycopg

    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
    except psycopg.Error:
        return None
    failed = []
    for (index,) in conn.execute(
            "SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' "
            "AND c.relnamespace = 'public'::regnamespace").fetchall():
        try:
            conn.execute("SELECT bt_index_check(%s::regclass, true)", (index,))
        except psycopg.Error as exc:
            failed.append(f"{index}: {exc}")
    return "; ".join(failed) or "ok"

