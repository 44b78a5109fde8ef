"""What the PostgreSQL scenarios measure besides the oracle, on hand-written input and real
sockets: the missed wake-ups counted from journals (``chaos.probes``), the judging of an HTTP
answer, and the fault proxy (``chaos.proxy``) against a real echo server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
from collections.abc import Iterator

import pytest

from chaos import probes
from chaos.journal import Record
from chaos.proxy import Proxy


def enqueued(msg: int, t1: float, queue: str = "q") -> Record:
    return {"op": "enqueue", "queue": queue, "key": f"k{msg}", "id": msg, "duplicate": False,
            "digest": "d", "t0": t1 - 0.01, "t1": t1}


def leased(msg: int, t0: float, queue: str = "q") -> Record:
    return {"op": "poll", "queue": queue, "wait_ms": 0, "t0": t0, "t1": t0 + 0.01,
            "messages": [{"id": msg, "token": "t", "attempts": 1,
                          "lease_expires_at": int((t0 + 1) * 1000)}]}


def empty(t0: float, t1: float, wait_ms: int = 1000, queue: str = "q") -> Record:
    return {"op": "poll-empty", "queue": queue, "wait_ms": wait_ms, "t0": t0, "t1": t1}


def test_an_empty_long_poll_while_a_message_was_ready_throughout_is_a_missed_wakeup() -> None:
    w = probes.missed_wakeups({"p": [enqueued(1, 10.0)], "c": [
        empty(10.5, 11.5), leased(1, 12.0)]})
    assert (w.long_polls, w.empty, w.ready_throughout, w.ready_during) == (1, 1, 1, 1)


def test_a_message_enqueued_during_the_wait_and_left_ready_counts_as_ready_during() -> None:
    w = probes.missed_wakeups({"p": [enqueued(1, 11.0)], "c": [empty(10.5, 11.5)]})
    assert (w.ready_throughout, w.ready_during) == (0, 1)  # never leased: ready to the end


@pytest.mark.parametrize("journal", [
    [enqueued(1, 10.0), leased(1, 10.2), empty(10.5, 11.5)],  # leased by another before
    [enqueued(1, 11.45), empty(10.5, 11.5)],  # ready only in the wait's last moment
    [enqueued(1, 10.0), empty(10.5, 11.0)],  # came back before its wait was over
    [enqueued(1, 10.0, queue="other"), empty(10.5, 11.5)],  # ready on another queue
])
def test_empty_polls_the_journals_explain_are_not_counted(journal: list[Record]) -> None:
    w = probes.missed_wakeups({"c": journal})
    assert (w.ready_throughout, w.ready_during) == (0, 0)


@pytest.mark.parametrize(("status", "body", "judged"), [
    (201, {"message_id": 1}, "ok"),
    (503, {"error": {"code": "Unavailable", "message": "down"}}, "Unavailable"),
    (None, "refused", "no answer"),
])
def test_answers_sqew_may_give_during_an_outage(status: int | None, body: object,
                                                judged: str) -> None:
    assert probes.judge_http(status, body, 201) == judged


@pytest.mark.parametrize(("status", "body"), [
    (500, {"error": {"code": "InternalError", "message": "x"}}),
    (503, "Service Unavailable"),
    (503, {"error": {"code": "Overloaded", "message": "x"}}),
])
def test_answers_sqew_must_not_give_during_an_outage(status: int, body: object) -> None:
    assert probes.judge_http(status, body, 201) not in ("ok", "Unavailable", "no answer")


@pytest.fixture
def echo() -> Iterator[int]:
    """An echo server on 127.0.0.1 (a thread per connection), its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):  # (the proxy resets it)
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(5)
    listener.close()


def _connected(proxy: Proxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    sock.sendall(b"hello")
    assert sock.recv(5) == b"hello"  # forwarded both ways
    return sock


def test_the_proxy_forwards_then_resets_closes_and_holds_connections(echo: int) -> None:
    proxy = Proxy(echo).start()
    try:
        reset, closed = _connected(proxy), _connected(proxy)
        with reset, closed:
            assert proxy.reset(random.Random(1), share=1.0) == 2
            with pytest.raises(ConnectionResetError):
                reset.recv(1)
            assert proxy.connections() == 0
        held = _connected(proxy)
        with held:
            assert proxy.drop(random.Random(1), share=1.0) == 1
            assert held.recv(1) == b""  # a FIN: an orderly end
        sock = _connected(proxy)
        with sock:
            proxy.hold()
            sock.settimeout(0.3)
            sock.sendall(b"late")
            with pytest.raises(TimeoutError):
                sock.recv(4)  # nothing forwarded while it lasts
            proxy.release()
            sock.settimeout(10)
            assert sock.recv(4) == b"late"  # held, then forwarded once it ends
    finally:
        proxy.close()
