"""A webhook receiver for the relay's tests: a real HTTP/1.1 server (or HTTPS) on 127.0.0.1 in
threads that records every request and answers each by a script.

The script is a function of the request (its decoded JSON body and its ``X-Sqew-Attempts``)
to an ``Answer``: a status with headers, after an optional pause; ``hold`` answers only once
the test calls ``release()`` (or the receiver stops), so a test can see requests under way.
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Answer:
    """How the receiver answers one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    pause_s: float = 0.0
    hold: bool = False


@dataclass(frozen=True)
class Delivery:
    """One request as received: its headers (in order, names as sent) and exact body."""

    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        found = [v for k, v in self.headers if k.lower() == name.lower()]
        assert len(found) <= 1, f"{name} {len(found)} times"
        return found[0] if found else None

    @property
    def message_id(self) -> int:
        return int(self.header("X-Sqew-Message-Id") or 0)

    @property
    def attempts(self) -> int:
        return int(self.header("X-Sqew-Attempts") or 0)

    @property
    def payload(self) -> Any:
        return json.loads(self.body)


Script = Callable[[Any, int], Answer]


def always_ok(payload: Any, attempts: int) -> Answer:
    return Answer()


class Receiver:
    """The server; ``with Receiver(script) as r:`` runs it, ``r.url`` is where it listens."""

    def __init__(self, script: Script = always_ok, port: int = 0,
                 tls: ssl.SSLContext | None = None) -> None:
        self.script = script
        self.lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        # message id -> the connections of its requests under way
        self.under_way: dict[int, list[socket.socket]] = {}
        self.overlaps: list[int] = []  # message ids delivered twice at once
        self.released = threading.Event()
        self.stopped = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self.server.daemon_threads = True
        if tls is not None:  # (a handshake the relay refuses fails the accept: dropped)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        scheme = "http" if tls is None else "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(TIMEOUT_S)

    def release(self) -> None:
        """Let every held request (and those to come) be answered."""
        self.released.set()

    def held(self) -> int:
        """Requests under way now."""
        with self.lock:
            return sum(len(conns) for conns in self.under_way.values())

    def of(self, message_id: int) -> list[Delivery]:
        """The deliveries of one message, in the order received."""
        with self.lock:
            return [d for d in self.deliveries if d.message_id == message_id]

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the relay's pool expects

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                delivery = Delivery(list(self.headers.items()), body)
                msg_id = delivery.message_id
                with receiver.lock:
                    receiver.deliveries.append(delivery)
                    # A request the relay gave up (it hung up: its timeout) is not under way
                    # any more, even if this side has not noticed yet.
                    earlier = [c for c in receiver.under_way.get(msg_id, []) if not _gone(c)]
                    if earlier:
                        receiver.overlaps.append(msg_id)
                    receiver.under_way.setdefault(msg_id, []).append(self.connection)
                try:
                    answer = receiver.script(delivery.payload, delivery.attempts)
                    if answer.hold:
                        self._wait(receiver.released, TIMEOUT_S)
                    if answer.pause_s:
                        self._wait(receiver.stopped, answer.pause_s)
                finally:
                    with receiver.lock:
                        receiver.under_way[msg_id].remove(self.connection)
                try:
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:  # the relay gave up on this request (its timeout)
                    pass

            def _wait(self, event: threading.Event, seconds: float) -> None:
                """Wait for ``event`` or ``seconds``, or until the relay hangs up (its
                timeout): a request it gave up is no longer under way."""
                end = time.monotonic() + seconds
                while not event.wait(0.02) and time.monotonic() < end:
                    if _gone(self.connection):
                        return

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _gone(connection: socket.socket) -> bool:
    """Whether the other side closed ``connection`` (nothing is read from it)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def until(done: Callable[[], object], what: str, timeout: float = TIMEOUT_S) -> None:
    """Return once ``done()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
