"""``sqew serve`` as a real subprocess: how it stops, and how it refuses to start.

- a signal (SIGTERM, SIGINT) ends waiting polls at once, lets requests finish — producers
  under load see no error, a request *in flight* across the signal finishes and is committed
  while new connections are refused — and closes the database cleanly;
- a request cut off by the graceful timeout gets the envelope's 503;
- a port in use, a directory, a file that is not a database, a missing directory: a one-line
  error, and the file untouched.

Worker processes (``--workers``) are in ``test_workers.py``.
"""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cli_runs
import httpx
import pytest

import sqew

from .support import (
    LOG_WAITS,
    STOP_S,
    poll_in_background,
    read_response,
    request_head,
    serve,
    until_read_by_server,
)


def _slow_enqueue(port: int, body: bytes) -> socket.socket:
    """Start an enqueue whose body is only half sent, and return once the server has read
    what was sent (the request is in flight); the caller sends the rest."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(request_head("POST", "/queues/q/messages", length=len(body)) + body[:10])
    until_read_by_server(sock)
    return sock


def _wait_until_refused(port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=timeout).close()
        except ConnectionRefusedError:
            return
        time.sleep(0.02)
    raise AssertionError(f"port {port} still accepts connections {timeout} s after the signal")


# --- stopping ---------------------------------------------------------------------------------
PRODUCERS = 3


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_long_polls_lets_requests_finish_and_closes_the_database(
    tmp_path: Path, sig: signal.Signals
) -> None:
    db = tmp_path / "s.db"
    with serve(db, env=LOG_WAITS) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        http.post("/queues", json={"name": "q"})
        http.post("/queues/q/messages", json={"messages": [{"payload": i} for i in range(100)]})
        http.post("/queues", json={"name": "empty"})
        stop = threading.Event()
        running = threading.Barrier(PRODUCERS + 1)

        def produce() -> tuple[int, list[int]]:
            # Enqueue until the server stops answering; count the 201s, keep other statuses.
            created, odd = 0, []
            with httpx.Client(base_url=server.url, timeout=30) as c:
                for i in range(100_000):
                    if i == 1:
                        running.wait(10)
                    if stop.is_set():
                        break
                    try:
                        status = c.post("/queues/q/messages", json={"payload": "more"}).status_code
                    except httpx.TransportError:
                        break  # refused or closed: the server has stopped serving
                    if status == 201:
                        created += 1
                    else:
                        odd.append(status)
            return created, odd

        with ThreadPoolExecutor(PRODUCERS + 1) as pool:
            waiting = pool.submit(
                lambda: httpx.post(f"{server.url}/queues/empty/poll",
                                   params={"wait_ms": 20000}, timeout=30)
            )
            producers = [pool.submit(produce) for _ in range(PRODUCERS)]
            running.wait(10)  # every producer has had an answer and is sending more
            server.until_parked("empty", 1)
            server.proc.send_signal(sig)
            # Ended by the signal: a poll left waiting would be cut off by the graceful timeout
            # (10 s, shorter than its wait) and answer 503 instead.
            answer = waiting.result(timeout=STOP_S)
            assert answer.status_code == 200 and answer.json() == {"messages": []}
            assert server.proc.wait(STOP_S) == 0
            stop.set()
            outcomes = [f.result(timeout=STOP_S) for f in producers]
        assert "Traceback" not in server.stderr()
    assert [odd for _, odd in outcomes] == [[]] * PRODUCERS  # no 5xx (or anything else)
    created = sum(n for n, _ in outcomes)
    assert created > 0
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with sqew.Client(db) as client:
        # Every answered enqueue is there; each producer may have had one more in flight when
        # its connection closed (written, its answer lost).
        ready = client.stats("q").ready
        assert 100 + created <= ready <= 100 + created + PRODUCERS


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_request_in_flight_finishes_across_a_signal_and_the_database_closes_cleanly(
    tmp_path: Path, sig: signal.Signals
) -> None:
    db = tmp_path / "s.db"
    body = b'{"payload": {"sent": "across the signal"}}'
    with ThreadPoolExecutor(1) as pool, serve(db, env=LOG_WAITS) as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for name in ("q", "empty"):
                assert http.post("/queues", json={"name": name}).status_code == 201
        waiting = poll_in_background(pool, server.url, "empty")
        slow = _slow_enqueue(server.port, body)
        server.until_parked("empty", 1)  # both requests are running now
        server.proc.send_signal(sig)
        # Ended by the signal (one left waiting would be cut off by the graceful timeout: 503).
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
    with serve(db, env={"SQEW_GRACEFUL_TIMEOUT_S": "1", "SQEW_LOG_FORMAT": "json"}) as server:
        httpx.post(f"{server.url}/queues", json={"name": "q"}, timeout=30)
        with _slow_enqueue(server.port, body) as slow:
            server.proc.send_signal(signal.SIGTERM)
            got = read_response(slow, timeout=STOP_S)
            assert server.proc.wait(STOP_S) == 0
        logged = [json.loads(line) for line in server.stderr().splitlines()]
        begun = [r for r in logged if r.get("event") == "shutdown_begun"]
        assert [r["graceful_timeout_s"] for r in begun] == [1]  # the setting, not the default
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone() == (0,)
    finally:
        conn.close()
    # the error envelope (not uvicorn's text/plain 500), and the connection ends with it.
    assert got.status == 503, got
    assert got.headers["content-type"].startswith("application/json"), got
    assert got.headers.get("connection") == "close"
    error = json.loads(got.body)["error"]
    assert set(error) == {"code", "message"} and error["code"] == "Unavailable", got.body
    assert got.closed and got.rest == b""


# --- refusing to start -------------------------------------------------------------------------
def test_a_port_in_use_and_a_bad_database_are_one_line_errors(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        for args in (["--db", str(tmp_path / "x.db"), "--port", str(port)],
                     ["--db", str(tmp_path), "--port", "0"]):
            result = cli_runs.completed(["serve", *args], cwd=tmp_path)
            assert result.returncode == 1, result
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result
            assert "Traceback" not in result.stderr
    finally:
        busy.close()


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
    result = cli_runs.completed(["serve", "--db", str(db), "--port", "0"], cwd=tmp_path)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result.stderr
    assert result.stdout == ""  # never announced
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not.db"]  # no -wal/-shm/journal


def test_a_database_in_a_missing_directory_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "x.db"
    result = cli_runs.completed(["serve", "--db", str(db), "--port", "0"], cwd=tmp_path)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result.stderr
    assert not db.parent.exists()
