"""A checkout that ran ``./scripts/serve`` (or any sqew command) stays clean: every file sqew
makes beside a database in the working directory is ignored by git."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MADE = ("sqew.db", "sqew.db-wal", "sqew.db-shm", "sqew.db-lock", "sqew.db-lock-reaper")


def test_the_files_sqew_makes_beside_a_database_are_ignored() -> None:
    done = subprocess.run(["git", "check-ignore", "--no-index", *MADE], cwd=ROOT,
                          capture_output=True, text=True, timeout=30, check=False)
    assert sorted(done.stdout.split()) == sorted(MADE), done.stderr
