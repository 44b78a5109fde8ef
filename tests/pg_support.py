"""PostgreSQL for the test suite: one server per test process, a migrated template, a fresh
database per test.

``cluster()`` starts this process's server the first time a test needs one (each pytest-xdist
worker has its own), creates ``sqew_template`` and migrates it with ``sqew db upgrade --db
postgresql+psycopg://…`` (the CLI, as a user would); ``Cluster.new_database()`` clones it
(``CREATE DATABASE t_<n> TEMPLATE sqew_template``), or hands out a clone an earlier test gave
back, and ``drop`` gives one back: its sessions ended, emptied to the template's state
(``Pristine``), or dropped when a test changed its schema. The server stops at the end of
the session (the ``_postgres_stops`` fixture in ``tests/conftest.py``) or at exit, however
the tests ended.

When PostgreSQL cannot run here (no server binaries, no psycopg), a test that needs it is
skipped, unless ``SQEW_REQUIRE_POSTGRES`` is set, as ``./scripts/test`` sets it when it
installs the ``postgres`` extra: then it fails. A sqew without a PostgreSQL backend
(``sqew.backends.postgres``) skips these tests in any case, saying so.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pgserver
import pytest

TEMPLATE = "sqew_template"
UPGRADE_S = 120
MANY_ROWS = 5000
"""Rows deleted from one table past which ``Pristine.restore`` truncates it as well."""


def required() -> bool:
    """Whether a missing PostgreSQL fails the test instead of skipping it (CI)."""
    return bool(os.environ.get("SQEW_REQUIRE_POSTGRES"))


def backend_missing() -> str | None:
    """Why sqew cannot open a PostgreSQL URL, or None when it has the backend."""
    if importlib.util.find_spec("sqew.backends.postgres") is None:
        return "sqew has no PostgreSQL backend yet (sqew.backends.postgres)"
    return None


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``; fail instead when PostgreSQL is required (``./scripts/test``)."""
    if required():
        pytest.fail(f"PostgreSQL is required here (SQEW_REQUIRE_POSTGRES): {reason}",
                    pytrace=False)
    pytest.skip(reason)


def server_or_skip() -> None:
    """Skip (or fail, see ``skip_or_fail``) when no PostgreSQL server can be started here."""
    reason = pgserver.unavailable_reason()
    if reason is not None:
        skip_or_fail(reason)


# What a database's schema is: tables, columns, indexes, triggers, functions, schemas,
# privileges and per-database settings, as one digest. A database given back is reused only
# while its digest is the template's (a test that altered it gets a fresh clone instead).
# It reads the catalogs: information_schema's views cost a new session three times as much.
FINGERPRINT = """
SELECT md5(coalesce(string_agg(item, E'\\n' ORDER BY item), '')) FROM (
    SELECT format('c %s.%s %s %s %s', c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
                  pg_get_expr(d.adbin, d.adrelid), a.attnotnull) AS item
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL SELECT 'i ' || pg_get_indexdef(i.indexrelid) FROM pg_index i
      JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = 'public'::regnamespace
    UNION ALL SELECT 't ' || tgname || ' ' || tgrelid::regclass::text
      FROM pg_trigger WHERE NOT tgisinternal
    UNION ALL SELECT 'p ' || p.oid::regprocedure::text
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'
    UNION ALL SELECT 'n ' || nspname || ' ' || coalesce(nspacl::text, '') FROM pg_namespace
     WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
    UNION ALL SELECT 'a ' || relname || ' ' || relkind::text || ' ' || coalesce(relacl::text, '')
      FROM pg_class WHERE relnamespace = 'public'::regnamespace
    UNION ALL SELECT 'd ' || coalesce(datacl::text, '') || ' ' || datdba::text
      FROM pg_database WHERE datname = current_database()
    UNION ALL SELECT 's ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
     WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
) items
"""


@dataclass(frozen=True)
class Pristine:
    """The migrated template as a test finds it: its schema digest, its rows (the tables
    migrations fill) and its sequences, to put a used database back to."""

    fingerprint: str
    tables: tuple[str, ...]
    rows: dict[str, str]  # table -> its rows as a JSON array (tables with rows only)
    sequences: dict[str, tuple[int, bool]]  # sequence -> (value, is_called) for setval

    @classmethod
    def of(cls, conn: Any) -> Pristine:
        """Read it from ``conn`` (a session on the template)."""
        tables = tuple(r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"))
        rows = {}
        for table in tables:
            (data,) = conn.execute(f'SELECT json_agg(t)::text FROM "{table}" t').fetchone()
            if data is not None:
                rows[table] = data
        sequences = {
            name: (last if last is not None else start, last is not None)
            for name, last, start in conn.execute(
                "SELECT schemaname || '.' || sequencename, last_value, start_value "
                "FROM pg_sequences WHERE schemaname = 'public'")
        }
        (fingerprint,) = conn.execute(FINGERPRINT).fetchone()
        return cls(fingerprint, tables, rows, sequences)

    def restore(self, conn: Any) -> bool:
        """Empty the database of ``conn`` and put the template's rows and sequences back;
        False (nothing done) when its schema is no longer the template's.

        The tables are locked as ``TRUNCATE`` would lock them (so a session still ending
        cannot write behind the restore), then emptied with ``DELETE``: a test leaves a few
        rows, and ``TRUNCATE`` gives every table and index new files, ten times the CPU of
        deleting them. A table a test filled with many rows is truncated after all, so the
        next test does not read past their dead versions."""
        if conn.execute(FINGERPRINT).fetchone() != (self.fingerprint,):
            return False
        tables = ", ".join(f'"{t}"' for t in self.tables)
        with conn.transaction():
            conn.execute(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
            # every table is emptied: the foreign keys need not be checked on the way
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in self.tables:
                if conn.execute(f'DELETE FROM "{table}"').rowcount > MANY_ROWS:
                    conn.execute(f'TRUNCATE "{table}" CASCADE')
            for table, data in self.rows.items():
                conn.execute(f'INSERT INTO "{table}" SELECT * FROM '
                             f'json_populate_recordset(NULL::"{table}", %s::json)', (data,))
            for name, (value, called) in self.sequences.items():
                conn.execute("SELECT setval(%s, %s, %s)", (name, value, called))
        return True


@dataclass
class Cluster:
    """This process's server and its migrated template database.

    A test's database is a clone of the template, or a database an earlier test gave back
    and ``drop`` emptied: its sessions ended, every table truncated, the template's rows
    and sequences put back (a few milliseconds, where a clone and a drop take a tenth of a
    second or more). Reuse needs the schema unchanged; otherwise ``drop`` drops it.
    """

    server: pgserver.PgServer
    pristine: Pristine
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _free: list[str] = field(default_factory=list)
    _made: set[str] = field(default_factory=set)  # the clones new_database made
    _mutex: threading.Lock = field(default_factory=threading.Lock)

    def new_database(self) -> str:
        """A fresh migrated database (empty as the template is); returns its name."""
        with self._mutex:
            if self._free:
                return self._free.pop()
        name = f"t_{next(self._names)}"
        self.server.create_database(name, template=TEMPLATE)
        with self._mutex:
            self._made.add(name)
        return name

    def url(self, name: str) -> str:
        """The ``postgresql+psycopg://`` URL of database ``name``."""
        return self.server.url(name)

    def drop(self, name: str) -> None:
        """Give back a database made by ``new_database``: its sessions are ended, then it is
        emptied for the next test, or dropped if its schema changed (any other database is
        dropped)."""
        if not self.server.running:
            return
        if name in self._made and self._emptied(name):
            with self._mutex:
                self._free.append(name)
        else:
            self.server.drop_database(name)

    def _emptied(self, name: str) -> bool:
        import psycopg

        try:
            with self.server.connect(name) as conn:
                conn.execute("SET lock_timeout = '10s'")
                # Waiting for each to exit (up to 10 s): a session that is still on its way
                # out holds its advisory locks (the reaper's lead), and the next test's
                # first reap would find the lead taken and skip.
                conn.execute("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                return self.pristine.restore(conn)
        except psycopg.Error:
            return False


_lock = threading.Lock()
_cluster: Cluster | None = None
_failed: str | None = None


def cluster() -> Cluster:
    """The process's server with its template, started on first use.

    Skips the test when sqew has no PostgreSQL backend; skips or fails (``skip_or_fail``)
    when PostgreSQL cannot run here; fails when the server or the template cannot be made.
    """
    global _cluster, _failed
    reason = backend_missing()
    if reason is not None:
        pytest.skip(reason)
    server_or_skip()
    with _lock:
        if _failed is not None:  # one attempt per process: the next tests fail fast
            pytest.fail(_failed, pytrace=False)
        if _cluster is None:
            try:
                _cluster = _make()
            except Exception as exc:
                _failed = f"could not start PostgreSQL for the tests: {exc}"
                raise
        return _cluster


def _make() -> Cluster:
    server = pgserver.PgServer(pgserver.FAST)
    try:
        server.start()
        server.create_database(TEMPLATE)
        upgrade(server.url(TEMPLATE))
        with server.connect(TEMPLATE) as conn:
            pristine = Pristine.of(conn)
    except BaseException:
        server.destroy()
        raise
    return Cluster(server, pristine)


def upgrade(url: str) -> None:
    """``sqew db upgrade --db url`` in a subprocess (the command users run)."""
    proc = subprocess.run([sys.executable, "-m", "sqew", "--db", url, "db", "upgrade"],
                          capture_output=True, text=True, timeout=UPGRADE_S, check=False,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"sqew db upgrade --db {url} failed ({proc.returncode}): "
                           f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}")


def shutdown() -> None:
    """Stop this process's server and remove its directory (if one was started)."""
    global _cluster
    with _lock:
        if _cluster is not None:
            _cluster.server.destroy()
            _cluster = None


def until_a_lock_wait(watch: Any, what: str, within_s: float = 20) -> None:
    """Return once a session of ``watch``'s database waits for a lock (``pg_locks`` is the
    whole server's: other tests' waits are in other databases); fail with ``what`` after
    ``within_s``. (No event tells of another session's lock wait: this polls.)"""
    deadline = time.monotonic() + within_s
    while watch.execute(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND pid IN "
        "(SELECT pid FROM pg_stat_activity WHERE datname = current_database())"
    ).fetchone() == (0,):
        assert time.monotonic() < deadline, f"{what} never waited for the lock"
        time.sleep(0.01)
