"""A ``-wal`` deleted while another process has the database open: sqew refuses to open the
file until that process has closed it, instead of starting a new ``-wal`` beside the one the
other process still writes (both would share one ``-shm`` index of their different files,
and each would read the other's frames out of its own: a corrupt database).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .support import Procs, finish, sqew_run

HOLDER = r"""
import sys, sqew
client = sqew.Client(sys.argv[1])
client.create_queue("q")
for i in range(20):
    client.enqueue("q", {"n": i})
print("open", flush=True)
sys.stdin.readline()                 # the -wal is checkpointed and deleted meanwhile
for i in range(20, 60):
    client.enqueue("q", {"n": i})
print("enqueued", flush=True)
sys.stdin.readline()
client.close()
"""


def enqueue_cli(cwd: Path, db: Path) -> tuple[int, str, str]:
    """``sqew message enqueue`` into ``db``'s queue q (``sqew_run``)."""
    return sqew_run(["--db", str(db), "message", "enqueue", "--queue", "q", "--payload",
                     '{"n": "cli"}'], cwd)


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_a_deleted_wal_of_a_database_in_use_is_refused_not_replaced(
    tmp_path: Path, procs: Procs
) -> None:
    db = tmp_path / "q.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)], cwd=tmp_path, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    procs.started.append(holder)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline() == "open\n"
    # Every commit copied into the file and the -wal emptied (the index says: no frames),
    # then the -wal deleted under the holder.
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    os.unlink(f"{db}-wal")

    code, out, err = enqueue_cli(tmp_path, db)
    assert code == 1, (out, err)
    assert err.startswith("error: Unavailable: ") and "-wal" in err, err
    assert "Traceback" not in err

    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout.readline() == "enqueued\n"
    holder.stdin.write("end\n")
    holder.stdin.flush()
    code, _, err = finish(holder, 60)
    assert code == 0, err

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT count(*) FROM messages").fetchone() == (60,)
    finally:
        conn.close()
    assert enqueue_cli(tmp_path, db)[0] == 0  # nobody has it open: a new -wal is fine
