"""A database that becomes read-only under load: the ``read-only`` scenario.

The workload and ``sqew serve`` run as a user whom file modes stop (``nobody`` when the
harness runs as root, whom they do not; the harness's own user otherwise:
``tests/another_user.py``), on a database that user owns. The fault takes the write
permission away (``chmod a-w``) from the database file, and in turn from its ``-wal`` and
``-shm`` and its directory too, kills (``kill -9``) a workload process (and, every third
fault, the server) and starts it again, so that it opens the database while it is read-only,
probes every interface (those faults), then gives the modes back and probes again.

While read-only, a process that opens the database must answer a write with the clear error
(``Unavailable``, "read-only": HTTP 503 with the error envelope; on the command line one line
and exit status 1) and answer reads; once the modes are back, its writes must succeed.
Descriptors opened before keep their write access (the processes that were not killed go on
writing): that is how files work.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chaos import faults_pg
from chaos.faults_disk import log
from chaos.procs import Server, Slot, User
from chaos.readonly_probes import PROBE_QUEUE, Probes, http_call
from chaos.run import Run
from chaos.suite import from_tests

VARIANTS = (("file",), ("file", "directory"), ("file", "-wal and -shm"),
            ("file", "-wal and -shm", "directory"))
"""What loses its write permission, fault after fault in turn."""
PROBED_EVERY = 3
"""Every third fault (the first included) also restarts the server and probes every
interface (a few seconds: processes to start); the others restart a workload process."""
WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def _reader() -> Any:
    return from_tests("another_user").reader()


def unavailable() -> str | None:
    """Why ``read-only`` cannot run here (no user whom file modes stop), or None."""
    found = _reader()
    return f"read-only: {found}" if isinstance(found, str) else None


def _user() -> User | None:
    """The user the run's processes take on: None when the harness's own will do."""
    found = _reader()
    if isinstance(found, str):
        raise RuntimeError(f"read-only: {found}")
    if found.uid is None:
        return None
    return User(found.uid, found.gid, tuple(found.sqew), dict(found.env))


@contextlib.contextmanager
def public_dir(run: Run) -> Iterator[None]:
    """Under root, the run in a directory of its own that the workload's user may enter
    (pytest's and ``mkdtemp``'s are private), copied back into the run's directory after the
    check; the database in a subdirectory (the one the fault makes read-only)."""
    home = run.directory
    public = Path(tempfile.mkdtemp(prefix="sqew-chaos-ro-")) if os.geteuid() == 0 else home
    try:
        public.chmod(0o755)
        run.directory, run.db = public, public / "db" / "chaos.db"
        run.db.parent.mkdir(exist_ok=True)
        run.target = str(run.db)
        run.server = Server(run.target, public / "server.log", run.server_workers)
        run.servers = [run.server]
        yield
    finally:
        _restore(run)
        run.directory = home
        if public != home:
            shutil.copytree(public, home, dirs_exist_ok=True, symlinks=True)
            shutil.rmtree(public, ignore_errors=True)


def prepare(run: Run) -> None:
    """Run the workload and the server as the user, on files it owns. The harness keeps the
    database open meanwhile, as a live service would: its ``-wal`` and ``-shm`` are not
    deleted and made again (with the file's mode) when the workload's processes all close
    it, at the run's end or between a kill and a start."""
    run.user = _user()
    (run.directory / "journals").mkdir(exist_ok=True)
    if run.user is not None:
        for server in run.servers:
            server.user = run.user
        for folder, dirs, files in os.walk(run.directory):
            for name in [".", *dirs, *files]:
                os.chown(os.path.join(folder, name), run.user.uid, run.user.gid)
    holder = sqlite3.connect(run.db, isolation_level=None)
    holder.execute("SELECT count(*) FROM sqlite_master").fetchone()
    run.cleanups.append(holder.close)


def _beside(run: Run) -> list[Path]:
    """The database's ``-wal`` and ``-shm`` (those there are)."""
    return [p for p in (run.db.with_name(run.db.name + s) for s in ("-wal", "-shm"))
            if p.exists()]


def _targets(run: Run, variant: tuple[str, ...]) -> list[Path]:
    """What ``variant`` takes the write permission from: the file first, its directory last."""
    return ([run.db] + (_beside(run) if "-wal and -shm" in variant else [])
            + ([run.db.parent] if "directory" in variant else []))


def _chmod(paths: list[Path], write: bool) -> None:
    for p in paths:
        mode = p.stat().st_mode
        p.chmod(stat.S_IMODE(mode | stat.S_IWUSR) if write else stat.S_IMODE(mode & ~WRITE))


def _restore(run: Run) -> bool:
    """Give the database, its ``-wal`` and ``-shm`` and its directory their write permission
    back (the file last: a process that finds it writable finds the rest writable); whether
    the ``-wal`` or ``-shm`` had lost it (a fault's, or made during the fault: SQLite gives
    them the file's mode)."""
    with contextlib.suppress(OSError):
        lost = not all(p.stat().st_mode & stat.S_IWUSR for p in _beside(run))
        _chmod([run.db.parent, *_beside(run), run.db], write=True)
        return lost
    return False


def _restart(run: Run, victims: list[Slot], server: bool) -> None:
    """``kill -9`` the workload processes ``victims`` (and the server), start the processes
    again (the server's start is ``_start``'s)."""
    for slot in victims:
        slot.kill()
    if server:
        run.server.kill()
    for slot in victims:
        run.restart(slot)
    log(run, f"killed {'the server and ' if server else ''}"
             f"{', '.join(v.name for v in victims)} (started again)")


def _start(run: Run, what: str) -> None:
    run.server.start()
    log(run, f"server {what}")


def read_only(run: Run) -> None:
    """Take the write permission from the database (and in turn from its ``-wal`` and
    ``-shm``, its directory), kill a workload process (and every ``PROBED_EVERY`` faults the
    server) and start them again while it is read-only, probe every interface (those faults),
    give the permission back after 0.5 to 1.5 s (and the probes), probe again; every 0.5 to
    1.5 s. Where the ``-shm`` had lost its write permission, the processes started meanwhile
    are started again after the restore: they cannot write before (``docs/reliability.md``)."""
    http_call(f"{run.server.url}/queues", {"name": PROBE_QUEUE})
    probes = Probes(run)
    restarted = 0
    while run.pause(0.5, 1.5):
        variant = VARIANTS[run.faults % len(VARIANTS)]
        probed = run.faults % PROBED_EVERY == 0
        hold = time.time() + run.rng.uniform(0.5, 1.5)
        _chmod(_targets(run, variant), write=False)
        run.faults += 1
        log(run, f"read-only: {', '.join(variant)}")
        victims = [run.rng.choice(run.slots)]
        try:
            _restart(run, victims, server=probed)
            if probed:
                probes.all("read-only", True, server=lambda: _start(run, "restarted read-only"))
            time.sleep(max(0.0, hold - time.time()))
        finally:
            shm_lost = _restore(run)
        log(run, "writable again")
        server = None
        if shm_lost:
            # SQLite maps a process's -shm once for all its connections: opened read-only,
            # it stays so until the process closes every connection (docs/reliability.md).
            _restart(run, victims, server=probed)
            if probed:
                server = lambda: _start(run, "restarted (-shm had been read-only)")  # noqa: E731
            restarted += 1
        if probed:
            probes.all("writable again", False, server=server)
    probes.kept()
    run.notes.append(f"probes ({probes.sent} enqueues): " + "; ".join(
        f"{answer} ({n})" for answer, n in sorted(probes.counts.items())))
    run.notes.append(f"{restarted} of {run.faults} faults left the -shm read-only for the "
                     "processes started meanwhile: restarted after the restore; "
                     f"{-(-run.faults // PROBED_EVERY)} restarted the server and probed")
    for w in probes.wrong[:faults_pg.SHOWN]:
        run.notes.append(f"{faults_pg.WRONG_ANSWER}: {w}")
