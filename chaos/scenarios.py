"""The faults, each a named scenario: what ``run.execute`` calls while the workload runs.

Each injects faults until the run's fault deadline and counts them in ``run.faults``; a
fault that could not be made (a process already gone) is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from chaos.procs import STOP_S, hold_write_lock
from chaos.run import Run


@dataclass(frozen=True)
class Scenario:
    """A named fault, its description, and how many server workers it needs."""

    name: str
    doc: str
    inject: Callable[[Run], None]
    server_workers: int = 1


def _kill_role(role: str) -> Callable[[Run], None]:
    def inject(run: Run) -> None:
        while run.pause(0.3, 0.9):
            slot = run.rng.choice(run.of_role(role))
            if slot.running():
                slot.kill()
                run.faults += 1
            run.restart(slot)
    return inject


def kill_server(run: Run) -> None:
    """``kill -9`` the whole ``sqew serve``, then start it again on the same file and port."""
    while run.pause(0.8, 1.6):
        run.server.kill()
        run.faults += 1
        run.server.start()


def kill_worker(run: Run) -> None:
    """``kill -9`` one worker of ``sqew serve --workers 2``; the server starts another."""
    while run.pause(0.8, 1.6):
        pids = run.server.worker_pids()
        if len(pids) < 2:
            continue
        victim = run.rng.choice(pids)
        run.server.kill_pid(victim)
        run.faults += 1
        deadline = time.time() + STOP_S
        while time.time() < deadline and (len(run.server.worker_pids()) < 2
                                          or victim in run.server.worker_pids()):
            time.sleep(0.05)


def term_server(run: Run) -> None:
    """SIGTERM the server while long polls wait and group commits run; start it again."""
    while run.pause(0.8, 1.6):
        status = run.server.terminate()
        run.faults += 1
        if status != 0:
            run.notes.append(f"sqew serve exited with {status} on SIGTERM")
        run.server.start()


def write_lock(run: Run) -> None:
    """Another process holds the file's write lock (``BEGIN IMMEDIATE``) for a while."""
    while run.pause(0.3, 0.8):
        hold = min(run.rng.uniform(0.5, 2.0), max(0.1, run.fault_deadline - time.time()))
        if hold_write_lock(run.db, hold):
            run.faults += 1


SCENARIOS = {s.name: s for s in (
    Scenario("kill-producer", "kill -9 producer processes (file, HTTP, CLI), restarted",
             _kill_role("producer")),
    Scenario("kill-consumer", "kill -9 consumer processes (file, HTTP, CLI), restarted",
             _kill_role("consumer")),
    Scenario("kill-server", "kill -9 the whole sqew serve, restarted on the same file",
             kill_server),
    Scenario("kill-worker", "kill -9 one worker of sqew serve --workers 2 (replaced)",
             kill_worker, server_workers=2),
    Scenario("term-server", "SIGTERM sqew serve during long polls and group commits, "
             "restarted", term_server),
    Scenario("write-lock", "another process holds the SQLite write lock for seconds",
             write_lock),
)}
