"""A database sqew creates, and every file beside it, is readable by its owner only (0600):
the database holds HMAC secrets in plaintext."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import sqew

SQEW = Path(sys.executable).parent / "sqew"


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    old = os.umask(0o022)  # what lets a plain open() make world-readable files
    try:
        yield
    finally:
        os.umask(old)


def modes(directory: Path) -> dict[str, str]:
    return {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in sorted(directory.iterdir())}


def test_a_database_made_by_the_client_is_private(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with sqew.Client(str(db)) as client:
        client.create_queue("q", hmac_secret="s" * 16)
        client.enqueue("q", "x")
        client.poll("q")  # a poll may take the reaper's lead: its lock file too
        made = modes(tmp_path)
    assert {"q.db", "q.db-wal", "q.db-shm", "q.db-lock"} <= set(made)
    assert set(made.values()) == {"0o600"}, made


def test_a_database_made_by_the_cli_is_private(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    done = subprocess.run([str(SQEW), "--db", str(db), "queue", "add", "--name", "q"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    made = modes(tmp_path)
    assert "cli.db" in made
    assert set(made.values()) == {"0o600"}, made


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    with sqew.Client(str(db)):
        pass
    os.chmod(db, 0o640)  # the owner shared it with a group on purpose
    with sqew.Client(str(db)) as client:
        client.create_queue("q")
    assert modes(tmp_path)["shared.db"] == "0o640"
