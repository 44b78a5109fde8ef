"""Fixtures of the PostgreSQL-only tests (replicas, faults): a fresh database on the tests'
server, and ``sqew serve`` subprocesses on it (``tests/cli/cli_support.py``'s ``Server``,
stopped by PID)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pg_support
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cli"))
from cli_support import Server  # (tests/cli is not a package: its directory is put on the path)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh migrated database (``postgresql+psycopg://…``), dropped after the test."""
    cluster = pg_support.cluster()
    name = cluster.new_database()
    yield cluster.url(name)
    cluster.drop(name)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``serve(url, **settings)``: a ``sqew serve --db url`` subprocess (settings as
    ``SQEW_<NAME>`` variables); every one started is stopped by PID after the test."""
    started: list[Server] = []

    def start(url: str, **settings: str) -> Server:
        log = tmp_path / f"serve-{len(started) + 1}.log"
        started.append(Server(url, tmp_path, log=log, **settings))
        return started[-1]

    yield start
    for server in reversed(started):
        server.stop()
