"""A key revoked through one worker of ``sqew serve --workers 2`` stops working in both within
a second.

The test holds one keep-alive connection to each worker (which worker accepted a connection is
read from outside with psutil, as in ``test_workers.py``), uses the key on both so that both
have it cached, revokes it through one, and then: that worker refuses it at once, and from one
second after the revocation was answered, so does the other (each re-reads a cached key's row
once it is a second old; nothing else tells it).
"""

from __future__ import annotations

import contextlib
import http.client
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from auth_support import bearer, mint

from sqew.server.authenticator import CONFIRM_S

from .support import port_of, serve

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="SO_REUSEPORT balances connections on Linux only")


def _get(conn: http.client.HTTPConnection, path: str, key: str) -> int:
    conn.request("GET", path, headers=bearer(key))
    response = conn.getresponse()
    response.read()
    return response.status


def _owner(server_pid: int, port: int, conn: http.client.HTTPConnection) -> int | None:
    """The pid of the worker holding ``conn``'s server side."""
    assert conn.sock is not None
    ours = conn.sock.getsockname()[1]
    for child in psutil.Process(server_pid).children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            for c in child.net_connections(kind="tcp"):
                if c.laddr and c.laddr.port == port and c.raddr and c.raddr.port == ours:
                    return child.pid
    return None


@contextlib.contextmanager
def one_connection_per_worker(
    server_pid: int, url: str, key: str, workers: int = 2
) -> Iterator[dict[int, http.client.HTTPConnection]]:
    """A keep-alive connection to each worker (worker pid -> connection), each having used
    ``key`` once."""
    port = port_of(url)
    held: dict[int, http.client.HTTPConnection] = {}
    deadline = time.monotonic() + 30
    try:
        while len(held) < workers:
            assert time.monotonic() < deadline, f"connections reached {len(held)} worker(s)"
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            assert _get(conn, "/queues", key) == 200
            pid = _owner(server_pid, port, conn)
            if pid is None or pid in held:
                conn.close()
            else:
                held[pid] = conn
        yield held
    finally:
        for conn in held.values():
            conn.close()


def test_a_revoked_key_stops_working_on_every_worker_within_a_second(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    admin = mint(db, "admin").key
    victim = mint(db, "consume")
    with serve(db, "--workers", "2") as served, \
            one_connection_per_worker(served.proc.pid, served.url, victim.key) as conns:
        via, other = conns.values()
        via.request("DELETE", f"/keys/{victim.id}", headers=bearer(admin))
        revoked = via.getresponse()
        assert revoked.status == 204, revoked.read()
        revoked.read()
        answered = time.monotonic()
        assert _get(via, "/queues", victim.key) == 401  # the worker that revoked it: at once
        assert _get(via, "/queues", admin) == 200
        # The other worker may still take it, until its cached copy is a second old.
        while time.monotonic() < answered + CONFIRM_S:
            if _get(other, "/queues", victim.key) == 401:
                break
            time.sleep(0.01)
        else:
            assert _get(other, "/queues", victim.key) == 401, "still accepted after 1 s"
        for conn in conns.values():  # and from then on, on both, for good
            assert _get(conn, "/queues", victim.key) == 401
            assert _get(conn, "/queues", admin) == 200
