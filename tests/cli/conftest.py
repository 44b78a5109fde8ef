"""Fixtures for the CLI acceptance tests: the installed ``sqew`` binary run in subprocesses.

Each test gets its own database file under ``tmp_path``; the working directory is ``tmp_path``
too, so a command that wrongly opened the default ``./sqew.db`` would leave a file to find.

The ``sqew`` fixture runs every test twice: ``local`` (commands get ``--db``) and ``http``
(a real ``sqew serve`` subprocess on that database file, commands get ``--url``). A test about
local files only (``--db`` paths, ``db upgrade``) marks itself ``local_only``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import Sqew, serve

import sqew as sqew_lib


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "local_only: a CLI test about local database files")


@pytest.fixture(params=["local", "http"])
def sqew(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sqew]:
    """A runner on a fresh database ``tmp_path/cli.db``: directly, or through a server on it."""
    db = tmp_path / "cli.db"
    if request.param == "local":
        yield Sqew(tmp_path, db)
        return
    if request.node.get_closest_marker("local_only"):
        pytest.skip("about local database files: --db only")
    sqew_lib.LocalClient(db).close()  # the server and arrange() share this file
    with serve(db, tmp_path) as url:
        yield Sqew(tmp_path, db, url)

