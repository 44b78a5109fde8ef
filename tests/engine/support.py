"""Helpers for the engine tests: real subprocesses, always bounded and always stopped by PID."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import cli_runs

SQEW_BIN = Path(sys.executable).with_name("sqew")


def sqew_run(args: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    """Run ``sqew args`` in ``cwd`` as a user runs it, to its end; its exit status, stdout and
    stderr. Through the tests' fork server (``cli_runs``): the command's own work, without a
    new interpreter importing sqew for each."""
    done = cli_runs.completed(list(args), cwd=cwd)
    return done.returncode, done.stdout, done.stderr


class Procs:
    """Starts child processes and kills every one still running at the end (by PID)."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.started: list[subprocess.Popen[str]] = []

    def python(self, script: str, *args: str, stdout: Path | None = None) -> subprocess.Popen[str]:
        """Run ``script`` with this interpreter in a child process (see ``spawn``)."""
        return self.spawn([sys.executable, "-c", script, *args], stdout=stdout)

    def spawn(self, argv: Sequence[str], stdout: Path | None = None) -> subprocess.Popen[str]:
        """Start ``argv``; stdout goes to the file ``stdout`` if given, else a pipe (text)."""
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(stdout.open("w")) if stdout else subprocess.PIPE
            proc = subprocess.Popen(
                list(argv), cwd=self.cwd, stdout=out, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        """SIGKILL (by PID) each child still running and reap it."""
        for proc in self.started:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str, str]:
    """Wait (bounded) for a child to exit; return (returncode, stdout, stderr)."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        raise AssertionError(
            f"process {proc.args!r} did not finish in {timeout}s:\n{err}"
        ) from None
    return proc.returncode, out, err


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``predicate`` every 10 ms until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def procs_in(cwd: Path) -> Iterator[Procs]:
    """A ``Procs`` whose children are all stopped when the block ends, however it ends."""
    procs = Procs(cwd)
    try:
        yield procs
    finally:
        procs.stop_all()
