"""``sqew serve --workers N``: the metrics directory of a server killed outright is removed by
the next server that starts, and no directory still in use is.

Each worker process writes its metrics to files in one directory under the temp directory
(``PROMETHEUS_MULTIPROC_DIR``). A server stopped by a signal removes it; one killed with
``kill -9`` cannot, and its workers may even go on serving without it. A starting server removes
only the directories whose server process and worker processes are all gone (real processes,
killed by PID here), and only its own user's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

import psutil

from .support import START_S, STOP_S, serve

PREFIX = "sqew-metrics-"


def _dirs(tmp: Path) -> set[Path]:
    return set(tmp.glob(PREFIX + "*"))


def _workers(pid: int, count: int) -> list[psutil.Process]:
    """The ``count`` worker processes of server ``pid``, once each wrote its metrics files."""
    deadline = time.monotonic() + START_S
    while True:
        workers = [c for c in psutil.Process(pid).children(recursive=True)
                   if "spawn_main" in " ".join(c.cmdline())]  # not multiprocessing's tracker
        if len(workers) == count:
            return workers
        assert time.monotonic() < deadline, f"{len(workers)} workers, not {count}"
        time.sleep(0.05)


def _new_dir(tmp: Path, before: set[Path]) -> Path:
    """The metrics directory a starting server made in ``tmp`` (not in ``before``): it removes
    stale ones first, then makes its own."""
    deadline = time.monotonic() + START_S
    while not _dirs(tmp) - before:
        assert time.monotonic() < deadline, "the server made no metrics directory"
        time.sleep(0.05)
    [made] = _dirs(tmp) - before
    return made


def _kill(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    psutil.wait_procs(processes, timeout=STOP_S)


def test_a_killed_servers_metrics_directory_goes_once_its_processes_are_gone(
    tmp_path: Path,
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    db = tmp_path / "q.db"
    orphans: list[psutil.Process] = []
    # Nested: a server's stderr ends only once its orphaned workers are gone too.
    with serve(db, "--workers", "2", env=env) as killed:
        try:
            killed_dir = _new_dir(tmp, set())
            orphans = _workers(killed.proc.pid, 2)
            os.kill(killed.proc.pid, signal.SIGKILL)  # its workers live on, orphaned
            killed.proc.wait(STOP_S)
            # A copy of it that belongs to another user (it is another user's to remove).
            foreign = killed_dir.with_name(killed_dir.name + "-foreign")
            shutil.copytree(killed_dir, foreign)
            owned_by_another = os.geteuid() == 0
            if owned_by_another:
                for path in [foreign, *foreign.iterdir()]:
                    os.chown(path, 65534, 65534)

            with serve(db, "--workers", "2", env=env) as live:
                live_dir = _new_dir(tmp, {killed_dir, foreign})
                assert killed_dir.is_dir()  # its workers still write there

                _kill(orphans)
                with serve(db, "--workers", "2", env=env) as third:
                    third_dir = _new_dir(tmp, {killed_dir, foreign, live_dir})
                    assert not killed_dir.exists()  # every process of it is gone
                    assert live_dir.is_dir()  # a running server's
                    assert foreign.is_dir() == owned_by_another
                    assert third.stop(signal.SIGTERM) == 0
                    assert "removed the metrics directory" in third.stderr()
                assert not third_dir.exists()  # a server stopped by a signal removes its own
                assert live.stop(signal.SIGTERM) == 0
        finally:
            _kill(orphans)
