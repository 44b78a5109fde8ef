"""Helpers for the server tests: the error envelope, raw HTTP on a socket, ``sqew serve``.

Everything here is bounded: sockets have timeouts, subprocesses are stopped by PID (their
worker children too) however the test ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import cli_runs
import httpx
import psutil

SQEW_BIN = Path(sys.executable).with_name("sqew")
START_S = 30
STOP_S = 15
LOG_WAITS = {"SQEW_LOG_LEVEL": "debug"}
"""``serve(..., env=LOG_WAITS)``: the server logs each long poll that starts and stops waiting
(``Served.until_parked`` reads them)."""


def envelope(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Check ``response`` is exactly the error envelope (docs/rest.md) with ``status`` and ``code``.

    Returns:
        The ``error`` object.
    """
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"code", "message"} <= set(error) <= {"code", "message", "details"}, body
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["message"], body
    if "details" in error:
        assert isinstance(error["details"], list), body
    assert "Traceback" not in response.text
    return dict(error)


def port_of(url: str) -> int:
    """The port of ``http(s)://host:port``."""
    return int(url.rsplit(":", 1)[1].rstrip("/"))


@dataclass
class RawResponse:
    """A response read off a socket: status, lower-case headers, body, and what followed."""

    status: int
    headers: dict[str, str]
    body: bytes
    rest: bytes
    closed: bool


def read_response(sock: socket.socket, timeout: float = 10.0) -> RawResponse:
    """Read one HTTP/1.1 response with a Content-Length from ``sock``, then whatever else
    arrives before the server closes or goes quiet for 0.5 s (bounded by ``timeout``)."""
    deadline = time.monotonic() + timeout
    data, closed = b"", False
    while b"\r\n\r\n" not in data:
        chunk = _recv(sock, deadline)
        if not chunk:
            raise AssertionError(f"connection closed before a response: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = _recv(sock, deadline)
        if not chunk:
            raise AssertionError("connection closed inside a response body")
        rest += chunk
    body, rest = rest[:length], rest[length:]
    sock.settimeout(0.5)
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            rest += chunk
    return RawResponse(status, headers, body, rest, closed)


def _recv(sock: socket.socket, deadline: float) -> bytes:
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        return sock.recv(65536)
    except TimeoutError:
        raise AssertionError("no answer from the server in time") from None


def request_head(method: str, path: str, length: int | None = None) -> bytes:
    """The start of an HTTP/1.1 request (ends with the blank line; the body is up to you)."""
    head = f"{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
    if length is not None:
        head += f"Content-Length: {length}\r\n"
    return (head + "\r\n").encode()


def until_read_by_server(sock: socket.socket, timeout: float = 10.0) -> None:
    """Return once the server has read every byte sent so far on ``sock``: the server's side of
    the connection has an empty receive queue (``/proc/net/tcp``, Linux). A server reads a
    request's head and parses it in the same step, so from then on the request is in flight
    in the server; fail after ``timeout`` seconds."""
    ours, theirs = sock.getsockname(), sock.getpeername()
    local, remote = _proc_address(theirs), _proc_address(ours)
    deadline = time.monotonic() + timeout
    while True:
        queued = _receive_queue(local, remote)
        if queued == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the server left {queued} bytes unread after {timeout} s")
        time.sleep(0.005)


def _proc_address(address: tuple[str, int]) -> str:
    """``host:port`` as ``/proc/net/tcp`` writes it (IPv4: the address's bytes reversed)."""
    host, port = address
    return f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"


def _receive_queue(local: str, remote: str) -> int | None:
    """The receive queue of the TCP socket ``local`` -> ``remote`` (None: not there)."""
    with open("/proc/net/tcp") as table:
        for row in table.readlines()[1:]:
            fields = row.split()
            if fields[1] == local and fields[2] == remote:
                return int(fields[4].split(":")[1], 16)
    return None


def poll_in_background(
    pool: ThreadPoolExecutor, url: str, queue: str, wait_ms: int = 20_000
) -> Future[httpx.Response]:
    """Start a long poll of ``queue`` (its own connection) on ``pool``; its answer later."""
    return pool.submit(httpx.post, f"{url}/queues/{queue}/poll", params={"wait_ms": wait_ms},
                       timeout=wait_ms / 1000 + 15)


class Lines:
    """The lines of a stream (a server's or a command's stderr, text or bytes), read by a
    thread as they come.

    Reading as they come keeps a chatty server (``SQEW_LOG_LEVEL=debug``) from filling the pipe,
    and lets a test wait for a line: the observable moment something happened in the server.
    """

    def __init__(self, stream: IO[str] | IO[bytes]) -> None:
        self._stream = stream
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self._stream:
                text = line if isinstance(line, str) else line.decode(errors="replace")
                with self._changed:
                    self._lines.append(text)
                    self._changed.notify_all()
        except (OSError, ValueError):  # closed under us: the process is gone anyway
            pass
        finally:
            with self._changed:
                self._changed.notify_all()

    def until(self, predicate: Callable[[list[str]], bool], timeout: float) -> bool:
        """Block until ``predicate(lines so far)`` holds; False after ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._lines), timeout)

    def finish(self, timeout: float = STOP_S) -> bool:
        """Wait (bounded) for the end of the stream, and close it if it ended."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        self._stream.close()
        return True

    def text(self) -> str:
        """Everything read so far."""
        with self._changed:
            return "".join(self._lines)

    def rest(self, timeout: float = STOP_S) -> str:
        """Everything, once the stream has ended (the process exited); bounded."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the stream did not end"
        return self.text()


def parked(lines: Iterable[str], queue: str) -> int:
    """How many long polls of ``queue`` wait now, by the debug lines of ``sqew.waiter`` (a
    server's with ``SQEW_LOG_LEVEL=debug``, summed over its worker processes, or a command's
    stderr with ``SQEW_CLI_LOG_LEVEL=debug``)."""
    began = f"long poll waiting on queue {queue!r}"
    ended = f"long poll on queue {queue!r} stopped waiting"
    listed = list(lines)
    return sum(began in line for line in listed) - sum(ended in line for line in listed)


@dataclass
class Served:
    """A running ``sqew serve`` process, its URL, its database file and its stderr."""

    proc: subprocess.Popen[str]
    url: str
    db: Path | str
    log: Lines

    @property
    def port(self) -> int:
        return port_of(self.url)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait (bounded) for the exit status."""
        self.proc.send_signal(sig)
        return self.proc.wait(STOP_S)

    def stderr(self) -> str:
        """What the server wrote on stderr (after it exited)."""
        assert self.proc.poll() is not None
        self.log.finish()
        return self.log.text()

    def until_parked(self, queue: str, count: int, timeout: float = START_S) -> None:
        """Return once ``count`` long polls of ``queue`` wait in the server (started with
        ``SQEW_LOG_LEVEL=debug``); fail after ``timeout`` seconds."""
        if not self.log.until(lambda lines: parked(lines, queue) >= count, timeout):
            text = self.log.text()
            raise AssertionError(f"{parked(text.splitlines(), queue)} of {count} polls of "
                                 f"{queue!r} waiting after {timeout} s:\n{text[-3000:]}")


@contextlib.contextmanager
def serve(db: Path | str, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``sqew serve --db db --port 0 *args`` in a subprocess, up once it announces itself
    (``db``: a SQLite file, run from its directory, or a database URL).

    ``env`` adds variables (``SQEW_*`` of the test process are removed). The process and its
    workers are killed by PID at the end if still running.
    """
    argv = ["serve", "--db", str(db), "--port", "0", *args]
    cwd = db.parent if isinstance(db, Path) else None
    environ = cli_runs.environment(PYTHONFAULTHANDLER="1", **(env or {}))  # for _show_stacks
    # Forked by the fork server (a process of its own, without a second of imports), but for
    # prometheus-client's multiprocess mode (several workers), whose directory the library
    # reads at import.
    workers = int(args[args.index("--workers") + 1]) if "--workers" in args else 1
    proc = cli_runs.start(argv, cwd=cwd, env=environ,
                          binary=workers > 1 or "PROMETHEUS_MULTIPROC_DIR" in environ)
    assert proc.stderr is not None
    log = Lines(proc.stderr)
    try:
        line = _first_line(proc, log)
        assert line.startswith(("sqew serving on http://127.0.0.1:",
                                "sqew serving on https://127.0.0.1:")), line
        yield Served(proc, line.split("serving on ", 1)[1].split()[0], db, log)
    except BaseException:
        _show_stacks(proc, log)
        raise
    finally:
        _kill_tree(proc, log)


def _first_line(proc: subprocess.Popen[str], log: Lines) -> str:
    got: list[str] = []
    stdout = proc.stdout
    assert stdout is not None
    reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_S)
    if not got or not got[0]:
        _kill_tree(proc, log, close=False)
        raise AssertionError(f"sqew serve did not announce itself: {log.text()}")
    return got[0].strip()


def _show_stacks(proc: subprocess.Popen[str], log: Lines) -> None:
    """A test failed with the server up: print (for pytest's report) where each of its
    processes is, by SIGABRT (``PYTHONFAULTHANDLER`` writes every thread's stack to stderr),
    and the end of its stderr. A server that hangs on the way out shows where."""
    with contextlib.suppress(psutil.NoSuchProcess):
        for each in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
            with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                os.kill(each.pid, signal.SIGABRT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)
    log.finish(5)
    print(f"--- the server's stderr, ending with its stacks ---\n{log.text()[-20_000:]}")


def _kill_tree(proc: subprocess.Popen[str], log: Lines, *, close: bool = True) -> None:
    children: list[psutil.Process] = []
    with contextlib.suppress(psutil.NoSuchProcess):
        children = psutil.Process(proc.pid).children(recursive=True)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(STOP_S)
    log.finish()  # every writer is gone: the reader sees the end and the stream is closed
    if close and proc.stdout is not None:
        proc.stdout.close()
