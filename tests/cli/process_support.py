"""Helpers for CLI tests that run a ``sqew`` process and act at a moment seen in it: start it
in a foreground job's signal state, read its stderr as it comes, count its parked long polls,
end it by its PID."""

from __future__ import annotations

import contextlib
import subprocess

from cli_runs import TIMEOUT_S, foreground  # noqa: F401  (one timeout, one signal state)
from server.support import Lines, parked  # noqa: F401  (the same readers as the server tests)

LOG_WAITS = {"SQEW_CLI_LOG_LEVEL": "debug"}
"""A command run with these variables logs each long poll that starts and stops waiting on
stderr (``parked`` counts them); shared servers log the same lines (``log_level=debug``)."""


def end(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` by its PID if it still runs (a failed assertion), then close its pipes."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(TIMEOUT_S)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):  # stdin's last flush: its reader is gone
                stream.close()
