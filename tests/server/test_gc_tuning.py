"""What serving does to the process's garbage collector, and that stopping undoes it.

The runner tunes the collector for serving (a freeze of what startup built, a higher young
threshold); the app alone (embedded, or under a TestClient) leaves it alone. The collector is
the process's, so this module starts no server shared across its tests.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import targets
from litestar.testing import TestClient

from sqew.server.app import create_app
from sqew.settings import Settings


@pytest.fixture
def gc_state() -> Iterator[tuple[int, int, int]]:
    """A threshold of the test's own and nothing frozen (tests/conftest.py freezes what the
    test process collected), both put back after the test."""
    targets.wait_closed()  # no server of an earlier test still serving in this process
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    gc.set_threshold(701, 11, 12)
    yield gc.get_threshold()
    gc.set_threshold(*before)
    if frozen:
        gc.freeze()


def test_serving_tunes_the_collector_and_stopping_restores_it(
    start_server: Callable[..., Any], gc_state: tuple[int, int, int], tmp_path: Path
) -> None:
    frozen = gc.get_freeze_count()
    first = start_server()
    assert gc.get_threshold() == (20_000, 11, 12)  # tuned while serving
    assert gc.get_freeze_count() > frozen
    second = start_server(db=str(tmp_path / "other.db"))
    first.stop()
    assert gc.get_threshold() == (20_000, 11, 12)  # the other still serves
    second.stop()
    assert gc.get_threshold() == gc_state
    assert gc.get_freeze_count() == frozen


def test_an_app_used_without_a_server_leaves_the_collector_alone(
    tmp_path: Path, gc_state: tuple[int, int, int]
) -> None:
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db")))) as http:
        assert http.get("/healthz").status_code == 200
        assert gc.get_threshold() == gc_state
    assert gc.get_threshold() == gc_state
