"""A process that opened a database while the file was read-only for it (``chmod a-w``)
refuses writes with ``Unavailable`` and reads on; once the file is writable again, its writes
succeed, without a restart: the embedded Client's and ``sqew serve``'s.

The reader runs as another user when the suite runs as root (``tests/another_user.py``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import another_user
import pytest

import sqew

TIMEOUT_S = 60.0
CLIENT = """
import sys, sqew
from sqew import errors

def enqueue(client):
    try:
        client.enqueue("jobs", {"n": 2})
        return "ok"
    except errors.SqewError as exc:
        return f"{exc.code}: {exc.message}"

with sqew.Client(sys.argv[1]) as client:
    print(enqueue(client), flush=True)
    print(len(client.peek("jobs")), flush=True)
    sys.stdin.readline()  # the modes are restored
    print(enqueue(client), flush=True)
"""


@pytest.fixture
def reader() -> another_user.Reader:
    found = another_user.reader()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture
def db(reader: another_user.Reader) -> Iterator[Path]:
    """A database of one message that the reader owns, in a directory it may enter, kept open
    by this process (its ``-wal`` and ``-shm`` there, writable, as under any live service)."""
    folder = Path(tempfile.mkdtemp(prefix="sqew-ro-"))
    path = folder / "q.db"
    try:
        with sqew.Client(str(path)) as client:
            client.create_queue("jobs")
            client.enqueue("jobs", {"n": 1})
            if reader.uid is not None:
                for p in (folder, *folder.iterdir()):
                    os.chown(p, reader.uid, reader.gid or 0)
            yield path
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def _start(reader: another_user.Reader, argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **reader.env}, cwd="/",
        **reader.popen())


def _line(proc: subprocess.Popen[str]) -> str:
    """The process's next line of output (bounded)."""
    assert proc.stdout is not None
    stdout = proc.stdout
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
    t.start()
    t.join(TIMEOUT_S)
    assert got and got[0], "no answer"
    return got[0].strip()


@contextlib.contextmanager
def _running(proc: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield proc
    finally:
        proc.kill()
        proc.communicate(timeout=TIMEOUT_S)


def test_a_client_opened_read_only_writes_again_once_the_file_is_writable(
        reader: another_user.Reader, db: Path) -> None:
    db.chmod(0o444)
    with _running(_start(reader, [reader.python, "-c", CLIENT, str(db)])) as proc:
        assert _line(proc) == "Unavailable: the database is read-only"
        assert _line(proc) == "1"  # reads work
        db.chmod(0o644)
        assert proc.stdin is not None
        proc.stdin.write("restored\n")
        proc.stdin.flush()
        assert _line(proc) == "ok"


def _post(url: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(f"{url}/queues/jobs/messages", method="POST",
                                     data=b'{"payload": {"n": 3}}',
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class _Log:
    """A process's JSON log lines (stderr), collected on a thread as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        self.records: list[dict[str, object]] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, args=(proc.stderr,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.records.append(json.loads(line))
                self._changed.notify_all()

    def wait_for(self, message: str) -> dict[str, object]:
        """The first record whose message starts with ``message`` (bounded wait)."""
        def found() -> dict[str, object] | None:
            return next((r for r in self.records if str(r["message"]).startswith(message)),
                        None)
        with self._changed:
            assert self._changed.wait_for(found, TIMEOUT_S), (message, self.records)
            record = found()
        assert record is not None
        return record


def test_a_server_started_read_only_writes_again_once_the_file_is_writable(
        reader: another_user.Reader, db: Path) -> None:
    db.chmod(0o444)
    argv = [*reader.sqew, "serve", "--db", str(db), "--port", "0", "--log-format", "json",
            "--reap-interval-ms", "100"]
    with _running(_start(reader, argv)) as proc:
        log = _Log(proc)
        line = _line(proc)
        assert line.startswith("sqew serving on http://127.0.0.1:"), line
        url = line.split("serving on ", 1)[1].split()[0]
        status, body = _post(url)
        assert status == 503, body
        assert body["error"]["code"] == "Unavailable", body  # type: ignore[index]
        with urllib.request.urlopen(f"{url}/queues/jobs/stats", timeout=TIMEOUT_S) as stats:
            assert json.loads(stats.read())["ready"] == 1
        # The reaper's failure is the operator's news in one line, not a traceback.
        failed = log.wait_for("reaping failed")
        assert failed["level"] == "warning", failed
        assert "Unavailable: the database is read-only" in str(failed["message"]), failed
        assert "traceback" not in failed, failed
        db.chmod(0o644)
        status, body = _post(url)
        assert status == 201, body
        log.wait_for("reaping works again")


def test_a_server_that_mapped_the_shm_read_only_says_to_restart_it(
        reader: another_user.Reader, db: Path) -> None:
    shm = db.with_name(db.name + "-shm")
    for p in (db, shm):
        p.chmod(0o444)
    argv = [*reader.sqew, "serve", "--db", str(db), "--port", "0"]
    with _running(_start(reader, argv)) as proc:
        line = _line(proc)
        url = line.split("serving on ", 1)[1].split()[0]
        status, body = _post(url)
        assert (status, body) == (503, {"error": {"code": "Unavailable",
                                                  "message": "the database is read-only"}})
        for p in (db, shm):
            p.chmod(0o644)
        # SQLite maps a process's -shm once for all its connections: read-only it stays so.
        status, body = _post(url)
        assert status == 503, body
        assert body["error"]["message"].endswith("restart the process"), body  # type: ignore[index]
    with _running(_start(reader, argv)) as proc:
        url = _line(proc).split("serving on ", 1)[1].split()[0]
        status, body = _post(url)
        assert status == 201, body
