"""Fixtures for the CLI acceptance tests: the installed ``sqew`` binary run in subprocesses.

``sqew`` runs a test four times: ``local`` (commands get ``--db`` of a fresh file under
``tmp_path``), ``http`` (commands get ``--url`` of a real ``sqew serve`` subprocess), and the
same two on PostgreSQL: ``local-postgres`` (``--db postgresql+psycopg://…`` of a fresh
database on the tests' server, ``tests/pg_support.py``) and ``http-postgres`` (a ``sqew
serve`` on one such database). The
working directory is ``tmp_path`` either way, so a command that wrongly opened the default
``./sqew.db`` would leave a file to find. ``local_sqew`` / ``http_sqew`` are the two runners
alone, for tests about one mode (database files; servers and URLs).

One server per backend serves all the http tests of a session (of an xdist worker): starting
one costs more than most tests. Tests therefore name queues with ``sqew.name(...)`` and ids with
``sqew.id(n)`` (see ``cli_support``); a test that needs a store of its own starts a server
with ``cli_support.serve``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pg_support
import pytest
from cli_support import PROBE_QUEUE, SharedServer, Sqew, serve

import sqew as sqew_lib


@pytest.fixture(scope="session")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """One ``sqew serve`` subprocess (access log on) for the session; stopped by PID at the end."""
    base = tmp_path_factory.mktemp("cli-server")
    yield from _shared(base / "shared.db", base)


def _shared(db: Path | str, base: Path, log: Path | None = None) -> Iterator[SharedServer]:
    """A ``sqew serve`` subprocess on ``db`` with the probe queue made; it logs each request
    (access log) and, at debug level, where long polls wait (``Sqew.until_parked``)."""
    with serve(db, base, access_log=True, log=log, log_level="debug") as server:
        client = sqew_lib.Client(server.url)
        try:
            client.create_queue(PROBE_QUEUE)
            yield SharedServer(server, client)
        finally:
            client.close()


@pytest.fixture(scope="session")
def cli_postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """One ``sqew serve`` subprocess on a PostgreSQL database for the session (see
    ``cli_server``); the database is dropped after."""
    cluster = pg_support.cluster()
    name = cluster.new_database()
    base = tmp_path_factory.mktemp("cli-pg-server")
    try:
        yield from _shared(cluster.url(name), base, log=base / "shared.serve.log")
    finally:
        cluster.drop(name)


@pytest.fixture
def local_sqew(tmp_path: Path) -> Sqew:
    """A runner on a fresh database file ``tmp_path/cli.db`` (``--db``)."""
    return Sqew(tmp_path, tmp_path / "cli.db")


@pytest.fixture
def http_sqew(cli_server: SharedServer, tmp_path: Path) -> Sqew:
    """A runner of the session's server (``--url``), in ``tmp_path``."""
    return cli_server.runner(tmp_path)


@pytest.fixture
def local_postgres_sqew(tmp_path: Path) -> Iterator[Sqew]:
    """A runner on a fresh PostgreSQL database (``--db postgresql+psycopg://…``)."""
    cluster = pg_support.cluster()
    name = cluster.new_database()
    yield Sqew(tmp_path, cluster.url(name))
    cluster.drop(name)


@pytest.fixture
def http_postgres_sqew(cli_postgres_server: SharedServer, tmp_path: Path) -> Sqew:
    """A runner of the session's server on PostgreSQL (``--url``), in ``tmp_path``."""
    return cli_postgres_server.runner(tmp_path)


MODES = {"local": "local_sqew", "http": "http_sqew", "local-postgres": "local_postgres_sqew",
         "http-postgres": "http_postgres_sqew"}


@pytest.fixture(params=[
    "local", "http",
    pytest.param("local-postgres", marks=pytest.mark.postgres),
    pytest.param("http-postgres", marks=pytest.mark.postgres),
])
def sqew(request: pytest.FixtureRequest) -> Sqew:
    """The test's runner in each mode: ``local_sqew``, ``http_sqew``, then the same two on
    PostgreSQL (``local_postgres_sqew``, ``http_postgres_sqew``)."""
    runner: Sqew = request.getfixturevalue(MODES[request.param])
    return runner
