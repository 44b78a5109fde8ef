"""A poll whose client has gone leases nothing (docs/rest.md), on a real ``sqew serve``.

Clients send ``POST /queues/q/poll`` and leave: with a FIN (``close()``) or a RST (``SO_LINGER``
0), with ``wait_ms`` 0 and 5000, many times over, on SQLite and PostgreSQL. The queue has
``max_attempts`` 1 and 1 s leases, so a message leased to a client that left would be
dead-lettered without ever being delivered: every message must stay ready, no attempt counted.

The server can only act on a departure it has seen: one that reaches it after the claim
committed is too late (the lease then ends, and the message is delivered again, as any lease
a consumer drops). So the tests show the server the departure at a chosen moment:

- with the request: the server process is stopped (``SIGSTOP``) while the client sends its
  request and leaves, and continued: it reads both at once;
- while the poll's write waits: another connection holds the database's write lock (SQLite:
  the file's, so the group commit waits to begin; PostgreSQL: a lock on ``messages``, so the
  claim's statement waits inside the group's transaction) while the client leaves; the server
  must find the caller gone before its group commits.

The server has noticed a departure once it closed its end of the connection (its descriptor
for the socket is gone, ``until_closed_by``); a poll was handled once the server counted its
answer (``sqew_http_requests_total``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from metrics_support import parse, value

from .support import Served, read_response, serve, until_read_by_server

ROUNDS = 20
QUEUE = {"name": "q", "max_attempts": 1, "visibility_ms": 1000}
WAIT_S = 20
"""The most any wait here takes (every one is for an event that comes in milliseconds)."""


def _poll(wait_ms: int) -> bytes:
    return (f"POST /queues/q/poll?wait_ms={wait_ms} HTTP/1.1\r\nHost: test\r\n"
            "Content-Length: 0\r\n\r\n").encode()


def _leave(sock: socket.socket, how: str) -> None:
    """Close ``sock``: a FIN, or a RST (``SO_LINGER`` on with a zero timeout)."""
    if how == "rst":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _proc_address(address: tuple[str, int]) -> str:
    host, port = address
    return f"{socket.inet_aton(host)[::-1].hex().upper()}:{port:04X}"


def accepted_inode(sock: socket.socket) -> int:
    """The inode of the server's end of ``sock``'s connection, once the server accepted it
    (``/proc/net/tcp``: a connection still in the listen queue has none)."""
    local, remote = _proc_address(sock.getpeername()), _proc_address(sock.getsockname())
    deadline = time.monotonic() + WAIT_S
    while True:
        with open("/proc/net/tcp") as table:
            for row in table.readlines()[1:]:
                fields = row.split()
                if fields[1] == local and fields[2] == remote and fields[9] != "0":
                    return int(fields[9])
        assert time.monotonic() < deadline, "the server did not accept the connection"
        time.sleep(0.002)


def until_closed_by(pid: int, inode: int) -> None:
    """Return once process ``pid`` holds no descriptor of socket ``inode`` (it noticed the
    client leave and closed its end)."""
    wanted = f"socket:[{inode}]"
    deadline = time.monotonic() + WAIT_S
    while True:
        held = False
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted:
                    held = True
                    break
        if not held:
            return
        assert time.monotonic() < deadline, "the server kept the connection of a client gone"
        time.sleep(0.002)


def until_polls_answered(http: httpx.Client, count: int) -> None:
    """Return once the server has answered ``count`` polls (to clients gone or not)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        samples = parse(http.get("/metrics").text)
        done = value(samples, "sqew_http_requests_total", method="POST",
                     route="/queues/{q}/poll", status="200")
        if done >= count:
            return
        assert time.monotonic() < deadline, f"{done} of {count} polls answered"
        time.sleep(0.01)


def nothing_leased(http: httpx.Client, ready: int) -> None:
    """No message of ``q`` was ever leased: all ``ready``, none delivered or dead-lettered."""
    stats = http.get("/queues/q/stats").json()
    assert (stats["leased"], stats["dlq"], stats["ready"]) == (0, 0, ready), stats
    page = http.get("/queues/q/messages", params={"limit": 1000}).json()["messages"]
    assert [(m["state"], m["attempts"]) for m in page] == [("ready", 0)] * ready, page


def _queue(http: httpx.Client, messages: int) -> None:
    assert http.post("/queues", json=QUEUE).status_code == 201
    batch = {"messages": [{"payload": i} for i in range(messages)]}
    assert http.post("/queues/q/messages", json=batch).status_code == 201


@dataclass
class Server:
    """``sqew serve`` on one backend, and how to hold its writes back."""

    served: Served
    write_lock: Callable[[], contextlib.AbstractContextManager[None]]
    """Holds the database's write lock (another connection's) for a block."""
    until_write_waits: Callable[[], None]
    """Returns once a write of the server waits for that lock (where it can be seen)."""

    @property
    def url(self) -> str:
        return self.served.url

    @property
    def pid(self) -> int:
        return self.served.proc.pid

    @contextlib.contextmanager
    def still(self) -> Iterator[None]:
        """Keep the server process stopped for the block: what the block sends, it reads
        at once when it goes on."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)


@contextlib.contextmanager
def on_sqlite(tmp_path: Path) -> Iterator[Server]:
    """A server on a SQLite file: the lock is the file's (``BEGIN IMMEDIATE``), which the
    group commit waits for before its transaction begins (not seen from outside: a poll's
    write joins its group as the server reads the request)."""
    db = tmp_path / "d.db"

    @contextlib.contextmanager
    def write_lock() -> Iterator[None]:
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("ROLLBACK")
        finally:
            conn.close()

    with serve(db) as served:
        yield Server(served, write_lock, lambda: None)


@contextlib.contextmanager
def on_postgres(tmp_path: Path) -> Iterator[Server]:
    """A server on a fresh PostgreSQL database: the lock is on the ``messages`` table, which
    a claim's statement waits for inside its group's transaction (seen in ``pg_locks``)."""
    import pg_support
    import psycopg

    from sqew.backends.postgres import connection

    cluster = pg_support.cluster()
    name = cluster.new_database()
    url = cluster.url(name)
    info = connection.conninfo(url)
    try:
        with serve(url) as served, \
                contextlib.closing(psycopg.connect(info, autocommit=True)) as holder, \
                contextlib.closing(psycopg.connect(info, autocommit=True)) as watch:

            @contextlib.contextmanager
            def write_lock() -> Iterator[None]:
                holder.execute("BEGIN")
                try:
                    holder.execute("LOCK TABLE messages IN EXCLUSIVE MODE")  # reads go on
                    yield
                finally:
                    holder.execute("ROLLBACK")

            yield Server(served, write_lock,
                         lambda: pg_support.until_a_lock_wait(watch, "the claim"))
    finally:
        cluster.drop(name)


BACKENDS: dict[str, Callable[[Path], contextlib.AbstractContextManager[Server]]] = {
    "sqlite": on_sqlite, "postgres": on_postgres,
}
BACKEND = pytest.mark.parametrize(
    "backend", [pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)])


def _connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.served.port), timeout=10)


@BACKEND
@pytest.mark.parametrize("wait_ms", [0, 5000])
@pytest.mark.parametrize("how", ["fin", "rst"])
def test_a_poll_whose_client_left_leases_nothing(
    tmp_path: Path, backend: str, how: str, wait_ms: int
) -> None:
    with BACKENDS[backend](tmp_path) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        _queue(http, ROUNDS)
        for _ in range(ROUNDS):
            with _connect(server) as sock:
                inode = accepted_inode(sock)
                with server.still():
                    sock.sendall(_poll(wait_ms))
                    _leave(sock, how)
            until_closed_by(server.pid, inode)
        until_polls_answered(http, ROUNDS)
        nothing_leased(http, ROUNDS)


@BACKEND
@pytest.mark.parametrize("wait_ms", [0, 5000])
@pytest.mark.parametrize("how", ["fin", "rst"])
def test_a_poll_whose_client_left_while_its_write_waited_leases_nothing(
    tmp_path: Path, backend: str, how: str, wait_ms: int
) -> None:
    with BACKENDS[backend](tmp_path) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        _queue(http, ROUNDS)
        for _ in range(ROUNDS):
            with server.write_lock(), _connect(server) as sock:
                inode = accepted_inode(sock)
                sock.sendall(_poll(wait_ms))
                until_read_by_server(sock)
                server.until_write_waits()
                _leave(sock, how)
                until_closed_by(server.pid, inode)
        until_polls_answered(http, ROUNDS)
        nothing_leased(http, ROUNDS)


@BACKEND
def test_of_polls_sharing_a_write_the_one_whose_client_left_gives_its_message_back(
    tmp_path: Path, backend: str
) -> None:
    with BACKENDS[backend](tmp_path) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        _queue(http, 2)
        with _connect(server) as staying:
            with server.write_lock(), _connect(server) as leaving:
                inode = accepted_inode(leaving)
                leaving.sendall(_poll(0))
                staying.sendall(_poll(0))
                until_read_by_server(leaving)
                until_read_by_server(staying)
                server.until_write_waits()
                _leave(leaving, "fin")
                until_closed_by(server.pid, inode)
            got = read_response(staying)
        assert got.status == 200, got
        (message,) = json.loads(got.body)["messages"]
        assert message["attempts"] == 1
        stats = http.get("/queues/q/stats").json()
        assert (stats["leased"], stats["ready"], stats["dlq"]) == (1, 1, 0), stats
        page = http.get("/queues/q/messages").json()["messages"]
        assert sorted((m["state"], m["attempts"]) for m in page) == [("leased", 1), ("ready", 0)]
