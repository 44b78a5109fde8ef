"""Fixtures for the engine tests (multi-process, crash, migration and guard tests)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import Procs, procs_in


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """Start child processes in ``tmp_path``; every one still running is killed at teardown."""
    with procs_in(tmp_path) as started:
        yield started
