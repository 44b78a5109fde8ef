"""One run of a scenario: the database and its queues, a server, the workload processes, the
faults (``chaos.scenarios``), then everything stopped and the oracle (``chaos.checker``).

Every workload process stops by itself at the run's end (``until``); faults stop a little
before it, so that the last restarted processes and the server have time to work.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqew
from chaos import checker, pg, procs, store
from chaos.journal import read_all
from chaos.leases import Violation
from chaos.procs import Server, Slot

QUEUE_SETTINGS: dict[str, object] = {"visibility_ms": 1000, "max_attempts": 3,
                                     "backoff_base_ms": 50, "backoff_max_ms": 400}
QUEUES: dict[str, dict[str, object]] = {
    "jobs": {**QUEUE_SETTINGS, "archive": True},
    "plain": QUEUE_SETTINGS,
    "race": {**QUEUE_SETTINGS, "visibility_ms": 300, "max_attempts": 10, "max_depth": 3,
             "archive": True},
}
"""``jobs`` keeps acked messages in its archive (so the checker sees every ack); ``plain``
deletes them (absences are checked against the journals' acks). ``race`` is contended on
purpose: short leases, at most ``max_depth`` messages (its producer is slowed by
``QueueFull``), every consumer polls it and often works past the lease there, so that leases
lapse and are taken by another consumer before the late ack, nack or extend (``LeaseLost``)."""
CONTENDED = "race"
PRODUCED = ("jobs", "plain")
"""The queues of the ordinary producers (``race`` has a slow producer of its own)."""
SETTLE_S = 1.5
"""Time left to the workload after the last fault."""
GRACE_S = 30.0
"""How long past the run's end a workload process may take to stop by itself."""


@dataclass
class Run:
    """A run in progress: what a scenario's faults act on."""

    directory: Path
    seconds: float
    seed: int
    server_workers: int = 1
    backend: str = "sqlite"
    """``sqlite`` (a file of the run's directory) or ``postgres`` (a database of its own on
    ``pg_server``)."""
    pg_server: Any = None
    """A started ``PgServer`` to make the run's PostgreSQL database on; None: the run starts
    one of its own (and stops it)."""
    replicas: int = 1
    """How many ``sqew serve`` processes on the database, each on its own port (the HTTP
    workload spreads its calls over them)."""
    prepare: Callable[[Run], None] | None = None
    """Called before the servers and the workload start (a scenario's own setup: a proxy);
    what it starts, it stops through ``cleanups``."""
    rng: random.Random = field(init=False)
    db: Path = field(init=False)
    target: str = field(init=False)
    """What sqew opens: the SQLite file, or the PostgreSQL database's URL."""
    pg: pg.Database | None = field(init=False, default=None)
    own_pg: bool = field(init=False, default=False)
    server: Server = field(init=False)
    servers: list[Server] = field(init=False)
    via: str | None = None
    """What the workload's Clients and the servers open instead of ``target`` (a proxy's
    URL); the oracle reads ``target``."""
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    until: float = 0.0
    faults: int = 0
    notes: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    """Violations a scenario found itself (in answers it read), added to the oracle's."""
    lease_check: Callable[[dict[str, list[Any]]], list[Violation]] | None = None
    """The lease rules' check, if the scenario needs its own (clocks that differ)."""
    user: procs.User | None = None
    """The user the workload processes run as, if not the harness's (set by ``prepare``)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.db = self.directory / "chaos.db"
        self.target = str(self.db)
        if self.backend == "postgres":
            if self.pg_server is None:
                self.pg_server, self.own_pg = pg.start_server(), True
            self.pg = pg.Database(self.pg_server)
            self.target = self.pg.url
        self.servers = [Server(self.target, self.directory / f"server{i or ''}.log",
                               self.server_workers) for i in range(self.replicas)]
        self.server = self.servers[0]

    @property
    def fault_deadline(self) -> float:
        """Faults are injected until then."""
        return self.until - SETTLE_S

    def of_role(self, role: str) -> list[Slot]:
        """The workload slots of ``role`` (``producer`` or ``consumer``)."""
        return [s for s in self.slots if s.role == role]

    @property
    def until_file(self) -> Path:
        """Where the run's end is written once every workload process has started."""
        return self.directory / "until"

    def begin(self) -> None:
        """Every workload process has started: the run's clock starts now."""
        self.until = time.time() + self.seconds
        part = self.until_file.with_suffix(".part")
        part.write_text(repr(self.until))
        part.replace(self.until_file)

    def restart(self, slot: Slot) -> None:
        """Start a new incarnation of ``slot`` (after a kill), and wait until it works."""
        slot.start(self.until_file, self.seed)
        slot.wait_ready()

    def pause(self, low: float, high: float) -> bool:
        """Sleep a random while; False once the fault deadline has passed (and at least one
        fault was injected: a slow start never leaves a run without one)."""
        time.sleep(self.rng.uniform(low, high))
        return time.time() < self.fault_deadline or self.faults == 0


def _slots(run: Run) -> list[Slot]:
    journals = run.directory / "journals"
    journals.mkdir(exist_ok=True)
    produced = ["--queues", ",".join(PRODUCED)]
    consumed = ["--queues", ",".join(QUEUES), "--contended", CONTENDED]
    targets = {"local": run.via or run.target, "http": ",".join(s.url for s in run.servers),
               "cli": run.target}
    if run.pg is not None:  # the Clients (in process and over HTTP); no command line
        del targets["cli"]
    # A command costs a process of its own (a fork and its work): the CLI's pace is slower.
    pace = {"local": "0.01", "http": "0.01", "cli": "0.3"}
    out = []
    for kind, target in targets.items():
        out.append(Slot("producer", kind, f"producer-{kind}", journals,
                        ["--target", target, *produced, "--count", "100000",
                         "--pace", pace[kind]]))
        out.append(Slot("consumer", kind, f"consumer-{kind}", journals,
                        ["--target", target, *consumed, "--pace", pace[kind]]))
    # The contended queue's own producer and consumer (on the file: the fastest), so that a
    # lease that lapses there finds another consumer polling whatever the others are doing.
    out.append(Slot("producer", "local", "producer-race", journals,
                    ["--target", targets["local"], "--queues", CONTENDED, "--count", "100000",
                     "--pace", "0.05"]))
    out.append(Slot("consumer", "local", "consumer-race", journals,
                    ["--target", targets["local"], "--queues", CONTENDED, "--contended",
                     CONTENDED, "--pace", "0.01"]))
    for slot in out:
        slot.user = run.user
    return out


Storage = Callable[[Run], AbstractContextManager[None]]
"""Where a scenario's database lives, when not in the run's directory: a context that moves
``run.db`` (and the server) there before anything opens it, and is left after the check."""


def execute(run: Run, scenario: str, faults: Callable[[Run], None],
            storage: Storage | None = None) -> checker.Summary:
    """Run the workload with ``faults`` injected, stop everything, and check (on the
    scenario's ``storage``, if it has one)."""
    with storage(run) if storage is not None else contextlib.nullcontext():
        return _execute(run, scenario, faults)


def _execute(run: Run, scenario: str, faults: Callable[[Run], None]) -> checker.Summary:
    with sqew.Client(run.target) as client:  # type: ignore[abstract]
        for name, settings in QUEUES.items():
            client.create_queue(name, **settings)
    try:
        if run.prepare is not None:
            run.prepare(run)
        run.slots = _slots(run)
        for server in run.servers:
            server.launch()
        procs.warm_up()
        for server in run.servers:
            server.wait_serving()
        # The workload after the servers: its processes are forked ready to work, and would
        # only slow the servers' start (the file's producers and consumers at work already).
        for slot in run.slots:
            slot.start(run.until_file, run.seed)
        for slot in run.slots:
            slot.wait_ready()
        run.begin()
        faults(run)
        for server in run.servers:
            if not server.running():
                server.start()
        for slot in run.slots:
            slot.finish(run.until + GRACE_S)
    finally:
        for slot in run.slots:
            slot.kill()
        for server in run.servers:
            if server.running():
                server.terminate()
            server.kill()
        for cleanup in reversed(run.cleanups):
            cleanup()
    return check(run, scenario)


def check(run: Run, scenario: str) -> checker.Summary:
    """Reopen the database, wait for its last lease to end, and reconcile it with the
    journals; then the run's own PostgreSQL server is stopped (its data kept if the oracle
    found a violation)."""
    try:
        store.recover(run.target)
        last = store.read_raw(run.target).last_lease_ms() / 1000
        time.sleep(max(0.0, last - time.time() + 0.05))
        store.recover(run.target)
        journals = read_all(run.directory / "journals")
        summary = checker.summarize(scenario, run.faults, journals, run.target, list(QUEUES),
                                    run.lease_check)
        summary.violations += run.violations
    except BaseException as exc:
        if run.pg is None and checker.is_corrupt(exc):  # the oracle's verdict, not a crash
            run.notes.append("the file could not be read back: no other rule was checked")
            return checker.unreadable(scenario, run.faults,
                                      read_all(run.directory / "journals"), exc)
        _release_pg(run, keep=True)
        raise
    if summary.integrity_checked is False:
        run.notes.append("integrity not checked: the amcheck extension is not available")
    _release_pg(run, keep=not summary.ok)
    return summary


def _release_pg(run: Run, keep: bool) -> None:
    if run.pg is None:
        return
    if not run.own_pg:
        if not keep:
            run.pg.drop()
        return
    if keep:
        run.pg_server.stop()
        pg.pgserver()._started.discard(run.pg_server)
        run.notes.append(f"the PostgreSQL data directory is kept in {run.pg_server.data}")
    else:
        run.pg_server.destroy()
