"""A Ctrl-C that lands while the embedded Client starts a long poll: the program gets its
``KeyboardInterrupt`` and nothing else, however early the signal comes. Each case is a Python
process whose own code sends it SIGINT at one moment of the poll's start, so the moment is
exact, not a matter of timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import sqew

PROGRAM = """
import importlib, os, signal, sys
import sqew

# A shell that starts a job in the background leaves it ignoring SIGINT, and a child inherits
# that: this program takes Ctrl-C as an interactive one does, however the suite was started.
signal.signal(signal.SIGINT, signal.default_int_handler)
module, name = {where!r}.split(":")
cls = getattr(importlib.import_module(module), name)
build = cls.__init__

def interrupted(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)  # Python runs its handler before the next line
    build(self, *args, **kwargs)

cls.__init__ = interrupted
with sqew.Client(sys.argv[1]) as client:
    try:
        client.poll("q", wait_ms=5000)
    except KeyboardInterrupt:
        print("interrupted")
"""

MOMENTS = {
    "building the event loop": "asyncio.base_events:BaseEventLoop",
    "before the poll's coroutine runs": "asyncio.runners:Runner",
}


@pytest.mark.parametrize("where", MOMENTS.values(), ids=MOMENTS.keys())
def test_a_ctrl_c_as_a_long_poll_starts_is_only_a_keyboard_interrupt(
    tmp_path: Path, where: str
) -> None:
    db = tmp_path / "i.db"
    with sqew.Client(str(db)) as client:
        client.create_queue("q")
    proc = subprocess.run([sys.executable, "-c", PROGRAM.format(where=where), str(db)],
                          capture_output=True, cwd=tmp_path, timeout=60, check=False)
    # Before: "Exception ignored in: <function BaseEventLoop.__del__ ...>" and a traceback,
    # from the loop the signal left half-built.
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"interrupted\n", b"")
    with sqew.Client(str(db)) as client:
        assert client.stats("q").leased == 0
