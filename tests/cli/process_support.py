"""Helpers for CLI tests that run a ``sqew`` process and act at a moment seen in it: start it
in a foreground job's signal state, read its stderr as it comes, count its parked long polls,
end it by its PID."""

from __future__ import annotations

import contextlib
import signal
import subprocess

from server.support import Lines, parked  # noqa: F401  (the same readers as the server tests)

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
