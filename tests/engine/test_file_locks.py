"""sqew never opens the database file outside SQLite, so it never drops SQLite's locks.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
included. When sqew took its own ``flock`` on the database file itself, a write session's
``close()`` (a server shutting down) left the process's other connections without their locks:
the next process to close its connection believed it was the last one, checkpointed and deleted
the WAL, and every later commit of the first process went into a deleted file. They were
acknowledged and lost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .support import Procs, finish, sqew_run

HOLDER = r"""
import sys, sqew
client = sqew.Client(sys.argv[1])
client.stats("q")                                  # its connection is open from here on
session = client.service.backend.write_session()  # what a server's group commit takes
session.close()                                    # and what its shutdown does
print("closed", flush=True)
sys.stdin.readline()                               # another process runs a command meanwhile
for i in range(100):
    client.enqueue("q", {"n": i})
print("enqueued", flush=True)
sys.stdin.readline()                               # stay open while the count is read
client.close()
"""


def sqew_cli(cwd: Path, *args: str) -> str:
    """Run ``sqew`` with ``args`` (``sqew_run``); its stdout (the command must succeed)."""
    code, out, err = sqew_run(args, cwd)
    assert code == 0, err
    return out


def ready(cwd: Path, db: Path) -> int:
    """The ready count of queue ``q`` as a separate ``sqew`` process sees it."""
    out = sqew_cli(cwd, "--db", str(db), "--json", "stats", "--queue", "q")
    return int(json.loads(out)["ready"])


def test_a_closed_write_session_does_not_lose_later_commits(
    tmp_path: Path, procs: Procs
) -> None:
    db = tmp_path / "s.db"
    sqew_cli(tmp_path, "--db", str(db), "queue", "add", "--name", "q")
    sqew_cli(tmp_path, "--db", str(db), "message", "enqueue", "--queue", "q", "--payload", "0")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], cwd=tmp_path, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    procs.started.append(holder)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == "closed\n"
    # A command that closes what it believes is the file's last connection (SQLite then
    # checkpoints and deletes the WAL if no other process holds a lock on the file).
    assert ready(tmp_path, db) == 1
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline() == "enqueued\n"
    assert ready(tmp_path, db) == 101  # 1 would mean the 100 went to a deleted WAL
    holder.stdin.write("end\n")
    holder.stdin.flush()
    code, _, err = finish(holder, 60)
    assert code == 0, err
    assert ready(tmp_path, db) == 101


def test_sqew_keeps_its_locks_in_a_lock_file_of_its_own(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sqew_cli(tmp_path, "--db", str(db), "queue", "add", "--name", "q")
    assert (tmp_path / "s.db-lock").exists()
