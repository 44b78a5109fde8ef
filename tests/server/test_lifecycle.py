"""``sqew serve`` as a real subprocess: how it stops, and how it refuses to start.

``tests/http/test_lifecycle.py`` covers a signal ending long polls, two workers serving one
file and stopping on SIGTERM, and a port in use. This module adds a request *in flight* across
the signal (it finishes and is committed; new connections are refused meanwhile; the database
is closed cleanly), a request cut off by the graceful timeout, SIGINT on two workers with
waiting polls, and database files that must be refused without being touched.
"""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import sqlite3
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from .support import SQEW_BIN, STOP_S, read_response, request_head, serve

WAIT_MS = 20_000


def _slow_enqueue(port: int, body: bytes) -> socket.socket:
    """Start an enqueue whose body is only half sent; the caller sends the rest."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(request_head("POST", "/queues/q/messages", length=len(body)) + body[:10])
    return sock


def _poll_in_background(
    pool: ThreadPoolExecutor, url: str, queue: str
) -> Future[httpx.Response]:
    return pool.submit(httpx.post, f"{url}/queues/{queue}/poll", params={"wait_ms": WAIT_MS},
                       timeout=WAIT_MS / 1000 + 15)


def _wait_until_refused(port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        except ConnectionRefusedError:
            return
        time.sleep(0.02)
    raise AssertionError(f"port {port} still accepts connections {timeout} s after the signal")


def _workers_with_open(
    pid: int, db: Path, count: int, timeout: float = 30.0
) -> list[psutil.Process]:
    """The ``count`` worker processes of ``pid`` once each has ``db`` open (started serving)."""
    deadline = time.monotonic() + timeout
    while True:
        workers = [c for c in psutil.Process(pid).children(recursive=True)
                   if "spawn_main" in " ".join(c.cmdline())]  # not multiprocessing's tracker
        ready = [w for w in workers if str(db) in {f.path for f in w.open_files()}]
        if len(ready) >= count:
            return ready
        assert time.monotonic() < deadline, f"{len(ready)} of {count} workers after {timeout}s"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_request_in_flight_finishes_across_a_signal_and_the_database_closes_cleanly(
    tmp_path: Path, sig: signal.Signals
) -> None:
    db = tmp_path / "s.db"
    body = b'{"payload": {"sent": "across the signal"}}'
    with ThreadPoolExecutor(1) as pool, serve(db) as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for name in ("q", "empty"):
                assert http.post("/queues", json={"name": name}).status_code == 201
        waiting = _poll_in_background(pool, server.url, "empty")
        slow = _slow_enqueue(server.port, body)
        time.sleep(0.3)  # both requests are running now
        server.proc.send_signal(sig)
        answer = waiting.result(timeout=STOP_S)
        assert answer.status_code == 200 and answer.json() == {"messages": []}
        # Stops accepting (within uvicorn's 0.1 s tick) but still serves the request in flight:
        _wait_until_refused(server.port)
        assert server.proc.poll() is None
        with slow:
            slow.sendall(body[10:])
            got = read_response(slow)
        assert got.status == 201, got
        assert got.headers.get("connection") == "close"
        assert server.proc.wait(STOP_S) == 0
        assert "Traceback" not in server.stderr()
    # Closed cleanly: SQLite removes the WAL when the last connection closes normally.
    assert not (tmp_path / "s.db-wal").exists()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT payload FROM messages").fetchall() == [
            ('{"sent": "across the signal"}',)]
    finally:
        conn.close()


def test_a_request_cut_off_by_the_graceful_timeout(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    body = b'{"payload": "never finished"}'
    with serve(db, env={"SQEW_GRACEFUL_TIMEOUT_S": "1"}) as server:
        httpx.post(f"{server.url}/queues", json={"name": "q"}, timeout=30)
        with _slow_enqueue(server.port, body) as slow:
            time.sleep(0.3)
            signalled = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            got = read_response(slow, timeout=STOP_S)
            assert server.proc.wait(STOP_S) == 0
            assert time.monotonic() - signalled < STOP_S / 2  # ~1 s, not the default 10 s
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)
    finally:
        conn.close()
    # SPEC's envelope (not uvicorn's text/plain 500), and the connection ends with it.
    assert got.status == 503, got
    assert got.headers["content-type"].startswith("application/json"), got
    assert got.headers.get("connection") == "close"
    error = json.loads(got.body)["error"]
    assert set(error) == {"code", "message"} and error["code"] == "Unavailable", got.body
    assert got.closed and got.rest == b""


def test_sigint_ends_waiting_polls_on_two_workers(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    # (The pool is left last: a failing test kills the server first, ending the polls.)
    with ThreadPoolExecutor(6) as pool, serve(db, "--workers", "2") as server:
        workers = _workers_with_open(server.proc.pid, db, 2)  # both serve the same file
        httpx.post(f"{server.url}/queues", json={"name": "q"}, timeout=30)
        waiting = [_poll_in_background(pool, server.url, "q") for _ in range(6)]
        time.sleep(0.5)
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        answers = [w.result(timeout=STOP_S) for w in waiting]
        assert [(a.status_code, a.json()) for a in answers] == [(200, {"messages": []})] * 6
        assert time.monotonic() - signalled < WAIT_MS / 1000 / 4
        assert server.proc.wait(STOP_S) == 0
        assert "Traceback" not in server.stderr()
        gone = psutil.wait_procs(workers, timeout=STOP_S)[1]
        assert not [w for w in gone if w.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("content", [
    b"\x00garbage\xff" * 500,
    b"SQLite format 3\x00" + b"\x00" * 84,  # a header and nothing else
], ids=["garbage", "truncated"])
def test_a_file_that_is_not_a_database_is_refused_untouched(
    tmp_path: Path, content: bytes
) -> None:
    db = tmp_path / "not.db"
    db.write_bytes(content)
    before = hashlib.sha256(content).hexdigest()
    result = subprocess.run([str(SQEW_BIN), "serve", "--db", str(db), "--port", "0"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result.stderr
    assert result.stdout == ""  # never announced
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not.db"]  # no -wal/-shm/journal


def test_a_database_in_a_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "x.db"
    result = subprocess.run([str(SQEW_BIN), "serve", "--db", str(db), "--port", "0"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result.stderr
    assert not db.parent.exists()
