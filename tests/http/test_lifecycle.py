"""``sqew serve`` as a real subprocess: announce, serve, stop gracefully on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx
import psutil
import pytest

import sqew

STOP_S = 15


def sqew_binary() -> str:
    """The ``sqew`` of the virtualenv running the tests (not whichever is first on PATH)."""
    here = Path(sys.executable).parent / "sqew"
    return str(here) if here.exists() else shutil.which("sqew") or "sqew"


class Served:
    """A running ``sqew serve`` process and its URL."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc = proc
        self.url = url


@contextmanager
def serve(db: Path, *args: str) -> Iterator[Served]:
    """Start ``sqew serve --db db --port 0 *args``; always stopped (by PID) afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    proc = subprocess.Popen(
        [sqew_binary(), "serve", "--db", str(db), "--port", "0", *args], cwd=db.parent,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        line: list[str] = []
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert line and line[0].startswith("sqew serving on http://127.0.0.1:"), line
        yield Served(proc, line[0].split("serving on ", 1)[1].split()[0])
    finally:
        family = []
        with suppress(psutil.NoSuchProcess):
            family = psutil.Process(proc.pid).children(recursive=True)
        if proc.poll() is None:
            proc.kill()
        for child in family:
            with suppress(psutil.NoSuchProcess):
                child.kill()
        proc.wait(STOP_S)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


PRODUCERS = 3


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_long_polls_lets_requests_finish_and_closes_the_database(
    tmp_path: Path, sig: signal.Signals
) -> None:
    db = tmp_path / "s.db"
    with serve(db) as server, httpx.Client(base_url=server.url, timeout=30) as http:
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
            time.sleep(0.3)  # the poll is waiting by now
            started = time.monotonic()
            server.proc.send_signal(sig)
            answer = waiting.result(timeout=STOP_S)
            assert answer.status_code == 200 and answer.json() == {"messages": []}
            assert time.monotonic() - started < 5  # not the 20 s of its wait
            assert server.proc.wait(STOP_S) == 0
            stop.set()
            outcomes = [f.result(timeout=STOP_S) for f in producers]
        assert "Traceback" not in (server.proc.stderr.read() if server.proc.stderr else "")
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


def test_two_workers_share_one_file_and_stop_together(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with serve(db, "--workers", "2") as server:
        workers = psutil.Process(server.proc.pid).children(recursive=True)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            http.post("/queues", json={"name": "q"})

        def produce(start: int) -> None:
            with httpx.Client(base_url=server.url, timeout=30) as c:
                for i in range(start, start + 100):
                    assert c.post("/queues/q/messages", json={"payload": i}).status_code == 201

        with ThreadPoolExecutor(5) as pool:
            list(pool.map(produce, range(0, 500, 100)))
        seen: list[int] = []
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for _ in range(200):
                got = http.post("/queues/q/poll", params={"batch": 10}).json()["messages"]
                if not got:
                    break
                seen += [m["payload"] for m in got]
                acks = {"acks": [{"id": m["id"], "token": m["token"]} for m in got]}
                assert all(r["status"] == "acked"
                           for r in http.post("/queues/q/ack", json=acks).json()["results"])
        assert sorted(seen) == list(range(500))
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(STOP_S) == 0
        time.sleep(0.2)
        assert not [w for w in workers if w.is_running() and w.status() != "zombie"]


def test_a_port_in_use_and_a_bad_database_are_one_line_errors(tmp_path: Path) -> None:
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        for args in (["--db", str(tmp_path / "x.db"), "--port", str(port)],
                     ["--db", str(tmp_path), "--port", "0"]):
            result = subprocess.run([sqew_binary(), "serve", *args], capture_output=True,
                                    text=True, timeout=30, check=False)
            assert result.returncode == 1, result
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result
            assert "Traceback" not in result.stderr
    finally:
        busy.close()
