"""The faults, each a named scenario: what ``run.execute`` calls while the workload runs.

Each injects faults until the run's fault deadline and counts them in ``run.faults``; a
fault that could not be made (a process already gone) is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import checker
from chaos.procs import STOP_S, Slot, hold_write_lock
from chaos.run import CONTENDED, Run, Storage, execute


@dataclass(frozen=True)
class Scenario:
    """A named fault, its description, how many server workers it needs, the database it
    runs on (``sqlite`` or ``postgres``), where (``storage``), how many ``sqew serve``
    replicas, and its setup (``Run.prepare``)."""

    name: str
    doc: str
    inject: Callable[[Run], None]
    server_workers: int = 1
    backend: str = "sqlite"
    replicas: int = 1
    prepare: Callable[[Run], None] | None = None
    storage: Storage | None = None
    """Where the database lives, if not in the run's directory (``run.Storage``)."""
    unavailable: Callable[[], str | None] | None = None
    """Why the scenario cannot run here (None: it can), where that depends on the machine."""

    def run(self, directory: Path, seconds: float, seed: int,
            pg_server: Any = None) -> tuple[Run, checker.Summary]:
        """Run it for ``seconds`` in ``directory`` (on ``pg_server`` if given, for a
        PostgreSQL scenario): the run (its notes) and the oracle's verdict."""
        run = Run(directory, seconds, seed, self.server_workers, self.backend,
                  pg_server=pg_server, replicas=self.replicas, prepare=self.prepare)
        return run, execute(run, self.name, self.inject, self.storage)


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


def pause_consumer(run: Run) -> None:
    """Stall a consumer (SIGSTOP) right after a poll leased it a message of the contended
    queue, until another consumer has leased the message again; stall that one too, let the
    first go on (SIGCONT) to settle its lapsed lease, which sqew must refuse (``LeaseLost``),
    then let the second go on. Faults go on past the deadline (not past the run's last
    second) until one late settle was made that way."""
    staged = False
    while run.pause(0.1, 0.3) or (not staged and time.time() < run.until - 1.0):
        found = _holding(run, run.until - 1.0)
        if found is None or not found[0].stop():
            continue
        first, msg = found
        run.faults += 1
        second = None
        try:
            # Given up after a while: another consumer may have leased and settled the
            # message between two readings of its journal.
            second = _leased_again(run, first, msg, min(
                run.until - 0.8, msg["lease_expires_at"] / 1000 + STALL_S))
            if second is not None:
                first.resume()
                staged |= _settled(first, msg, time.time() + STALL_S)
        finally:
            first.resume()
            if second is not None:
                second.resume()


STALL_S = 2.0
"""The longest a consumer is kept stopped while another settles."""


def _consumers(run: Run, but: Slot | None = None) -> list[Slot]:
    return [s for s in run.of_role("consumer") if s is not but]


def _leases_in(record: dict[str, object] | None, queue: str) -> list[dict[str, int]]:
    """The leases of ``record`` if it is a poll of ``queue`` (a consumer's last record: it
    holds them, none settled yet)."""
    if record is None or record.get("op") != "poll" or record.get("queue") != queue:
        return []
    messages: list[dict[str, int]] = list(record["messages"])  # type: ignore[call-overload]
    return messages


def _holding(run: Run, deadline: float) -> tuple[Slot, dict[str, int]] | None:
    """A consumer (not the CLI's: its commands are slow) that has just leased a message of the
    contended queue and not settled it, and that lease; None if none was seen by ``deadline``.
    (A consumer's journal is the only sign of what it holds: journals are read every few
    milliseconds.)"""
    slots = [s for s in _consumers(run) if s.kind != "cli"]
    while time.time() < deadline:
        for slot in slots:
            for m in _leases_in(slot.last_record(), CONTENDED)[:1]:  # the one handled now
                if m["lease_expires_at"] / 1000 > time.time() + 0.03:
                    return slot, m
        time.sleep(0.01)
    return None


def _leased_again(run: Run, first: Slot, msg: dict[str, int],
                  deadline: float) -> Slot | None:
    """Wait until another consumer's last record is a poll that leased ``msg`` again, stop
    that consumer, and return it if it still holds the lease then (it had not settled it);
    None by ``deadline``."""
    while time.time() < deadline:
        for slot in _consumers(run, but=first):
            if any(m["id"] == msg["id"] and m["attempts"] > msg["attempts"]
                   for m in _leases_in(slot.last_record(), CONTENDED)):
                if not slot.stop():
                    continue
                if any(m["id"] == msg["id"] for m in _leases_in(slot.last_record(), CONTENDED)):
                    return slot
                slot.resume()
        time.sleep(0.01)
    return None


def _settled(slot: Slot, msg: dict[str, int], deadline: float) -> bool:
    """Wait until ``slot`` journals a settle of ``msg``'s lease; True if it was refused with
    ``LeaseLost``."""
    while time.time() < deadline:
        last = slot.last_record()
        if (last is not None and last.get("op") in ("ack", "nack", "extend")
                and last.get("token") == msg["token"]):
            return bool(last.get("outcome") == "LeaseLost")
        time.sleep(0.01)
    return False


def pg_restart(run: Run) -> None:
    """Restart PostgreSQL under load, ``pg_ctl stop -m fast`` and ``-m immediate`` (a crash,
    recovered from the WAL) in turn, then start it on the same port."""
    assert run.pg is not None
    modes = ("fast", "immediate")
    while run.pause(0.8, 1.6):
        run.pg.restart(modes[run.faults % 2])
        run.faults += 1


def pg_terminate(run: Run) -> None:
    """``pg_terminate_backend`` every session of the run's database (the pools' and the
    ``LISTEN`` connections of every Client and of sqew serve), again and again."""
    assert run.pg is not None
    ended = 0
    while run.pause(0.2, 0.6):
        n = run.pg.terminate_sessions()
        ended += n
        run.faults += 1 if n else 0
    run.notes.append(f"{ended} PostgreSQL sessions terminated")


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
    Scenario("pause-consumer", "SIGSTOP a consumer past its leases, then SIGCONT: its late "
             "settles race other consumers' polls", pause_consumer),
    Scenario("write-lock", "another process holds the SQLite write lock for seconds",
             write_lock),
    Scenario("pg-restart", "PostgreSQL restarted under load (pg_ctl -m fast and -m "
             "immediate in turn)", pg_restart, backend="postgres"),
    Scenario("pg-terminate", "pg_terminate_backend of every sqew session (pools, LISTEN) "
             "on PostgreSQL, repeatedly", pg_terminate, backend="postgres"),
)}


from chaos import abandon, clockstep  # noqa: E402  (they import this module's Run users)

SCENARIOS.update({s.name: s for s in (
    Scenario("clock-step", "the server's clock steps backward and forward by up to 30 s",
             clockstep.clock_step, prepare=clockstep.setup),
    Scenario("cancel-merged", "bursts of requests merged into group commits, half cut "
             "before their answer", abandon.cancel_merged),
    Scenario("disconnect", "clients leave mid-answer (FIN or reset) and mid-long-poll",
             abandon.disconnect),
)})

from chaos.faults_pg import scenarios as _pg_scenarios  # noqa: E402  (it imports Scenario)

SCENARIOS.update({s.name: s for s in _pg_scenarios()})

# The SQLite file's faults (their code: chaos.faults_file).
from chaos import faults_disk, faults_file  # noqa: E402

SCENARIOS.update({s.name: s for s in (
    Scenario("kill-migration", "kill -9 sqew db upgrade of an older database holding the "
             "workload's data, after each of its writes in turn", faults_file.kill_migration),
    Scenario("close-fd", "a thread of a workload process opens and closes the database, "
             "-wal and -shm beside its live connections", faults_file.close_fd),
    Scenario("delete-wal", "the -wal file unlinked while processes have it open",
             faults_file.delete_wal),
    Scenario("full-disk", "the database's small file system filled up by a ballast file "
             "during group commits, then freed", faults_disk.full_disk,
             storage=faults_disk.small_fs, unavailable=faults_disk.unavailable),
)})

# A read-only database (its code: chaos.faults_readonly).
from chaos import faults_readonly  # noqa: E402

SCENARIOS["read-only"] = Scenario(
    "read-only", "the database file (and in turn its -wal and -shm, its directory) made "
    "read-only for the workload's user; a process and the server restarted meanwhile",
    faults_readonly.read_only, prepare=faults_readonly.prepare,
    storage=faults_readonly.public_dir, unavailable=faults_readonly.unavailable)
