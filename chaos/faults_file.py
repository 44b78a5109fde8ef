"""Faults of the SQLite file itself: a migration killed at each statement, another part of a
workload process closing a descriptor of the database, the ``-wal`` file deleted.

``kill-migration`` stops the workload, downgrades the database (its rows kept) and kills
``sqew db upgrade`` after each of its writes in turn (``chaos.migration_kills``), then starts the
workload again on the upgraded file; ``close-fd`` makes a thread of a workload process that
runs the engine (``chaos.fd_closer``) open, read and close the database's files beside its
live connections; ``delete-wal`` unlinks the ``-wal`` file under the running processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from chaos import migration_kills
from chaos.fd_closer import FD_SIGNAL
from chaos.procs import STOP_S, child_env
from chaos.run import SETTLE_S, Run

CHAIN_TIMEOUT_S = 300.0
SHORT_RUN_S = 10.0
AFTER_S = SETTLE_S + 2.0
"""The workload's time on the upgraded file after a migration chain, at least."""


# --- close-fd ------------------------------------------------------------------------------
def close_fd(run: Run) -> None:
    """Make a workload process on the file (``sqew.Client`` in the process) open and close
    the database's files beside its live connections, at random moments."""
    slots = [s for s in run.slots if s.kind == "local"]
    while run.pause(0.05, 0.3):
        slot = run.rng.choice(slots)
        if slot.running() and slot.proc is not None and slot.proc.pid is not None:
            try:
                os.kill(slot.proc.pid, FD_SIGNAL)
            except ProcessLookupError:
                continue
            run.faults += 1


# --- delete-wal ----------------------------------------------------------------------------
def delete_wal(run: Run) -> None:
    """Unlink the ``-wal`` file while the processes have it open, at random moments."""
    wal = Path(str(run.db) + "-wal")
    while run.pause(0.3, 1.0):
        try:
            wal.unlink()
        except FileNotFoundError:
            continue
        run.faults += 1


# --- kill-migration ------------------------------------------------------------------------
def kill_migration(run: Run) -> None:
    """Stop the workload, take the database back to an older revision (the oldest first, see
    ``first_start``; then one at random), and kill ``sqew db upgrade`` after each of its
    writes in turn; after each kill the file must open, pass ``PRAGMA integrity_check`` and
    be upgraded by the next try. Then the workload goes on, on the upgraded file, if the
    faults' time is not over (after the last round the run ends: ``sqew serve`` is started
    again on the file, and the oracle checks that nothing acknowledged before was lost)."""
    order = migration_kills_revisions()
    rounds, deadline = 0, run.fault_deadline  # (each round moves the run's end further)
    done: list[str] = []
    # The workload first makes data (messages ready, leased, dead-lettered, archived) for a
    # third of the run.
    time.sleep(max(0.0, run.until - run.seconds * 2 / 3 - time.time()))
    while run.pause(0.5, 1.0) and (rounds == 0 or time.time() < deadline):
        start = run.rng.choice(order[:-1]) if rounds else first_start(run, order)
        stop_workload(run)
        migration_kills.downgrade_to(run.target, start)
        kills = kill_each_write(run, start)
        run.faults += kills
        rounds += 1
        done.append(f"from {start}: {kills} kills")
        if time.time() < deadline:  # else the run ends here: sqew serve is started again on
            start_workload(run)     # the file, and the oracle reads it
    run.notes.append("sqew db upgrade killed after each write, " + "; ".join(done))


def first_start(run: Run, order: list[str]) -> str:
    """Where the first round starts: the oldest revision (every write of every revision is
    then a kill point), except in a run of ``SHORT_RUN_S`` or less (the test suite's short
    form), which starts at the newest revision's parent (its writes only: the whole chain is
    the migration crash tests' in ``tests/engine``)."""
    return order[0] if run.seconds > SHORT_RUN_S else order[-2]


def migration_kills_revisions() -> list[str]:
    """Every revision, oldest first."""
    from alembic.script import ScriptDirectory

    from sqew import migrate

    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [s.revision for s in reversed(list(script.walk_revisions()))]


def stop_workload(run: Run) -> None:
    """``kill -9`` every workload process and the server (their journals say what they got)."""
    for slot in run.slots:
        slot.kill()
    run.server.kill()


def start_workload(run: Run) -> None:
    """Start the server and a new incarnation of every workload process; once they work, the
    run ends no sooner than ``AFTER_S`` from now."""
    run.until_file.unlink(missing_ok=True)  # the new incarnations wait for the new end
    run.server.launch()
    for slot in run.slots:
        slot.start(run.until_file, run.seed)
    run.server.wait_serving()
    for slot in run.slots:
        slot.wait_ready()
    run.seconds = max(run.until - time.time(), AFTER_S)
    run.begin()


def kill_each_write(run: Run, start: str) -> int:
    """``sqew db upgrade`` of the file from ``start``, killed after each write in turn
    (``migration_kills chain``); the number of kills. Raises if a kill left the file
    unopenable, at no revision, or not intact, or if the last try did not finish."""
    proc = subprocess.run(
        [sys.executable, migration_kills.__file__, "chain", start, run.target],
        capture_output=True, text=True, timeout=CHAIN_TIMEOUT_S + STOP_S, check=False,
        env=child_env())
    lines: list[dict[str, Any]] = [json.loads(line[3:]) for line in proc.stdout.splitlines()
                                   if line.startswith("@@ ")]
    with (run.directory / "migration.log").open("a") as log:
        log.write(proc.stdout + proc.stderr)
    kills = [r for r in lines if "state" in r]
    bad = [r for r in kills if r["state"][0] is None or r.get("integrity") not in ("ok", None)]
    if proc.returncode != 0 or not lines or lines[-1] != {"done": 0} or not kills or bad:
        raise RuntimeError(f"kill-migration from {start}: the upgrade did not end well after "
                           f"its kills: {(bad or lines[-3:])!r} {proc.stderr[-2000:]}")
    return len(kills)

