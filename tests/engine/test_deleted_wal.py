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

from .support import SQEW_BIN, Procs, finish

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


def enqueue_cli(cwd: Path, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SQEW_BIN), "--db", str(db), "message", "enqueue", "--queue", "q", "--payload",
         '{"n": "cli"}'], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


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

    done = enqueue_cli(tmp_path, db)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: Unavailable: ") and "-wal" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr

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
    assert enqueue_cli(tmp_path, db).returncode == 0  # nobody has it open: a new -wal is fine
