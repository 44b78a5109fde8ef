"""TLS under the connection limits: the handshake runs inside a connection already counted.

Given a TLS context, ``loop.create_server`` runs each connection's handshake before the app's
protocol hears of it: a connection that never finishes one (silent, or half a ClientHello)
is neither counted against ``max_connections`` nor held to ``header_timeout_s`` until the
loop's own handshake timeout (60 s), and a few thousand of them use up the process's file
descriptors. So sqew's server is made without TLS (``protocols.Config`` keeps the context for
its protocol), and ``protocols.HttpProtocol``, counted from the TCP connection on, puts the
loop's TLS layer between itself and the transport (``wrap``): what ``create_server`` does,
in the same order, with ``header_timeout_s`` as the handshake's bound.

Not ``loop.start_tls``: it is a coroutine, and uvloop reads a new connection as soon as
``connection_made`` returns, so a ClientHello could reach the HTTP parser before the coroutine
ran; and once the handshake is done, asyncio's layer hands the first request over before the
coroutine resumes. The layer's class is the loop's own (uvloop's, or asyncio's), as
``create_server`` uses it.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from collections.abc import Callable
from typing import Any


def wrap(loop: asyncio.AbstractEventLoop, transport: asyncio.Transport,
         protocol: asyncio.Protocol, context: ssl.SSLContext, timeout_s: float,
         ended: Callable[[], None]) -> None:
    """Run a server-side TLS handshake on ``transport`` (just connected), then hand the TLS
    transport to ``protocol.connection_made``.

    Args:
        loop: the loop serving the connection.
        transport: the TCP connection, just made; the layer becomes its protocol.
        protocol: what the connection is for once the handshake is done.
        context: the server's TLS context.
        timeout_s: the most the handshake may take (then the connection is closed).
        ended: called once the handshake is over, done or not (before it, on success,
            ``protocol.connection_made``): failed, timed out, or the connection ended first.
    """
    waiter = loop.create_future()
    waiter.add_done_callback(lambda done: _end(done, ended))
    layer = _layer_class(loop)(loop, protocol, context, waiter, server_side=True,
                               ssl_handshake_timeout=timeout_s)
    transport.set_protocol(layer)
    layer.connection_made(transport)


def _end(done: asyncio.Future[Any], ended: Callable[[], None]) -> None:
    if not done.cancelled():
        done.exception()  # taken: a handshake that failed is the client's doing, not logged
    ended()


def _layer_class(loop: asyncio.AbstractEventLoop) -> Any:
    """The loop's own TLS protocol class (uvloop's for a uvloop loop, else asyncio's)."""
    module = type(loop).__module__
    if module.startswith("uvloop"):
        import uvloop.loop

        return getattr(uvloop.loop, "SSLProtocol")  # noqa: B009 (not in uvloop's stubs)
    return sslproto.SSLProtocol
