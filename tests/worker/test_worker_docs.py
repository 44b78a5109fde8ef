"""The Worker example of docs/consumers.md runs as written: in a process of its own, stopped
by SIGTERM once its messages are settled, it drains and prints its counts."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqew

DOC = Path(__file__).resolve().parents[2] / "docs" / "consumers.md"
TIMEOUT_S = 30.0


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert blocks, "docs/consumers.md has no Python example"
    return str(blocks[0])


def _settled(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with sqew.Client(db) as client:
            stats = client.stats("emails")
    except sqew.SqewError:  # not made yet
        return False
    return (stats.acked_total, stats.dead_lettered_total) == (1, 1)


def test_the_worker_example_runs(tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(_example())
    proc = subprocess.Popen([sys.executable, "example.py"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not _settled(tmp_path / "shop.db"):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the example settled nothing"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert out.decode() == "1 sent, 1 rejected\n"
    with sqew.Client(tmp_path / "shop.db") as client:
        (dead,) = client.dlq_list("emails")
        assert (dead.payload["to"], dead.last_error) == ("nobody", "not an address: nobody")
