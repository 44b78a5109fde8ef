"""The ``-wal`` file shrinks back after a burst: ``journal_size_limit`` on every connection.

SQLite starts the WAL over from its beginning after a complete checkpoint but keeps the file
at its largest size unless a limit is set (309 MB stayed on disk after one long reader). The
limit is 64 MiB; here a module constant sets it to 1 MiB (no setting exposes it), so that a
modest burst is enough to see the file cut back.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

import sqew
from sqew.backends.sqlite import connection

LIMIT = 1 << 20


def test_the_wal_is_cut_back_to_the_limit_after_a_burst_and_a_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "JOURNAL_SIZE_LIMIT", LIMIT)
    db = tmp_path / "q.db"
    wal = tmp_path / "q.db-wal"
    with sqew.Client(db) as client:
        client.create_queue("q", max_payload_bytes=1_048_576)
        client.enqueue_batch("q", [{"payload": "x" * 100_000} for _ in range(60)])
        assert wal.stat().st_size > 4 * LIMIT  # one 6 MB transaction: the WAL holds all of it
        with contextlib.closing(sqlite3.connect(db)) as other:  # a checkpoint, as a server's
            busy, _, _ = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0
        # The next commit starts the WAL over from its beginning, and cuts the file.
        client.enqueue("q", "small")
        assert wal.stat().st_size <= LIMIT
        assert client.stats("q").ready == 61
