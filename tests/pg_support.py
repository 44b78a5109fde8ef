"""PostgreSQL for the test suite: one server per test process, a migrated template, a fresh
database per test.

``cluster()`` starts this process's server the first time a test needs one (each pytest-xdist
worker has its own), creates ``sqew_template`` and migrates it with ``sqew db upgrade --db
postgresql+psycopg://…`` (the CLI, as a user would); ``Cluster.new_database()`` clones it
(``CREATE DATABASE t_<n> TEMPLATE sqew_template``) and ``drop`` removes a clone, ending its
leftover sessions. The server stops at the end of the session (the ``_postgres_stops``
fixture in ``tests/conftest.py``) or at exit, however the tests ended.

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


@dataclass
class Cluster:
    """This process's server and its migrated template database."""

    server: pgserver.PgServer
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def new_database(self) -> str:
        """A fresh migrated database (a clone of the template); returns its name."""
        name = f"t_{next(self._names)}"
        self.server.create_database(name, template=TEMPLATE)
        return name

    def url(self, name: str) -> str:
        """The ``postgresql+psycopg://`` URL of database ``name``."""
        return self.server.url(name)

    def drop(self, name: str) -> None:
        """Drop a database made by ``new_database`` (its sessions are ended first)."""
        if self.server.running:
            self.server.drop_database(name)


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
    except BaseException:
        server.destroy()
        raise
    return Cluster(server)


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
