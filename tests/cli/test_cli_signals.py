"""Signals (docs/cli.md, "Signals"): Ctrl-C at any moment exits 130 without a word, SIGTERM
during a command stops it alike with 143; a command started with SIGINT ignored (a background
job) keeps ignoring it.

Each command is a ``sqew`` process of its own (a run of the tests' fork server; the installed
binary when the moment is during its imports) given SIGINT and SIGTERM at their defaults, as
a terminal's foreground command has them (``cli_runs.foreground``), and each
signal is sent at an observable moment: while sqew imports its modules (an extension module
mapped into the process), while a long poll waits (the ``sqew.waiter`` debug line), once a
batch is committed (the queue's counters).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import clean_env, sqew_binary
from process_support import LOG_WAITS, TIMEOUT_S, Lines, end, foreground

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/<pid>/maps")
EARLY_EXTENSION = "msgspec/_core"
"""An extension module sqew imports early on, with most of its imports still to come: seeing
it mapped into the process is a moment inside the imports."""


def _only_debug_lines(stderr: str) -> bool:
    """Whether ``stderr`` holds nothing but the debug lines the test asked for."""
    return "Traceback" not in stderr and all(" DEBUG " in line for line in stderr.splitlines())


def _until_mapped(pid: int, name: str) -> None:
    """Return once a shared object whose path has ``name`` is mapped into process ``pid``."""
    maps = Path(f"/proc/{pid}/maps")
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            if name in maps.read_text():
                return
        except (FileNotFoundError, ProcessLookupError):
            raise AssertionError(f"process {pid} ended before it loaded {name}") from None
        assert time.monotonic() < deadline, f"process {pid} did not load {name}"
        time.sleep(0.001)


def _interrupted_while_starting(proc: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
    """Ctrl-C ``proc`` once its imports are under way; its exit status, stdout and stderr."""
    try:
        _until_mapped(proc.pid, EARLY_EXTENSION)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        end(proc)
    return proc.returncode, out, err


@linux_only
def test_ctrl_c_while_sqew_starts_exits_130_quietly(local_sqew) -> None:
    proc = local_sqew.start("queue", "list", binary=True)
    assert _interrupted_while_starting(proc) == (130, b"", b"")


@linux_only
def test_ctrl_c_while_python_dash_m_sqew_starts_exits_130_quietly(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqew", "--db", str(tmp_path / "cli.db"), "queue", "list"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, env=clean_env(),
        preexec_fn=foreground,
    )
    assert _interrupted_while_starting(proc) == (130, b"", b"")


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_a_long_poll_ends_it_quietly_leasing_nothing(
    sqew, signum: int, status: int
) -> None:
    q = sqew.name("q")
    sqew.arrange(q).close()
    proc = sqew.start("message", "poll", "--queue", q, "--wait-ms", "20000", env=LOG_WAITS)
    assert proc.stdout is not None and proc.stderr is not None
    err = Lines(proc.stderr)
    try:
        sqew.until_parked(q, err)
        proc.send_signal(signum)
        assert proc.wait(TIMEOUT_S) == status
        out, stderr = proc.stdout.read(), err.rest()
    finally:
        end(proc)
    assert out == b"" and _only_debug_lines(stderr), stderr
    with sqew.arrange() as client:
        client.enqueue(q, "after")
        assert client.stats(q).leased == 0


CUT_SHORT_LOOP = """
import os, signal, sys
from asyncio import base_events

build = base_events.BaseEventLoop.__init__

def cut_short(self, *args, **kwargs):
    os.kill(os.getpid(), signal.{signal})  # Python runs its handler before the next line
    build(self, *args, **kwargs)

base_events.BaseEventLoop.__init__ = cut_short
sys.argv[0] = "sqew"
from sqew.cli import main
main()
"""
"""``sqew`` with a signal sent from inside the first event loop's constructor: the moment a
SIGTERM once hit at random in a local ``message tail``, which makes a loop for each long poll
(tests/engine/test_interrupted_wait.py has the same moment in the Python API)."""


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_long_poll_builds_its_event_loop_leaves_the_run_quiet(
    local_sqew, signum: int, status: int
) -> None:
    sqew = local_sqew
    sqew.arrange("q").close()
    code = CUT_SHORT_LOOP.format(signal=signal.Signals(signum).name)
    proc = subprocess.run(
        [sys.executable, "-c", code, "--db", str(sqew.db), "message", "poll", "--queue", "q",
         "--wait-ms", "5000"],
        capture_output=True, cwd=sqew.cwd, env=sqew.env, preexec_fn=foreground,
        timeout=TIMEOUT_S, check=False,
    )
    # Not "Exception ignored in ...": the loop the signal would have left half-built.
    assert (proc.returncode, proc.stdout, proc.stderr) == (status, b"", b"")
    with sqew.arrange() as client:
        assert client.stats("q").leased == 0


def _ignoring_sigint() -> None:
    # What a non-interactive shell gives a command it runs in the background (`sqew … &`).
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_command_started_with_sigint_ignored_keeps_ignoring_it(local_sqew) -> None:
    sqew = local_sqew
    sqew.arrange("q").close()
    args = [sqew_binary(), "--db", str(sqew.db), "--json", "message", "enqueue", "--queue", "q",
            "--file", "-"]
    with subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=sqew.cwd, env=sqew.env,
                          preexec_fn=_ignoring_sigint) as proc:
        assert proc.stdin is not None
        try:
            proc.stdin.write(b"1\n" * 500)  # one batch, and stdin left open
            proc.stdin.flush()
            deadline = time.monotonic() + TIMEOUT_S
            with sqew.arrange() as client:
                while client.stats("q").enqueued_total < 500:  # the batch is committed
                    assert proc.poll() is None and time.monotonic() < deadline
                    time.sleep(0.02)
            proc.send_signal(signal.SIGINT)  # ignored: dropped as it is sent
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.write(b"2\n")
            out, err = proc.communicate(timeout=TIMEOUT_S)
        finally:
            end(proc)
    assert proc.returncode == 0, err
    assert json.loads(out) == {"enqueued": 501, "duplicates": 0, "failed": []}
