"""The processes of a run: ``sqew serve``, the workload processes, a lock holder. Each is
started here and stopped by its PID (its children too); nothing is found by name."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.process
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from chaos import journal
from chaos.suite import from_tests

SQEW_BIN = Path(sys.executable).with_name("sqew")
ROOT = Path(__file__).resolve().parents[1]
START_S = 30.0
STOP_S = 15.0


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


Started = subprocess.Popen[bytes] | subprocess.Popen[str] | multiprocessing.process.BaseProcess
"""A process the harness started: a command, or a workload process (``start_workload``)."""


def kill_tree(proc: Started) -> None:
    """``kill -9`` a process and every process under it, by PID, and reap it."""
    assert proc.pid is not None
    children: list[psutil.Process] = []
    with contextlib.suppress(psutil.NoSuchProcess):
        children = psutil.Process(proc.pid).children(recursive=True)
    for pid in [proc.pid, *(c.pid for c in children)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if isinstance(proc, multiprocessing.process.BaseProcess):
        proc.join(STOP_S)
    else:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_S)
    psutil.wait_procs(children, timeout=STOP_S)


_FORKS = multiprocessing.get_context("forkserver")
_FORKS.set_forkserver_preload(["chaos.preload"])


def warm_up() -> None:
    """Start the fork server of the workload processes (``start_workload``) now, without
    waiting for its imports: it imports while the servers start."""
    multiprocessing.forkserver.ensure_running()


@dataclass(frozen=True)
class User:
    """Another user the workload and ``sqew serve`` run as (a scenario whose fault is a file
    mode: root writes any file): its ids, the ``sqew`` command as it runs it, and the
    environment that command needs."""

    uid: int
    gid: int
    sqew: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def become(self) -> None:
        """Make this process (a fresh child, before it opens anything) this user."""
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)

    def popen(self) -> dict[str, object]:
        """``subprocess.Popen``'s arguments that start a process as this user."""
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def start_workload(argv: list[str], log: Path,
                   user: User | None = None) -> multiprocessing.process.BaseProcess:
    """A workload process (``chaos.workload``) with ``argv``, its output appended to ``log``.

    It is forked from multiprocessing's fork server, a process that imported the workload
    (sqew, httpx, …) once: a run starts its eight workload processes at once, and again after
    each kill, and each would spend most of a second of CPU importing the same modules as
    the others, in the minutes a short run lasts. A forked process is a process of its own
    all the same (its own PID, killed and stopped by it, its own connections)."""
    env = child_env()
    if user is not None:
        env.update(user.env)
    proc = _FORKS.Process(target=_workload, args=(argv, str(log), env, user),
                          name=f"chaos-workload {argv[0]}")
    proc.start()
    return proc


def fork(target: Callable[..., None], *args: object) -> multiprocessing.process.BaseProcess:
    """A process forked from the workload's fork server (sqew imported) that runs
    ``target(*args)`` (a module-level function), started."""
    proc = _FORKS.Process(target=target, args=args, name=f"chaos {target.__name__}")
    proc.start()
    return proc


def _workload(argv: list[str], log: str, env: dict[str, str], user: User | None) -> None:
    """A workload process's start, in the forked child: its user (if another), the harness's
    environment, the repository as its directory, its output to ``log``."""
    from chaos import workload  # (imported by the fork server already)

    if user is not None:
        user.become()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(ROOT)
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.exit(workload.main(argv))


def child_env() -> dict[str, str]:
    """The environment of a process the harness starts: no ``SQEW_`` settings of ours, and
    ``chaos`` importable."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    return {**clean, "PYTHONPATH": str(ROOT)}


@dataclass
class Server:
    """``sqew serve`` on a database (a SQLite file or a PostgreSQL URL) and a fixed port of
    127.0.0.1 (so a restart keeps its URL), ``workers`` processes."""

    db: str
    log: Path
    workers: int = 1
    port: int = field(default_factory=free_port)
    proc: Any = None
    """Its process: a ``subprocess.Popen``, or a run of the test suite's fork server, which
    behaves as one (``tests/cli_runs.py``: ``ForkedRun``)."""
    args: list[str] = field(default_factory=list)  # more options of ``sqew serve``
    user: User | None = None
    """The user it runs as (None: the harness's)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it and return once it announces that it serves (bounded)."""
        self.launch()
        self.wait_serving()

    def launch(self) -> None:
        """Start it (``wait_serving`` waits for its announcement)."""
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()  # a server that exited by itself, started again
        argv = ["serve", "--db", self.db, "--port", str(self.port),
                "--workers", str(self.workers), *self.args]
        env, runs = child_env(), from_tests("cli_runs")
        with self.log.open("a") as log:
            if self.user is None and self.workers == 1 and runs.forking():
                # Forked from a process that imported sqew's server once (the suite's fork
                # server): a start costs no imports. Several workers read their metrics
                # directory at import, and another user needs a process of its own: those
                # start the binary.
                self.proc = runs.fork_server().start(argv, cwd=self.log.parent, env=env,
                                                     stderr=log)
                return
            command, user = [str(SQEW_BIN)], {}
            if self.user is not None:
                command, user = list(self.user.sqew), self.user.popen()
                env.update(self.user.env)
            self.proc = subprocess.Popen(  # type: ignore[call-overload]
                [*command, *argv], stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                cwd=self.log.parent, **user)

    def wait_serving(self) -> None:
        """Return once the server launched announces that it serves; raise after
        ``START_S``."""
        assert self.proc is not None and self.proc.stdout is not None
        stdout = self.proc.stdout
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_S)
        if not got or "serving on" not in got[0] or not self._ready(time.time() + START_S):
            self.kill()
            raise RuntimeError(f"sqew serve did not start: {self.log.read_text()[-2000:]}")

    def _ready(self, deadline: float) -> bool:
        """Wait until ``/readyz`` answers 200: the socket listens before the application has
        opened its database (a server whose database is unreachable then exits)."""
        while time.time() < deadline and self.running():
            with (contextlib.suppress(OSError),
                  urllib.request.urlopen(f"{self.url}/readyz", timeout=5) as answer):
                if answer.status == 200:
                    return True
            time.sleep(0.05)
        return False

    def running(self) -> bool:
        """The server process is alive."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """``kill -9`` the server and its workers."""
        if self.proc is not None:
            kill_tree(self.proc)
            if self.proc.stdout is not None:
                self.proc.stdout.close()

    def terminate(self) -> int | None:
        """SIGTERM, then wait (bounded) for it to stop: its exit status, or None if it had to
        be killed."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            status: int | None = self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            status = None
        self.kill()
        return status

    def kill_pid(self, pid: int) -> None:
        """``kill -9`` one of the server's processes (a worker) and wait for it to go."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.wait_procs([psutil.Process(pid)], timeout=STOP_S)

    def worker_pids(self) -> list[int]:
        """The PIDs of the worker processes (``--workers`` > 1)."""
        if not self.running():
            return []
        assert self.proc is not None
        with contextlib.suppress(psutil.NoSuchProcess):
            return [c.pid for c in psutil.Process(self.proc.pid).children(recursive=True)
                    if "spawn_main" in " ".join(c.cmdline())]
        return []


@dataclass
class Slot:
    """One workload process's place: restarted after a kill as a new incarnation with a
    journal of its own; a producer goes on from its last acknowledged key."""

    role: str
    kind: str
    name: str
    directory: Path
    argv: list[str]
    incarnation: int = 0
    proc: multiprocessing.process.BaseProcess | None = None
    user: User | None = None
    """The user its processes run as (None: the harness's)."""

    def start_index(self) -> int:
        """The producer's next key: one past the highest its journals acknowledged (the
        key it was killed on, if any, is sent again)."""
        done = [int(r["key"].rsplit("-", 1)[1])
                for p in self.directory.glob(f"{self.name}.*.ndjson")
                for r in journal.read(p) if r.get("op") == "enqueue"]
        return max(done, default=-1) + 1

    def start(self, until_file: Path, seed: int) -> None:
        """Start a new incarnation that stops by itself at the time ``until_file`` holds."""
        self.incarnation += 1
        path = self.directory / f"{self.name}.{self.incarnation}.ndjson"
        extra = ["--start", str(self.start_index())] if self.role == "producer" else []
        self.proc = start_workload(
            [self.role, "--kind", self.kind, "--journal", str(path), "--slot", self.name,
             "--until-file", str(until_file), "--seed", str(seed * 1000 + self.incarnation),
             *extra, *self.argv], self.directory / f"{self.name}.log", self.user)

    def last_record(self, tail: int = 16384) -> journal.Record | None:
        """The last whole line of the current incarnation's journal, if any (read from its
        last ``tail`` bytes: cheap enough to be called every few milliseconds)."""
        path = self.directory / f"{self.name}.{self.incarnation}.ndjson"
        try:
            with path.open("rb") as f:
                start = max(0, f.seek(0, os.SEEK_END) - tail)
                f.seek(start)
                lines = f.read().decode("utf-8", "replace").split("\n")
        except FileNotFoundError:
            return None
        whole = lines[1:] if start else lines  # the first piece may begin mid-line
        for line in reversed(whole):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict) and "op" in record:
                    return record
        return None

    def wait_ready(self, timeout: float = START_S) -> bool:
        """Wait (bounded) until the current incarnation has started working."""
        ready = self.directory / f"{self.name}.{self.incarnation}.ready"
        deadline = time.time() + timeout
        while not ready.exists() and self.running() and time.time() < deadline:
            time.sleep(0.02)
        return ready.exists()

    def running(self) -> bool:
        """The current incarnation is alive."""
        return self.proc is not None and self.proc.is_alive()

    def kill(self) -> None:
        """``kill -9`` the incarnation and whatever it started (a ``sqew`` command)."""
        if self.proc is not None:
            kill_tree(self.proc)

    def stop(self) -> bool:
        """SIGSTOP the incarnation and whatever it started (a process that stalls); True if
        it was running. ``resume`` lets it go on."""
        if not self.running():
            return False
        assert self.proc is not None
        return self._signal_tree(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the incarnation and whatever it started."""
        if self.proc is not None:
            self._signal_tree(signal.SIGCONT)

    def _signal_tree(self, sig: signal.Signals) -> bool:
        assert self.proc is not None
        try:
            top = psutil.Process(self.proc.pid)
            tree = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return False
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.send_signal(sig)
        return True

    def finish(self, deadline: float) -> None:
        """Wait until ``deadline`` for it to stop by itself, then kill it."""
        if self.proc is not None:
            self.proc.join(max(0.0, deadline - time.time()))
            self.kill()


LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
conn.close()
"""


def hold_write_lock(db: Path, seconds: float) -> bool:
    """Another process takes the file's write lock (``BEGIN IMMEDIATE``) and holds it for
    ``seconds``; returns once it has let go, True if it held it."""
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), str(seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        held = proc.stdout.readline().strip() == "locked"
        proc.wait(seconds + STOP_S + 30)
        return held
    finally:
        kill_tree(proc)
        if proc.stdout is not None:
            proc.stdout.close()
