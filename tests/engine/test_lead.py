"""``Backend.try_lead``: one process per database holds a role, a follower takes over when the
holder releases it or dies, and the lock lives in a file of its own (never the database)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from sqew.backends import open_backend
from sqew.backends.sqlite import lockfile

from .support import Procs, finish

HOLDER = textwrap.dedent("""
    import sys
    from sqew.backends import open_backend
    backend = open_backend(sys.argv[1])
    lead = backend.try_lead("reaper")
    print("held" if lead is not None and lead.held else "refused", flush=True)
    sys.stdin.readline()  # hold it until told, or killed
""")


def test_one_holder_per_role_and_database(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    first, second = open_backend(db), open_backend(db)
    try:
        lead = first.try_lead("reaper")
        assert lead is not None and lead.held
        assert second.try_lead("reaper") is None
        assert first.try_lead("reaper") is None  # one per database, within a process too
        other = second.try_lead("archiver")  # roles are independent
        assert other is not None
        other.release()
        lead.release()
        assert not lead.held
        lead.release()  # idempotent
        taken = second.try_lead("reaper")
        assert taken is not None and taken.held
        with second.write() as tx:  # the lead is no write lock: writes go on
            assert tx.list_queues() == []
        taken.release()
    finally:
        first.close()
        second.close()


def test_the_lock_is_a_file_of_its_own(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    backend = open_backend(db)
    try:
        lead = backend.try_lead("reaper")
        assert lead is not None
        assert lockfile.lead_path(db, "reaper") == tmp_path / "q.db-lock-reaper"
        assert (tmp_path / "q.db-lock-reaper").exists()
        # The committers' lock is free: a lead never stops writers of other processes.
        write_lock = lockfile.LockFile(db)
        assert write_lock.acquire(wait=False)
        write_lock.close()
        lead.release()
    finally:
        backend.close()


def test_a_follower_takes_over_when_the_holder_dies(procs: Procs, tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    open_backend(db).close()  # migrated before the children race for it
    holder = procs.python(HOLDER, str(db))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    backend = open_backend(db)
    try:
        assert backend.try_lead("reaper") is None
        holder.kill()  # SIGKILL: no release; the kernel drops the lock with the process
        finish(holder, 10)
        lead = backend.try_lead("reaper")
        assert lead is not None and lead.held
        refused = procs.python(HOLDER, str(db))
        assert refused.stdout is not None and refused.stdout.readline().strip() == "refused"
        lead.release()
    finally:
        backend.close()
