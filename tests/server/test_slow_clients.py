"""Limits that hold against slow and idle clients, on a real ``sqew serve`` (127.0.0.1).

Headers that never complete (sent partly, or a byte at a time), a body that trickles or a chunked
body that never ends, and connections that send nothing are cut off by the server's timeouts
(``header_timeout_s``, ``body_timeout_s``, ``keep_alive_timeout_s``; set to 1 s here so the
tests take seconds). Many idle connections cannot keep a new client out: beyond
``max_connections`` the one idle longest is closed to make room, and the process's file
descriptors stay bounded. Long polls per process are bounded by ``max_waiting_polls``.

Every wait is bounded: a test that the server would fail (by never closing) fails on a deadline
far beyond the timeout it checks, never by measuring how long something took.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from sqew import Client

from .support import LOG_WAITS, Served, envelope, poll_in_background, read_response, serve

SHORT = {"SQEW_HEADER_TIMEOUT_S": "1", "SQEW_BODY_TIMEOUT_S": "1",
         "SQEW_KEEP_ALIVE_TIMEOUT_S": "1"}
LONG = {"SQEW_HEADER_TIMEOUT_S": "600", "SQEW_BODY_TIMEOUT_S": "600",
        "SQEW_KEEP_ALIVE_TIMEOUT_S": "600"}
CLOSE_S = 20
"""How long a test waits for the server to close a connection (timeouts here are 1 s)."""


def _with_queue(server: Served, name: str = "q") -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.post("/queues", json={"name": name}).status_code == 201


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A server whose header, body and keep-alive timeouts are 1 s, with a queue ``q``."""
    with serve(tmp_path_factory.mktemp("slow") / "s.db", env=SHORT) as server:
        _with_queue(server)
        yield server


def _connect(server: Served) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def _until_closed(sock: socket.socket, timeout: float = CLOSE_S) -> bytes:
    """Everything the server sends until it closes ``sock``; fails if it is still open after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while True:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise AssertionError(f"still open after {timeout} s; got {data!r}") from None
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def _drip(sock: socket.socket, data: bytes, every_s: float = 0.1) -> int:
    """Send ``data`` a byte at a time, one each ``every_s`` seconds, until the server answers
    or closes; returns how many bytes were sent."""
    for sent in range(len(data)):
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable:
            return sent
        try:
            sock.sendall(data[sent:sent + 1])
        except OSError:  # closed under us
            return sent
    return len(data)


def _timed_out(raw: bytes, what: str) -> None:
    """``raw`` is a 408 with the error envelope, closing the connection."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 408 Request Timeout", raw
    headers = {k.strip().lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
    assert headers["connection"] == "close" and headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert set(error) == {"code", "message"} and error["code"] == "InvalidRequest", error
    assert what in error["message"], error


def _healthy(server: Served) -> None:
    assert httpx.get(f"{server.url}/healthz", timeout=10).json() == {"status": "ok"}


# --- timeouts ------------------------------------------------------------------------------------
def test_a_connection_that_sends_nothing_is_closed(short: Served) -> None:
    with _connect(short) as sock:
        assert _until_closed(sock) == b""  # nothing was asked: nothing is answered
    _healthy(short)


def test_partial_headers_get_408_and_the_connection_is_closed(short: Served) -> None:
    with _connect(short) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\nAccept: appl")
        _timed_out(_until_closed(sock), "headers did not arrive within 1 s")
    _healthy(short)


def test_headers_sent_a_byte_at_a_time_are_cut_off_at_the_header_timeout(short: Served) -> None:
    request = (b"GET /healthz HTTP/1.1\r\nHost: test\r\n" + b"X-Pad: " + b"a" * 500 + b"\r\n\r\n")
    with _connect(short) as sock:
        sent = _drip(sock, request)  # a byte each 0.1 s: ~55 s for all of it
        assert sent < len(request)
        _timed_out(_until_closed(sock), "headers did not arrive within 1 s")
    _healthy(short)


def test_the_header_timeout_runs_again_after_a_response(short: Served) -> None:
    with _connect(short) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        assert read_response(sock, timeout=10).status == 200  # (closed 1 s later, idle)
    with _connect(short) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\nGET /heal")
        got = _until_closed(sock)
        first, _, rest = got.partition(b'{"status":"ok"}')
        assert first.startswith(b"HTTP/1.1 200 OK"), got
        _timed_out(rest, "headers did not arrive within 1 s")


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "content-length"])
def test_a_body_that_trickles_is_cut_off_at_the_body_timeout_with_408(
    short: Served, chunked: bool
) -> None:
    head = "POST /queues/q/messages HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else "Content-Length: 100000\r\n\r\n"
    with _connect(short) as sock:
        sock.sendall(head.encode())
        piece = b"1\r\n \r\n" if chunked else b" "  # a chunk, never the last one
        for _ in range(600):  # one each 0.1 s: 60 s at most
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                break
            sock.sendall(piece)
        else:
            raise AssertionError("the body was still being read after 60 s")
        _timed_out(_until_closed(sock), "body did not arrive within 1 s of its headers")
    # Nothing was enqueued, and the server serves on.
    with httpx.Client(base_url=short.url, timeout=10) as http:
        assert http.get("/queues/q/stats").json()["enqueued_total"] == 0


def test_an_idle_keep_alive_connection_is_closed(short: Served) -> None:
    with _connect(short) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        got = _until_closed(sock)
    assert got.startswith(b"HTTP/1.1 200 OK") and got.endswith(b'{"status":"ok"}'), got


def test_a_long_poll_is_not_cut_off_by_the_timeouts(short: Served) -> None:
    # 3 s of waiting (three times every timeout): the request is with the app, not the client.
    with _connect(short) as sock:
        sock.sendall(b"POST /queues/q/poll?wait_ms=3000 HTTP/1.1\r\nHost: test\r\n"
                     b"Content-Length: 0\r\n\r\n")
        got = read_response(sock, timeout=20)
    assert got.status == 200 and json.loads(got.body) == {"messages": []}


# --- header bytes --------------------------------------------------------------------------------
@pytest.mark.parametrize("complete", [True, False], ids=["complete", "unfinished"])
def test_headers_over_max_header_bytes_get_431(short: Served, complete: bool) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: test\r\nX-Big: " + b"a" * 40_000 + b"\r\n"
    with _connect(short) as sock:
        sock.sendall(head + (b"\r\n" if complete else b""))
        got = read_response(sock)
    assert got.status == 431 and got.closed and got.headers["connection"] == "close"
    error = json.loads(got.body)["error"]
    assert error == {"code": "InvalidRequest",
                     "message": "the request line and headers are longer than 32768 bytes"}


def test_headers_under_max_header_bytes_are_served(short: Served) -> None:
    response = httpx.get(f"{short.url}/healthz", headers={"x-big": "a" * 30_000}, timeout=10)
    assert response.status_code == 200


# --- connections ---------------------------------------------------------------------------------
def _fds(server: Served) -> int:
    return psutil.Process(server.proc.pid).num_fds()


def _connections(server: Served) -> int:
    """The server's open TCP connections (its listening socket aside)."""
    return sum(c.status == psutil.CONN_ESTABLISHED
               for c in psutil.Process(server.proc.pid).net_connections("tcp"))


def _healthz_on(sock: socket.socket) -> None:
    """Ask /healthz on ``sock`` and read the answer (the connection stays open)."""
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
    data = b""
    while not data.endswith(b'{"status":"ok"}'):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk


def test_idle_connections_beyond_max_connections_make_room_for_new_ones(tmp_path: Path) -> None:
    env = {**LONG, "SQEW_MAX_CONNECTIONS": "50"}
    with serve(tmp_path / "c.db", env=env) as server, contextlib.ExitStack() as stack:
        _healthy(server)
        baseline = _fds(server)
        socks = []
        for i in range(300):  # idle from the start, after a request, and with partial headers
            sock = stack.enter_context(_connect(server))
            if i % 3 == 1:
                _healthz_on(sock)
            elif i % 3 == 2:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: te")
            socks.append(sock)
        # /healthz answers on a new connection, and the process holds at most 50 connections
        # (its database threads may open a few files meanwhile).
        _healthy(server)
        deadline = time.monotonic() + CLOSE_S
        while _connections(server) > 50:
            assert time.monotonic() < deadline, _connections(server)
            time.sleep(0.05)
        assert _fds(server) <= baseline + 50 + 20, (_fds(server), baseline)
        # The connections idle the longest were closed; the newest is served.
        assert _until_closed(socks[0]) == b""
        socks[-1].sendall(b"st\r\n\r\n")
        assert read_response(socks[-1]).status == 200


def test_when_every_connection_is_busy_a_new_one_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "busy.db"
    env = {**LONG, **LOG_WAITS, "SQEW_MAX_CONNECTIONS": "5"}
    with serve(db, env=env) as server, ThreadPoolExecutor(5) as pool:
        _with_queue(server)
        polls = [poll_in_background(pool, server.url, "q") for _ in range(5)]
        server.until_parked("q", 5)
        with pytest.raises(httpx.TransportError):  # closed at once: nobody is idle
            httpx.get(f"{server.url}/healthz", timeout=10)
        with Client(str(db)) as local:  # another process's write wakes the polls
            local.enqueue_batch("q", [{"payload": i} for i in range(5)])
        answers = [p.result(timeout=30) for p in polls]
        assert [len(a.json()["messages"]) for a in answers] == [1] * 5  # none was evicted
        _healthy(server)


# --- long polls ----------------------------------------------------------------------------------
def test_long_polls_beyond_max_waiting_polls_get_503_overloaded(tmp_path: Path) -> None:
    env = {**LOG_WAITS, "SQEW_MAX_WAITING_POLLS": "2"}
    with serve(tmp_path / "p.db", env=env) as server, ThreadPoolExecutor(2) as pool, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        _with_queue(server)
        polls = [poll_in_background(pool, server.url, "q") for _ in range(2)]
        server.until_parked("q", 2)
        third = http.post("/queues/q/poll", params={"wait_ms": 20_000})
        error = envelope(third, 503, "Overloaded")
        assert "max_waiting_polls" in error["message"]
        assert third.headers["retry-after"] == "1"
        # A poll that does not wait is served, and so are the waiting ones.
        assert http.post("/queues/q/poll").json() == {"messages": []}
        for payload in (1, 2):
            assert http.post("/queues/q/messages", json={"payload": payload}).status_code == 201
        got = sorted(p.result(timeout=30).json()["messages"][0]["payload"] for p in polls)
        assert got == [1, 2]
        # With the waiting polls gone, a long poll is taken again.
        assert http.post("/queues/q/poll", params={"wait_ms": 50}).json() == {"messages": []}
