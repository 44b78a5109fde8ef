"""A full disk under the database: the ``full-disk`` scenario.

The run's database lives on a small file system of its own (``small_fs``: a tmpfs with a size
limit, mounted for the run and unmounted after the check, always; it needs root, or the
scenario is skipped with the reason). The fault fills it with a ballast file until writes
fail, keeps it full a while under load (group commits, checkpoints, the ``-wal`` and ``-shm``
growing meet ``SQLITE_FULL``), then deletes the ballast. While it is full, an enqueue is sent
through each interface (the ``sqew.Client`` on the file, HTTP to ``sqew serve``, the ``sqew``
command line) to a queue of its own: each must be refused with a clear error (the code
``Unavailable``, no traceback, no 500), or succeed where SQLite still had room.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import sqew
from chaos.procs import SQEW_BIN, STOP_S, Server, child_env
from chaos.run import Run
from sqew import errors

FS_BYTES = 48 * 1024 * 1024
"""The file system's size: room for the run's database and its WAL, the rest ballast."""
PROBE_QUEUE = "probe"
"""The queue the probes enqueue to (not one of the workload's: the oracle does not read it)."""
CLEAR = "Unavailable"
"""The code every interface must answer with while the disk is full."""
PROBE_TIMEOUT_S = 60.0
PROBE_BYTES = 100_000
"""(Under the 128 KiB that one argument of a command may be.)"""
FULL_MAX_S = 5.0
"""How long the disk is kept full past its random hold, at most, for the probes to answer."""
_CHUNK = 1024 * 1024


def _mount(where: Path) -> str | None:
    """Mount a tmpfs of ``FS_BYTES`` on ``where``; why not, or None."""
    if os.geteuid() != 0:
        return "mounting a small file system for the database needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "the mount and umount commands are not installed"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES},mode=0755",
                           "sqew-chaos", str(where)], capture_output=True, text=True,
                          check=False, timeout=STOP_S)
    if done.returncode != 0:
        return f"mount -t tmpfs failed: {done.stderr.strip() or done.returncode}"
    return None


def _umount(where: Path) -> None:
    """Unmount ``where``: tried a few times (a process that just exited may still hold a
    file), then lazily (detached now, freed when the last file closes)."""
    for _ in range(20):
        if subprocess.run(["umount", str(where)], capture_output=True,
                          check=False, timeout=STOP_S).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False,
                   timeout=STOP_S)


def unavailable() -> str | None:
    """Why ``full-disk`` cannot run here (a tmpfs cannot be mounted), or None."""
    with tempfile.TemporaryDirectory(prefix="sqew-chaos-fs-") as probe:
        reason = _mount(Path(probe))
        if reason is None:
            _umount(Path(probe))
        return None if reason is None else f"full-disk: {reason}"


@contextlib.contextmanager
def small_fs(run: Run) -> Iterator[None]:
    """The run's database (and its ``-wal``, ``-shm``, lock files) on a tmpfs of
    ``FS_BYTES`` mounted in the run's directory; after the check the files are copied into
    the run's directory (kept there if the oracle found a violation) and it is unmounted."""
    mount = run.directory / "fs"
    mount.mkdir(exist_ok=True)
    reason = _mount(mount)
    if reason is not None:
        raise RuntimeError(f"full-disk: {reason}")
    try:
        run.db = mount / "chaos.db"
        run.target = str(run.db)
        run.server = Server(run.target, run.directory / "server.log", run.server_workers)
        run.servers = [run.server]
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            (mount / "ballast").unlink()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                shutil.copyfile(f"{run.db}{suffix}", run.directory / f"chaos.db{suffix}")
        _umount(mount)
        with contextlib.suppress(OSError):
            mount.rmdir()


def fill(path: Path) -> int:
    """Write ``path`` until the file system is full (1 MiB pieces, then 4 KiB ones); its
    size."""
    size = 0
    with path.open("ab", buffering=0) as f:
        for piece in (_CHUNK, 4096, 512):
            block = b"\0" * piece
            while True:
                try:
                    size += f.write(block) or 0
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    return size


def _payload(kind: str) -> dict[str, str]:
    # Large enough to need new pages at the end of the -wal, where reused ones will not do.
    return {"probe": kind, "fill": "x" * PROBE_BYTES}


def probe(run: Run, kind: str) -> str:
    """One enqueue through the interface ``kind``: ``ok``, or the error it answered."""
    if kind == "cli":
        done = subprocess.run(
            [str(SQEW_BIN), "--db", run.target, "message", "enqueue", "--queue", PROBE_QUEUE,
             "--payload", json.dumps(_payload(kind))], capture_output=True, text=True, check=False,
            timeout=PROBE_TIMEOUT_S, env=child_env())
        return "ok" if done.returncode == 0 else f"exit {done.returncode}: {done.stderr.strip()}"
    try:
        client = (sqew.Client(run.target) if kind == "local"  # type: ignore[abstract]
                  else sqew.Client(run.server.url, timeout=PROBE_TIMEOUT_S))  # type: ignore[abstract]
        with client:
            client.enqueue(PROBE_QUEUE, _payload(kind))
    except errors.SqewError as exc:
        text = str(exc)
        return text if text.startswith(f"{exc.code}:") else f"{exc.code}: {text}"
    return "ok"


def probes(run: Run, answers: dict[str, str]) -> list[threading.Thread]:
    """Probe each interface at once, each in a thread of its own (one may wait long: the
    space is freed on time all the same); the answers go into ``answers``."""
    def one(kind: str) -> None:
        try:
            answers[kind] = probe(run, kind)
        except Exception as exc:  # the probe itself failed (a timeout): an unclear answer
            answers[kind] = f"no answer: {exc!r}"

    threads = [threading.Thread(target=one, args=(kind,), daemon=True)
               for kind in ("local", "http", "cli")]
    for t in threads:
        t.start()
    return threads


def is_clear(kind: str, answer: str) -> bool:
    """Whether a probe's answer is a success or the clear error (``Unavailable``; the command
    line's one line ``error: Unavailable: …`` and exit status 1, no traceback)."""
    if answer == "ok":
        return True
    if kind == "cli":
        return answer.startswith(f"exit 1: error: {CLEAR}:") and "\n" not in answer
    return answer.startswith(f"{CLEAR}:")


def log(run: Run, event: str) -> None:
    """Note an event of the fault, with its time, in the run's ``faults.log``."""
    with (run.directory / "faults.log").open("a") as f:
        f.write(f"{time.strftime('%H:%M:%S', time.gmtime())}.{int(time.time() * 1000) % 1000:03d} "
                f"{event}\n")


def full_disk(run: Run) -> None:
    """Fill the database's file system with a ballast file until writes fail, keep it full
    0.5 to 1.5 s under load, and until the probes of each interface have answered (at most
    ``FULL_MAX_S`` more), then free the space."""
    with sqew.Client(run.target) as client:  # type: ignore[abstract]
        client.create_queue(PROBE_QUEUE)
    ballast = run.db.parent / "ballast"
    answers: Counter[str] = Counter()
    wrong: list[str] = []
    while run.pause(0.3, 0.8):
        size = fill(ballast)
        run.faults += 1
        log(run, f"full (ballast of {size} bytes)")
        got: dict[str, str] = {}
        threads = probes(run, got)
        hold = time.time() + run.rng.uniform(0.5, 1.5)
        for t in threads:  # the probes answer while the disk is full, if they can in time
            t.join(max(0.0, hold + FULL_MAX_S - time.time()))
        time.sleep(max(0.0, hold - time.time()))
        ballast.unlink()
        log(run, "space freed")
        for t in threads:
            t.join(PROBE_TIMEOUT_S + STOP_S)
        for kind, answer in got.items():
            answers[f"{kind}: {answer.split(' (request id')[0]}"] += 1
            if not is_clear(kind, answer):
                wrong.append(f"{kind}: {answer}")
    run.notes.append("while the disk was full, enqueues answered: " + "; ".join(
        f"{answer} ({n})" for answer, n in sorted(answers.items())))
    if wrong:
        raise RuntimeError(f"full-disk: unclear answers on a full disk: {wrong}")
