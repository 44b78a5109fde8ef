"""``sqew serve --workers 2``: processes sharing one database file.

Every worker accepts on a listening socket of its own. On one shared socket, whichever worker
sat in ``accept`` took most connections; with a ``SO_REUSEPORT`` socket per worker the kernel
spreads them by hash. Checked from outside with psutil: which process holds which socket (no
debug endpoint, no header). The supervisor must hold no listening socket itself: the kernel
would route connections to it and they would hang.
A worker that dies is replaced; SIGTERM and SIGINT stop them all (waiting polls end at once);
a port another server's workers hold is refused. Many consumers across two workers are in
``test_concurrency.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from .support import LOG_WAITS, SQEW_BIN, STOP_S, poll_in_background, request_head, serve

linux_only = pytest.mark.skipif(sys.platform != "linux",
                                reason="SO_REUSEPORT balances connections on Linux only")
WAIT_MS = 20_000

CONNECTIONS = 32


def _tcp(proc: psutil.Process) -> list[Any]:
    """``proc``'s TCP sockets (psutil ≥ 6 renamed ``connections``)."""
    method = getattr(proc, "net_connections", None) or proc.connections
    return list(method(kind="tcp"))


def _listening(proc: psutil.Process, port: int) -> int:
    return sum(1 for c in _tcp(proc)
               if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port)


def _serving(proc: psutil.Process, port: int) -> int:
    """How many connections to ``port`` ``proc`` has accepted and holds open."""
    return sum(1 for c in _tcp(proc)
               if c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port)


def _workers(pid: int, port: int, count: int, timeout: float = 30.0) -> list[psutil.Process]:
    """The ``count`` worker processes of ``pid`` once each listens on ``port``."""
    deadline = time.monotonic() + timeout
    while True:
        workers = [c for c in psutil.Process(pid).children(recursive=True)
                   if "spawn_main" in " ".join(c.cmdline())]  # not multiprocessing's tracker
        with contextlib.suppress(psutil.NoSuchProcess):
            ready = [w for w in workers if _listening(w, port)]
            if len(ready) == count:
                return ready
        assert time.monotonic() < deadline, f"{len(workers)} workers, not {count}, listen"
        time.sleep(0.05)


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


@contextlib.contextmanager
def _keep_alive(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections, each with one answered GET /healthz, held open."""
    with contextlib.ExitStack() as stack:
        conns = [stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
                 for _ in range(count)]
        for conn in conns:
            conn.sendall(request_head("GET", "/healthz"))
        for conn in conns:
            assert _answer(conn).startswith(b"HTTP/1.1 200 "), conn
        yield conns  # (uvicorn closes idle keep-alives after 5 s: check them before)


def _answer(conn: socket.socket) -> bytes:
    """One response (with a Content-Length) off ``conn``, leaving the connection open."""
    data = b""
    while b"\r\n\r\n" not in data or len(data) < _length(data):
        chunk = conn.recv(65536)
        assert chunk, f"closed after {data!r}"
        data += chunk
    return data


def _length(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(head) + 4 + int(value)
    return len(head) + 4


def _check_balanced(server_pid: int, port: int) -> list[psutil.Process]:
    """Each of the 2 workers listens on a socket of its own and holds some of the
    connections; the supervisor listens on nothing."""
    workers = _workers(server_pid, port, 2)
    assert [_listening(w, port) for w in workers] == [1, 1]
    assert _listening(psutil.Process(server_pid), port) == 0
    held = [_serving(w, port) for w in workers]
    assert sum(held) == CONNECTIONS and min(held) > 0, held  # all on one: p = 2**-31
    return workers


def _stop(server: Any, workers: list[psutil.Process]) -> None:
    signalled = time.monotonic()
    assert server.stop(signal.SIGTERM) == 0
    assert time.monotonic() - signalled < STOP_S / 3  # the open keep-alives do not hold it up
    alive = psutil.wait_procs(workers, timeout=STOP_S)[1]
    assert not [w for w in alive if w.status() != psutil.STATUS_ZOMBIE]
    assert "Traceback" not in server.stderr()


# --- balancing and supervision ---------------------------------------------------------------
@linux_only
def test_both_workers_accept_connections_from_the_moment_of_the_announcement(
    tmp_path: Path,
) -> None:
    # The connections are made right after the line, before the workers run: they wait in
    # the backlogs, none is refused.
    with (serve(tmp_path / "w.db", "--workers", "2") as server,
          _keep_alive(server.port, CONNECTIONS)):
        workers = _check_balanced(server.proc.pid, server.port)
        _stop(server, workers)


@linux_only
def test_a_worker_that_dies_is_replaced_with_a_socket_of_its_own(tmp_path: Path) -> None:
    with serve(tmp_path / "w.db", "--workers", "2") as server:
        first = _workers(server.proc.pid, server.port, 2)
        first[0].kill()
        psutil.wait_procs([first[0]], timeout=STOP_S)
        # The dead worker's socket went with it (no connection waits on it); a new one listens.
        replaced = _workers(server.proc.pid, server.port, 2)
        assert first[0].pid not in {w.pid for w in replaced}
        with _keep_alive(server.port, CONNECTIONS):
            workers = _check_balanced(server.proc.pid, server.port)
            _stop(server, workers)


# --- stopping and refusing -------------------------------------------------------------------
def test_sigint_ends_waiting_polls_on_two_workers(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    # (The pool is left last: a failing test kills the server first, ending the polls.)
    with (ThreadPoolExecutor(6) as pool,
          serve(db, "--workers", "2", env=LOG_WAITS) as server):
        workers = _workers_with_open(server.proc.pid, db, 2)  # both serve the same file
        httpx.post(f"{server.url}/queues", json={"name": "q"}, timeout=30)
        waiting = [poll_in_background(pool, server.url, "q") for _ in range(6)]
        server.until_parked("q", 6)  # counted over both workers' log lines
        server.proc.send_signal(signal.SIGINT)
        # Ended by the signal: a poll left waiting would be cut off by the graceful timeout
        # (10 s, shorter than its 20 s wait) and answer 503 instead.
        answers = [w.result(timeout=STOP_S) for w in waiting]
        assert [(a.status_code, a.json()) for a in answers] == [(200, {"messages": []})] * 6
        assert server.proc.wait(STOP_S) == 0
        assert "Traceback" not in server.stderr()
        gone = psutil.wait_procs(workers, timeout=STOP_S)[1]
        assert not [w for w in gone if w.status() != psutil.STATUS_ZOMBIE]


@linux_only
def test_a_port_held_by_another_server_s_workers_is_a_one_line_error(tmp_path: Path) -> None:
    # The second server's own SO_REUSEPORT sockets could join the first one's group (same
    # user): a plain bind checks the port first.
    with serve(tmp_path / "a.db", "--workers", "2") as server:
        result = _run([str(SQEW_BIN), "serve", "--db", str(tmp_path / "b.db"), "--port",
                       str(server.port), "--workers", "2"])
        assert result.returncode == 1, result
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: Unavailable: "), result.stderr
        assert result.stdout == ""
        assert server.proc.poll() is None


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``args`` for at most 60 s; whatever it started is killed by PID if it runs on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQEW_")}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
        proc.kill()
        out, err = proc.communicate(timeout=STOP_S)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
