"""Helpers for CLI tests that run a ``sqew`` process and act at a moment seen in it: start it
in a foreground job's signal state, read its stderr as it comes, count its parked long polls,
end it by its PID."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable
from typing import IO

TIMEOUT_S = 60  # per subprocess; a hung command fails its test instead of the suite
LOG_WAITS = {"SQEW_CLI_LOG_LEVEL": "debug"}
"""A command run with these variables logs each long poll that starts and stops waiting on
stderr (``parked`` counts them); shared servers log the same lines (``log_level=debug``)."""


def foreground() -> None:
    """In the forked child (``preexec_fn``): SIGINT and SIGTERM at their default, as a
    terminal gives them to the command it runs in the foreground.

    A process inherits an *ignored* signal across exec, and sqew, like any Unix program, leaves
    ignored what it was started ignoring: a test suite started as a background job (``pytest
    &`` in a script ignores SIGINT) would otherwise see every Ctrl-C test's command ignore it.
    """
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def end(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` by its PID if it still runs (a failed assertion), then close its pipes."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(TIMEOUT_S)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):  # stdin's last flush: its reader is gone
                stream.close()


def parked(lines: Iterable[str], queue: str) -> int:
    """How many long polls of ``queue`` wait now, by the debug lines of ``sqew.waiter`` (a
    command's stderr with ``LOG_WAITS``, or a server's log)."""
    began = f"long poll waiting on queue {queue!r}"
    ended = f"long poll on queue {queue!r} stopped waiting"
    listed = list(lines)
    return sum(began in line for line in listed) - sum(ended in line for line in listed)


class Lines:
    """The lines of a running process's stream (its stderr), read by a thread as they come,
    so that a test can wait for one: the observable moment something happened in it."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._stream:
                with self._changed:
                    self._lines.append(line.decode(errors="replace"))
                    self._changed.notify_all()
        except (OSError, ValueError):  # closed under us: the process is gone anyway
            pass
        finally:
            with self._changed:
                self._changed.notify_all()

    def until(self, predicate: Callable[[list[str]], bool], timeout: float) -> bool:
        """Block until ``predicate(lines so far)`` holds; False after ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._lines), timeout)

    def rest(self, timeout: float = TIMEOUT_S) -> str:
        """Everything, once the stream has ended (the process exited); bounded."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not end"
        with self._changed:
            return "".join(self._lines)
