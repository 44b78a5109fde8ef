"""What serving does to the process's garbage collector, and that stopping undoes it.

The runner tunes the collector for serving (a freeze of what startup built, a higher young
threshold); the app alone (embedded, or under a TestClient) leaves it alone. The collector is
the process's, so this module starts no server shared across its tests.
"""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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


def run_alone(script: str) -> None:
    """Run ``script`` in a new interpreter, which must print ``ok``: the collector is the
    process's, and this one has frozen (tests/conftest.py) and may serve other tests."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_serving_tunes_the_collector_and_stopping_restores_it(tmp_path: Path) -> None:
    # In a process of its own: the collector is the process's, and servers of other tests
    # (stopping in the background, or kept by a fixture) would share its tuning here.
    script = f"""
import gc, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
from targets import ServerThread, server_settings
gc.set_threshold(701, 11, 12)
frozen = gc.get_freeze_count()
first = ServerThread(server_settings({str(tmp_path / "server.db")!r}))
assert gc.get_threshold() == (20_000, 11, 12), gc.get_threshold()  # tuned while serving
assert gc.get_freeze_count() > frozen
second = ServerThread(server_settings({str(tmp_path / "other.db")!r}))
first.stop()
assert gc.get_threshold() == (20_000, 11, 12), gc.get_threshold()  # the other still serves
second.stop()
assert gc.get_threshold() == (701, 11, 12), gc.get_threshold()
assert gc.get_freeze_count() == frozen
print("ok")
"""
    run_alone(script)


def test_an_app_used_without_a_server_leaves_the_collector_alone(
    tmp_path: Path, gc_state: tuple[int, int, int]
) -> None:
    with TestClient(create_app(Settings(db=str(tmp_path / "q.db")))) as http:
        assert http.get("/healthz").status_code == 200
        assert gc.get_threshold() == gc_state
    assert gc.get_threshold() == gc_state


def test_a_freeze_made_before_serving_is_left_alone_and_looked_for_once() -> None:
    # gc.get_freeze_count walks every frozen object: ~30 ms a server start in a test process.
    script = """
import gc
from sqew.server.gc_tuning import GcTuning

gc.freeze()
frozen, count = gc.get_freeze_count(), gc.get_freeze_count
looks = []
gc.get_freeze_count = lambda: looks.append(1) or count()
tuning = GcTuning()
for _ in range(5):
    app = object()
    tuning.start(app)
    assert gc.get_threshold()[0] == GcTuning.THRESHOLD
    tuning.stop(app)
    assert count() == frozen
assert len(looks) == 1, looks
print("ok")
"""
    run_alone(script)
