"""Fixtures for the CLI acceptance tests: the installed ``sqew`` binary run in subprocesses.

``sqew`` runs a test twice: ``local`` (commands get ``--db`` of a fresh file under
``tmp_path``) and ``http`` (commands get ``--url`` of a real ``sqew serve`` subprocess). The
working directory is ``tmp_path`` either way, so a command that wrongly opened the default
``./sqew.db`` would leave a file to find. ``local_sqew`` / ``http_sqew`` are the two runners
alone, for tests about one mode (database files; servers and URLs).

One server serves all the http tests of a session (of an xdist worker): starting one costs
more than most tests. Tests therefore name queues with ``sqew.name(...)`` and ids with
``sqew.id(n)`` (see ``cli_support``); a test that needs a store of its own starts a server
with ``cli_support.serve``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import PROBE_QUEUE, SharedServer, Sqew, serve

import sqew as sqew_lib


@pytest.fixture(scope="session")
def cli_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """One ``sqew serve`` subprocess (access log on) for the session; stopped by PID at the end."""
    base = tmp_path_factory.mktemp("cli-server")
    with serve(base / "shared.db", base, access_log=True) as server:
        client = sqew_lib.Client(server.url)
        try:
            client.create_queue(PROBE_QUEUE)
            yield SharedServer(server, client)
        finally:
            client.close()


@pytest.fixture
def local_sqew(tmp_path: Path) -> Sqew:
    """A runner on a fresh database file ``tmp_path/cli.db`` (``--db``)."""
    return Sqew(tmp_path, tmp_path / "cli.db")


@pytest.fixture
def http_sqew(cli_server: SharedServer, tmp_path: Path) -> Sqew:
    """A runner of the session's server (``--url``), in ``tmp_path``."""
    return cli_server.runner(tmp_path)


@pytest.fixture(params=["local", "http"])
def sqew(request: pytest.FixtureRequest) -> Sqew:
    """The test's runner in each mode: ``local_sqew``, then ``http_sqew``."""
    runner: Sqew = request.getfixturevalue(f"{request.param}_sqew")
    return runner
