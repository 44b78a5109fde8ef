"""A TCP proxy on 127.0.0.1 that breaks connections on demand: the ``pg-proxy`` scenario puts it
between sqew (its replicas, its Clients) and PostgreSQL.

It runs an asyncio loop on a thread of its own and forwards each accepted connection to the
upstream port, byte for byte, until told to:

- ``delay``: hold every chunk (either way) for a while before forwarding it, for a time;
- ``drop``: close connections (a FIN to both ends, what a peer that closes sends);
- ``reset``: abort connections with ``SO_LINGER`` 0 (an RST to both ends);
- ``blackhole``: forward nothing for a time (connections stay open, new ones are accepted
  and not connected upstream until it ends): a partition that heals.

It is bounded (``MAX_CONNECTIONS``: more are closed as they come) and ``close`` stops it and
every connection it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_CONNECTIONS = 256
CHUNK = 65536
CONNECT_S = 5.0
"""How long a connection upstream may take before the client's is closed."""


@dataclass(eq=False)
class _Pair:
    """An accepted connection and its upstream one (once connected)."""

    down: asyncio.StreamWriter
    up: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def writers(self) -> list[asyncio.StreamWriter]:
        return [w for w in (self.down, self.up) if w is not None]


class Proxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream``; faults are called from any thread."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.port = 0
        self.accepted = 0
        self._pairs: set[_Pair] = set()
        self._delay_s = 0.0
        self._delay_until = 0.0
        self._open = asyncio.Event()  # set: forwarding (not blackholed)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy",
                                        daemon=True)

    def start(self) -> Proxy:
        """Listen on a free port of 127.0.0.1 (``port``) and forward from now on."""
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(CONNECT_S)
        return self

    async def _listen(self) -> None:
        self._open.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._pairs) >= MAX_CONNECTIONS:
            writer.close()
            return
        self.accepted += 1
        pair = _Pair(writer)
        self._pairs.add(pair)
        try:
            await self._open.wait()  # a blackhole: accepted, not connected yet
            up_reader, up = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self.upstream), CONNECT_S)
            pair.up = up
            pair.tasks = [asyncio.ensure_future(self._pipe(reader, up)),
                          asyncio.ensure_future(self._pipe(up_reader, writer))]
            await asyncio.wait(pair.tasks, return_when=asyncio.FIRST_COMPLETED)
        except (TimeoutError, OSError):
            pass
        finally:
            self._end(pair, rst=False)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(CHUNK):
                await self._open.wait()
                if self._delay_s and time.time() < self._delay_until:
                    await asyncio.sleep(self._delay_s)
                writer.write(data)
                await writer.drain()

    def _end(self, pair: _Pair, rst: bool) -> None:
        self._pairs.discard(pair)
        for task in pair.tasks:
            task.cancel()
        for w in pair.writers():
            if rst:
                sock = w.get_extra_info("socket")
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                w.transport.abort()
            else:
                w.close()

    def _cut_now(self, rng: random.Random, share: float, rst: bool) -> int:
        """``_cut`` on the proxy's loop, from another thread."""
        async def run() -> int:
            return self._cut(rng, share, rst)
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(CONNECT_S)

    # --- faults (any thread) --------------------------------------------------------------------
    def delay(self, seconds: float, for_s: float) -> None:
        """Hold each chunk ``seconds`` before forwarding it, for the next ``for_s``."""
        self._delay_s, self._delay_until = seconds, time.time() + for_s

    def drop(self, rng: random.Random, share: float = 0.5) -> int:
        """Close (FIN) about ``share`` of the connections; how many."""
        return self._cut_now(rng, share, False)

    def reset(self, rng: random.Random, share: float = 0.5) -> int:
        """Abort (RST) about ``share`` of the connections; how many."""
        return self._cut_now(rng, share, True)

    def _cut(self, rng: random.Random, share: float, rst: bool) -> int:
        chosen = [p for p in list(self._pairs) if p.up is not None and rng.random() < share]
        for pair in chosen:
            self._end(pair, rst)
        return len(chosen)

    def blackhole(self, for_s: float) -> None:
        """Forward nothing (accept, hold) for ``for_s``; returns when it is over."""
        self.hold()
        try:
            time.sleep(for_s)
        finally:
            self.release()

    def hold(self) -> None:
        """Forward nothing from now on (what was read is held) until ``release``."""
        self._on_loop(self._open.clear)

    def release(self) -> None:
        """Forward again, what was held first."""
        self._on_loop(self._open.set)

    def _on_loop(self, fn: Callable[[], None]) -> None:
        async def run() -> None:
            fn()
        asyncio.run_coroutine_threadsafe(run(), self._loop).result(CONNECT_S)

    def connections(self) -> int:
        """Connections held now."""
        return len(self._pairs)

    def close(self) -> None:
        """Stop listening, end every connection, stop the loop and its thread."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for pair in list(self._pairs):
                self._end(pair, rst=False)
            self._open.set()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(CONNECT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CONNECT_S)
        if not self._thread.is_alive():
            self._loop.close()
