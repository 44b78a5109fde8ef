"""A database that becomes read-only under load: the ``read-only`` scenario.

The workload and ``sqew serve`` run as a user whom file modes stop (``nobody`` when the
harness runs as root, whom they do not; the harness's own user otherwise:
``tests/another_user.py``), on a database that user owns. The fault takes the write
permission away (``chmod a-w``) from the database file, and in turn from its ``-wal`` and
``-shm`` and its directory too, kills (``kill -9``) a workload process and the server and
starts them again, so that they open the database while it is read-only, probes every
interface, then gives the modes back and probes again.

While read-only, a process that opens the database must answer a write with the clear error
(``Unavailable``, "read-only": HTTP 503 with the error envelope; on the command line one line
and exit status 1) and answer reads; once the modes are back, its writes must succeed.
Descriptors opened before keep their write access (the processes that were not killed go on
writing): that is how files work.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from chaos import faults_pg, procs
from chaos.faults_disk import log
from chaos.procs import SQEW_BIN, STOP_S, Server, Slot, User
from chaos.run import Run
from chaos.suite import from_tests

PROBE_QUEUE = "probe"
"""The queue the probes enqueue to (not one of the workload's: the oracle does not read it)."""
PROBE_TIMEOUT_S = 60.0
CLEAR = ("Unavailable", "read-only")
"""A refused write's code, and a word its message must hold."""
VARIANTS = (("file",), ("file", "directory"), ("file", "-wal and -shm"),
            ("file", "-wal and -shm", "directory"))
"""What loses its write permission, fault after fault in turn."""
WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


def client_probe(db: str, tag: str, out: str, user: User | None) -> None:
    """The embedded Client's probe, in a process forked for it (``procs.fork``): as the
    workload's user, an enqueue (its id, or the error) and reads (``ok``, or the error),
    written to ``out`` as JSON (opened first: the harness reads it)."""
    import sqew
    from sqew import errors

    with open(out, "w") as f:
        if user is not None:
            user.become()
        answers: dict[str, object] = {}

        def call(name: str, fn: Callable[[], object]) -> None:
            try:
                answers[name] = fn()
            except errors.SqewError as exc:
                answers[name] = f"{exc.code}: {exc.message}"
            except Exception as exc:  # a wrong answer: sqew raised something else
                answers[name] = f"{type(exc).__name__}: {exc}"

        def read(client: sqew.Client) -> str:
            client.list_queues()
            client.stats(PROBE_QUEUE)
            return "ok"

        try:
            with sqew.Client(db, create=False) as client:  # type: ignore[abstract]
                call("enqueue", lambda: client.enqueue(PROBE_QUEUE, {"probe": tag}).message_id)
                call("read", lambda: read(client))
        except Exception as exc:
            answers["open"] = f"{type(exc).__name__}: {exc}"
        f.write(json.dumps(answers))


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


class Probes:
    """The probes' answers: counted by kind, the wrong ones kept, acknowledged ids noted."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.user = run.user
        self.counts: Counter[str] = Counter()
        self.wrong: list[str] = []
        self.ids: list[int] = []
        self.sent = 0
        self._lock = threading.Lock()

    def note(self, phase: str, kind: str, answer: str, good: bool) -> None:
        with self._lock:
            self.counts[f"{phase}: {kind} {answer if good else 'WRONG'}"] += 1
            if not good:
                self.wrong.append(f"{phase}: {kind}: {answer}")

    def _env(self) -> dict[str, str]:
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        return {**env, **(self.user.env if self.user else {})}

    def _run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            argv, capture_output=True, text=True, check=False, timeout=PROBE_TIMEOUT_S,
            env=self._env(), cwd="/", **(self.user.popen() if self.user else {}))

    def _sqew(self) -> list[str]:
        return list(self.user.sqew) if self.user else [str(SQEW_BIN)]

    def client(self, phase: str, read_only: bool) -> None:
        """The embedded Client in a fresh process of the user: an enqueue, then reads."""
        with tempfile.NamedTemporaryFile(dir=self.run.directory, suffix=".probe") as out:
            proc = procs.fork(client_probe, self.run.target, phase, out.name, self.user)
            proc.join(PROBE_TIMEOUT_S)
            if proc.is_alive():
                procs.kill_tree(proc)
            try:
                answers = json.loads(Path(out.name).read_text())
            except ValueError:
                answers = {"open": f"no answer (exit {proc.exitcode})"}
        if "open" in answers:
            self.note(phase, "client", str(answers["open"]), False)
            return
        self._enqueued(phase, "client enqueue", answers.get("enqueue"), read_only)
        self.note(phase, "client read", str(answers.get("read")), answers.get("read") == "ok")

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self._run([*self._sqew(), "--db", self.run.target, "--json", *args])

    def cli(self, phase: str, read_only: bool) -> None:
        """An enqueue through the ``sqew`` command, as the user."""
        done = self._cli("message", "enqueue", "--queue", PROBE_QUEUE,
                         "--payload", json.dumps({"probe": phase}))
        if done.returncode == 0:
            try:
                answer: object = int(json.loads(done.stdout)["message_id"])
            except (ValueError, KeyError, TypeError):
                answer = f"exit 0: {done.stdout.strip()[-300:]}"
        elif done.returncode == 1 and done.stderr.count("\n") == 1 and \
                (error := _envelope(done.stderr)) is not None:
            answer = error
        else:
            answer = f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
        self._enqueued(phase, "cli enqueue", answer, read_only)

    def cli_read(self, phase: str, read_only: bool) -> None:
        """``sqew queue list`` or ``sqew stats`` (in turn), as the user."""
        args = (["queue", "list"], ["stats", "--queue", PROBE_QUEUE])[self.run.faults % 2]
        done = self._cli(*args)
        self.note(phase, f"cli {' '.join(args[:2])}", "ok" if done.returncode == 0 else
                  f"exit {done.returncode}: {done.stderr.strip()[-300:]}", done.returncode == 0)

    def http(self, phase: str, read_only: bool) -> None:
        """HTTP to the server (started while the database was read-only): an enqueue, the
        stats."""
        status, body = _call(f"{self.run.server.url}/queues/{PROBE_QUEUE}/messages",
                             {"payload": {"probe": phase}})
        answer: object = f"{status} {body}"
        if status == 201 and isinstance(body, dict) and "message_id" in body:
            answer = int(body["message_id"])
        elif status == 503 and isinstance(body, dict) and isinstance(body.get("error"), dict):
            answer = f"{body['error'].get('code')}: {body['error'].get('message')}"
        self._enqueued(phase, "http enqueue", answer, read_only)
        status, body = _call(f"{self.run.server.url}/queues/{PROBE_QUEUE}/stats")
        self.note(phase, "http stats", str(status), status == 200)

    def _enqueued(self, phase: str, kind: str, answer: object, read_only: bool) -> None:
        """A write's answer: refused with the clear error while read-only, done after."""
        self.sent += 1
        if isinstance(answer, int) and not isinstance(answer, bool):
            with self._lock:
                self.ids.append(answer)
            self.note(phase, kind, "done", not read_only)
            return
        text = str(answer)
        clear = text.startswith(f"{CLEAR[0]}:") and CLEAR[1] in text and "\n" not in text
        self.note(phase, kind, "refused (Unavailable: read-only)" if clear else text,
                  read_only and clear)

    def all(self, phase: str, read_only: bool, server: Callable[[], None] | None = None) -> None:
        """Every interface at once, each in a thread of its own, the HTTP one after
        ``server`` (its start); back once all answered."""
        def http(phase: str, read_only: bool) -> None:
            if server is not None:
                server()
            self.http(phase, read_only)

        probes = [self.client, self.cli, http] + ([self.cli_read] if read_only else [])
        threads = [threading.Thread(target=self._guarded, args=(fn, phase, read_only),
                                    daemon=True) for fn in probes]
        for t in threads:
            t.start()
        for t in threads:
            t.join(3 * PROBE_TIMEOUT_S + STOP_S)

    def _guarded(self, fn: Callable[[str, bool], None], phase: str, read_only: bool) -> None:
        try:
            fn(phase, read_only)
        except Exception as exc:  # the probe itself failed (a timeout): an unclear answer
            self.note(phase, fn.__name__, f"no answer: {exc!r}", False)

    def kept(self) -> None:
        """Every enqueue a probe saw acknowledged is in the probe queue (nobody consumes it)."""
        status, body = _call(f"{self.run.server.url}/queues/{PROBE_QUEUE}/messages?limit=1000")
        if status != 200 or not isinstance(body, dict):
            self.wrong.append(f"the probe queue could not be read: {status} {body}")
            return
        there = {m["id"] for m in body["messages"]}
        lost = sorted(set(self.ids) - there)
        if lost:
            self.wrong.append(f"probe enqueues acknowledged but lost: {lost}")


def _envelope(text: str) -> str | None:
    """``code: message`` of the error envelope ``text`` is (with ``--json``, the command line
    prints the REST API's), or None if it is none."""
    try:
        error = json.loads(text)["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return None


def _call(url: str, body: object = None) -> tuple[int, Any]:
    """An HTTP call (a POST of ``body`` as JSON if given): its status and its JSON body (or
    its text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:
            status, text = answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def _restart(run: Run, victims: list[Slot]) -> None:
    """``kill -9`` the workload processes ``victims`` and the server, start the processes
    again (the server's start is ``_start``'s)."""
    for slot in victims:
        slot.kill()
    run.server.kill()
    for slot in victims:
        run.restart(slot)
    log(run, f"killed the server and {', '.join(v.name for v in victims)} (started again)")


def _start(run: Run, what: str) -> None:
    run.server.start()
    log(run, f"server {what}")


def read_only(run: Run) -> None:
    """Take the write permission from the database (and in turn from its ``-wal`` and
    ``-shm``, its directory), kill a workload process and the server and start them again
    while it is read-only, probe every interface, give the permission back after 0.5 to 1.5 s
    (and the probes), probe again; every 0.5 to 1.5 s. Where the ``-shm`` had lost its write
    permission, the processes started meanwhile are started again after the restore: they
    cannot write before (``docs/reliability.md``)."""
    _call(f"{run.server.url}/queues", {"name": PROBE_QUEUE})
    probes = Probes(run)
    restarted = 0
    while run.pause(0.5, 1.5):
        variant = VARIANTS[run.faults % len(VARIANTS)]
        hold = time.time() + run.rng.uniform(0.5, 1.5)
        _chmod(_targets(run, variant), write=False)
        run.faults += 1
        log(run, f"read-only: {', '.join(variant)}")
        victims = [run.rng.choice(run.slots)]
        try:
            _restart(run, victims)
            probes.all("read-only", True, server=lambda: _start(run, "restarted read-only"))
            time.sleep(max(0.0, hold - time.time()))
        finally:
            shm_lost = _restore(run)
        log(run, "writable again")
        server = None
        if shm_lost:
            # SQLite maps a process's -shm once for all its connections: opened read-only,
            # it stays so until the process closes every connection (docs/reliability.md).
            _restart(run, victims)
            server = lambda: _start(run, "restarted (-shm had been read-only)")  # noqa: E731
            restarted += 1
        probes.all("writable again", False, server=server)
    probes.kept()
    run.notes.append(f"probes ({probes.sent} enqueues): " + "; ".join(
        f"{answer} ({n})" for answer, n in sorted(probes.counts.items())))
    run.notes.append(f"{restarted} of {run.faults} faults left the -shm read-only for the "
                     "processes started meanwhile: restarted after the restore")
    for w in probes.wrong[:faults_pg.SHOWN]:
        run.notes.append(f"{faults_pg.WRONG_ANSWER}: {w}")
