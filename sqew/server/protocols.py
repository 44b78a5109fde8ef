"""uvicorn's HTTP/1.1 protocol, with the error envelope (docs/rest.md) and limits that hold
against slow and idle clients.

**Envelope.** A request the HTTP parser rejects (a control character in a header, a duplicate
or negative ``Content-Length``, a bad chunk size, a URL too long to parse) never reaches the
app: uvicorn answers it itself, with ``text/plain`` "Invalid HTTP request received.".
``HttpProtocol`` answers ``{"error": {"code": "InvalidRequest", "message": ...}}`` instead, as
JSON, with 400 (414 for a URL too long) and ``Connection: close``, as uvicorn does. uvicorn
calls ``send_400_response`` inside its ``except`` clause for the parser's error, so
``sys.exc_info()`` there is that error: it decides the status and the message.

**Limits** (``Limits``, from the server settings). uvicorn alone waits forever for a request's
headers or body, and accepts connections until the process runs out of file descriptors. Here:

- *header timeout*: from the moment a connection opens, or its previous response ends, the next
  request's headers must be complete within ``header_timeout_s``, however slowly they drip;
  else 408 (nothing is sent to a connection that sent nothing) and the connection is closed.
- *body timeout*: a request's body must be complete within ``body_timeout_s`` of its headers
  (a trickle or a chunked body that never ends is cut off): 408 if nothing was answered yet,
  and closed.
- *keep-alive*: a connection with no request under way and no byte of a new one is closed
  after ``keep_alive_timeout_s`` (uvicorn's ``timeout_keep_alive``, enforced here instead).
- *header bytes*: a request line and headers over ``max_header_bytes`` get 431 (414 when the
  URL is the long part) and the connection is closed; httptools buffers a header until it ends,
  so this is counted on the bytes as they arrive.
- *connections*: beyond ``max_connections`` in the process, a new connection closes the one
  idle the longest (no request handed to the app: waiting, or dripping headers) to take its
  place; only when every connection is busy is the new one closed. So thousands of idle or
  slow connections cannot keep ``/healthz`` from answering.
- *TLS*: a connection counts, and its header timeout runs, from the TCP connection on, its
  handshake included (``sqew.server.handshake``): one that never finishes it is idle.

The timeouts cost no timer per request: a connection notes its phase and when it began
(an attribute and a clock read), and one ``Guard`` per process sweeps all connections a few
times a second, closing those past their deadline (uvicorn's keep-alive timer is not used).

It is uvicorn's httptools protocol (what its ``auto`` picks: ``uvicorn[standard]`` installs
httptools), subclassed: it overrides and calls uvicorn internals, so it runs on the uvicorn
releases it is written for only (``sqew.server.uvicorn_range``, pinned in pyproject.toml;
``runner`` refuses to serve on any other).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
from dataclasses import dataclass
from http import HTTPStatus
from operator import itemgetter
from typing import Any

import httptools
import msgspec
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from sqew import errors
from sqew.server import handshake

MAX_URL_BYTES = 65535
"""The longest URL httptools parses (it counts offsets in 16 bits)."""

log = logging.getLogger("sqew.server")

# A connection's phase, as its reader sees it.
IDLE = 0
"""No byte of a request since the connection opened or the last request was read."""
HEAD = 1
"""Bytes of a request have come, its headers are not complete."""
BODY = 2
"""The headers are complete, the body is not."""
CLOSED = 3
"""Closed by the limits (the transport may not have said so yet)."""
HANDSHAKE = 4
"""A TLS connection whose handshake is not done (``sqew.server.handshake``)."""
_EVICTABLE = (IDLE, HEAD, HANDSHAKE)

_REFUSALS_LOGGED_EVERY_S = 10.0
CLIENT_GONE = "sqew.client_gone"
"""The scope key of a request's ``HttpProtocol.gone`` (``wire.client_gone``)."""


@dataclass(frozen=True)
class Limits:
    """What ``HttpProtocol`` enforces (see the module docstring; ``sqew.settings.Settings``)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keep_alive_timeout_s: float = 5.0
    max_header_bytes: int = 32 * 1024
    max_connections: int = 10_000

    @property
    def sweep_s(self) -> float:
        """How often the guard sweeps: a quarter of the shortest timeout, 50 ms to 1 s."""
        shortest = min(self.header_timeout_s, self.body_timeout_s, self.keep_alive_timeout_s)
        return min(1.0, max(0.05, shortest / 4))


class Config(uvicorn.Config):
    """uvicorn's configuration, carrying the ``Limits`` its ``HttpProtocol`` enforces (it is
    pickled to worker processes with them), and serving TLS through the protocol."""

    def __init__(self, app: Any, *, limits: Limits, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.limits = limits
        self.tls: ssl.SSLContext | None = None

    def load(self) -> None:
        super().load()
        self.tls, self.ssl = self.ssl, None  # HttpProtocol shakes hands (server.handshake)


class HeadTooLarge(Exception):
    """A request line and headers over ``max_header_bytes`` (raised in a parser callback)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, refusing unparsable requests with the error envelope and
    enforcing ``Limits``."""

    def __init__(self, config: uvicorn.Config, server_state: ServerState,
                 app_state: dict[str, Any], _loop: asyncio.AbstractEventLoop | None = None,
                 ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        limits = getattr(config, "limits", None)
        self.guard = Guard.of(server_state, limits if isinstance(limits, Limits) else Limits(),
                              self.loop)
        self.max_head = self.guard.limits.max_header_bytes
        self.clock = self.loop.time
        self.phase = IDLE
        self.since = 0.0  # when the phase's deadline started counting
        self.head_bytes = 0  # bytes received while the headers were incomplete
        self.tls: ssl.SSLContext | None = getattr(config, "tls", None)  # (Config.load)
        self.handshaking = False

    # --- uvicorn's protocol, with the limits' bookkeeping --------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.handshaking:  # the TLS layer's call: the handshake is done, HTTP begins
            self.handshaking = False
            if self.phase == CLOSED:  # closed by the limits meanwhile
                transport.close()
                return
            self.phase = IDLE  # its deadline still counts from the TCP connection
            super().connection_made(transport)
            return
        self.since = self.clock()
        if self.tls is None:
            super().connection_made(transport)
        else:  # counted, evictable and timed like an idle connection while it shakes hands
            self.phase, self.handshaking, self.transport = HANDSHAKE, True, transport
            self.connections.add(self)
            handshake.wrap(self.loop, transport, self, self.tls,
                           self.guard.limits.header_timeout_s, self.handshake_ended)
        self.guard.admit(self)

    def handshake_ended(self) -> None:
        """The TLS handshake is over: forget the connection if it failed (no
        ``connection_lost`` comes for one the layer never handed over)."""
        if self.handshaking:
            self.handshaking = False
            self.phase = CLOSED
            self.connections.discard(self)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        phase = self.phase
        if phase == BODY:
            super().data_received(data)
            return
        if phase == CLOSED:
            return
        self.head_bytes += len(data)
        super().data_received(data)
        if (self.phase == HEAD and self.head_bytes > self.max_head
                and not self.transport.is_closing()):
            self.refuse(*self.head_refusal(self.head_bytes))

    def on_message_begin(self) -> None:
        self.phase = HEAD  # (a request pipelined behind one with the app, too)
        super().on_message_begin()
        self.scope[CLIENT_GONE] = self.gone  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        # Counted bytes may include a body that came with the headers: look closer only then.
        if self.head_bytes > self.max_head:
            size = head_size(self.url, self.headers)
            if size > self.max_head:
                raise HeadTooLarge(*self.head_refusal(size))  # httptools: send_400_response
        self.phase = BODY
        self.since = self.clock()
        self.head_bytes = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self.phase = IDLE
        cycle = self.cycle
        if cycle is not None and cycle.response_complete:  # answered before the body ended
            self.since = self.clock()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # uvicorn's, except that the keep-alive deadline is the guard's (no timer per request).
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self.phase != BODY:
            self.since = self.clock()

    def send_400_response(self, msg: str) -> None:
        url: bytes = getattr(self, "url", b"")  # set once the parser has begun a request
        status, message = refusal(sys.exc_info()[1], url)
        self.refuse(status, message)

    # --- the limits -----------------------------------------------------------------------------
    def gone(self) -> bool:
        """Whether the client has gone (its FIN or RST read) or the limits closed the
        connection: a request of it under way can no longer be answered. It reads a flag, so
        the group commit may ask it where its statements run (a database thread)."""
        return self.transport.is_closing()

    def busy(self) -> bool:
        """Whether a request of this connection is with the app (or queued for it)."""
        cycle = self.cycle
        return bool(self.pipeline) or (cycle is not None and not cycle.response_complete)

    def head_refusal(self, size: int) -> tuple[int, str]:
        """The status and message refusing a request line and headers of ``size`` bytes."""
        url: bytes = getattr(self, "url", b"")
        if 2 * len(url) > size:  # the URL is the long part
            return 414, (f"the request URL is longer than the server accepts ({self.max_head} "
                         "bytes with the headers)")
        return 431, f"the request line and headers are longer than {self.max_head} bytes"

    def expire(self, now: float) -> None:
        """Close this connection if its phase has lasted past its deadline (the guard's sweep)."""
        phase, limits = self.phase, self.guard.limits
        if phase == BODY:
            if now - self.since > limits.body_timeout_s:
                cycle = self.cycle
                if cycle is None or cycle.response_started:
                    self.drop()
                else:
                    self.refuse(408, "the request body did not arrive within "
                                    f"{limits.body_timeout_s:g} s of its headers")
        elif phase == HEAD:
            if now - self.since > limits.header_timeout_s and not self.busy():
                self.refuse(408, "the request headers did not arrive within "
                                f"{limits.header_timeout_s:g} s")
        elif phase == IDLE:
            limit = min(limits.keep_alive_timeout_s, limits.header_timeout_s)
            if now - self.since > limit and not self.busy():
                self.drop()
        elif phase == HANDSHAKE and now - self.since > limits.header_timeout_s:
            self.drop()  # (nothing can be answered before the handshake is done)

    def drop(self) -> None:
        """Close the connection, answering nothing."""
        self.phase = CLOSED
        self.transport.close()

    def refuse(self, status: int, message: str) -> None:
        """Answer the error envelope (``InvalidRequest`` with ``status``) and close; a request
        with the app gets nothing more from it (it sees a disconnect)."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # what connection_lost does, before our bytes go out
            cycle.message_event.set()
        self.transport.write(response(status, message, self.server_state.default_headers))
        self.drop()


class Guard:
    """The limits' state in one server process: its connections' deadlines and their number.

    Made by the first connection of a ``ServerState`` (one per uvicorn server), kept on it.
    """

    def __init__(self, state: ServerState, limits: Limits,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.limits = limits
        self.connections = state.connections
        self.loop = loop
        self._sweeping: asyncio.TimerHandle | None = None
        # Evictable connections by age, oldest last, as (since, connection) when last looked.
        self._idlest: list[tuple[float, HttpProtocol]] = []
        self._refused = 0
        self._refusals_logged = -_REFUSALS_LOGGED_EVERY_S

    @classmethod
    def of(cls, state: ServerState, limits: Limits, loop: asyncio.AbstractEventLoop) -> Guard:
        """The guard of ``state`` (made on first use)."""
        guard = getattr(state, "sqew_guard", None)
        if not isinstance(guard, Guard):
            guard = cls(state, limits, loop)
            state.sqew_guard = guard  # type: ignore[attr-defined]
        return guard

    def admit(self, new: HttpProtocol) -> None:
        """``new`` has connected: make room for it beyond ``max_connections`` (closing the
        connection idle the longest), or close it if every connection is busy."""
        if self._sweeping is None:
            self._sweeping = self.loop.call_later(self.limits.sweep_s, self._sweep)
        if len(self.connections) <= self.limits.max_connections:
            return
        victim = self._pop_idlest(new)
        if victim is not None:
            victim.drop()
            return
        new.drop()
        self._refused += 1
        now = self.loop.time()
        if now - self._refusals_logged >= _REFUSALS_LOGGED_EVERY_S:
            log.warning("%d connection(s) refused: all %d connections of this process are "
                        "busy (max_connections)", self._refused, self.limits.max_connections)
            self._refused, self._refusals_logged = 0, now

    def _pop_idlest(self, new: HttpProtocol) -> HttpProtocol | None:
        """The connection idle the longest, with no request with the app, other than ``new``;
        None if there is none.

        Candidates are sorted once and taken oldest first; one that changed since (it got busy,
        closed, or went idle again, so a new ``since``) is skipped, and a connection that went
        idle after the sort is younger than every candidate left. Sorted again when used up.
        """
        for attempt in range(2):
            while self._idlest:
                since, conn = self._idlest.pop()
                if (conn.since == since and conn.phase in _EVICTABLE and not conn.busy()
                        and conn is not new and not conn.transport.is_closing()):
                    return conn
            if attempt == 0:
                self._idlest = sorted(
                    ((c.since, c) for c in self.connections
                     if isinstance(c, HttpProtocol) and c.phase in _EVICTABLE
                     and not c.busy()),
                    key=itemgetter(0), reverse=True,
                )
        return None

    def _sweep(self) -> None:
        now = self.loop.time()
        for conn in list(self.connections):
            if isinstance(conn, HttpProtocol) and conn.phase != CLOSED:
                conn.expire(now)
        # Sweep while there are connections; the next connection starts it again.
        self._sweeping = (self.loop.call_later(self.limits.sweep_s, self._sweep)
                          if self.connections else None)


def head_size(url: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """About the bytes of a request line and headers (method and version aside)."""
    return len(url) + sum(len(name) + len(value) + 4 for name, value in headers)


def refusal(exc: BaseException | None, url: bytes) -> tuple[int, str]:
    """The status and message refusing a request the parser failed on with ``exc``.

    Args:
        exc: the parser's error (None if unknown).
        url: the request's URL as read so far.
    """
    if isinstance(exc, httptools.HttpParserCallbackError):
        exc = exc.__context__  # raised in a callback, e.g. while parsing the URL
    if isinstance(exc, HeadTooLarge):
        return exc.status, exc.message
    if len(url) > MAX_URL_BYTES:
        return 414, f"the request URL is longer than {MAX_URL_BYTES} bytes"
    if isinstance(exc, httptools.HttpParserError):
        return 400, f"the HTTP request is malformed: {exc}"
    return 400, "the HTTP request is malformed"


def response(status: int, message: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """A complete HTTP/1.1 response carrying ``InvalidRequest`` with ``message``, closing.

    Args:
        status: the HTTP status.
        message: the error's message.
        default_headers: the server's headers for every response (``date``, …).
    """
    body = msgspec.json.encode(errors.InvalidRequest(message).to_dict())
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode()]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [b"content-type: application/json\r\n",
             b"content-length: " + str(len(body)).encode() + b"\r\n",
             b"connection: close\r\n\r\n"]
    return b"".join(head) + body
