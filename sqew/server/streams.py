"""Push streams (``GET /queues/{q}/stream``, docs/rest.md#the-stream): each one leases ready
messages as they come and sends each as a server-sent event, holding at most
``max_in_flight`` unacknowledged leases.

A stream waits for messages as a long poll does (the service's poll with ``wait_ms``, on the
backend's waiter: no statement runs while nothing is ready). At its bound it waits for a slot
to free: its messages are acked, nacked or heartbeated through the usual endpoints, from any
client, so it asks the service which of its leases are still held (``QueueService.held``)
when woken. An ack or nack answered by this process wakes the streams of its queue at once
(``Streams.settled``); one answered elsewhere (another server process, a local client) is
seen at the next check, ``RECHECK_S`` later at the most, and a lease that ends is seen when
it ends. When the stream ends (the client disconnected, or the server stops), the leases it
still holds are given back at once (``QueueService.give_back``): ready again, the attempt not
counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import anyio
import msgspec
from litestar.response import ServerSentEventMessage

from sqew import errors, models
from sqew.core.service import QueueService
from sqew.server.metrics import Metrics

log = logging.getLogger("sqew.server")

KEEPALIVE_S = 15.0
"""A comment line is sent after this long without an event, so that proxies and clients see
the connection alive."""
RECHECK_S = 1.0
"""At its bound, a stream asks again which of its leases are held at least this often (an ack
answered by another process wakes nobody here)."""
_encode = msgspec.json.Encoder().encode


class Streams:
    """The open streams of this server process: what wakes them, and their metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._metrics = metrics
        if metrics.enabled:
            self._open = metrics.gauge("sqew_streams_open", "Message streams open.",
                                       multiprocess_mode="livesum")
            self._events = metrics.counter(
                "sqew_stream_events", "Messages sent on streams (each one leased).")

    def settled(self, queue: str) -> None:
        """Acks or nacks of ``queue`` were answered: its streams look at their leases again."""
        for event in self._waiting.get(queue, ()):
            event.set()

    def _opened(self, queue: str, wake: asyncio.Event) -> None:
        self._waiting.setdefault(queue, set()).add(wake)
        if self._metrics.enabled:
            self._open.inc()

    def _closed(self, queue: str, wake: asyncio.Event) -> None:
        waiting = self._waiting.get(queue)
        if waiting is not None:
            waiting.discard(wake)
            if not waiting:
                del self._waiting[queue]
        if self._metrics.enabled:
            self._open.dec()

    def _sent(self, n: int) -> None:
        if self._metrics.enabled and n:
            self._events.inc(n)


class Host(Protocol):
    """What a stream uses of the server's runtime (``sqew.server.runtime.Runtime``)."""

    waiting_polls: int
    draining: bool
    streams: Streams

    @property
    def service(self) -> QueueService: ...


class Stream:
    """One stream of leased messages (see the module docstring).

    Args:
        rt: the server's runtime (``sqew.server.runtime.Runtime``).
        queue: the queue it leases from.
        max_in_flight: the most unacknowledged leases it holds.
        visibility_ms: each lease's length (None: the queue's).
        gone: whether the client has left (``wire.client_gone``).
    """

    def __init__(
        self, rt: Host, queue: str, max_in_flight: int, visibility_ms: int | None,
        gone: Callable[[], bool] | None,
    ) -> None:
        self.rt = rt
        self.queue = queue
        self.max_in_flight = max_in_flight
        self.visibility_ms = visibility_ms
        self.gone = gone
        self.held: dict[int, tuple[str, int]] = {}
        """Its leases still held (as far as it knows): id -> (token, lease end)."""
        self._wake = asyncio.Event()

    async def events(self) -> AsyncIterator[ServerSentEventMessage]:
        """The stream's events: a comment once open, then each leased message (``id:`` its
        id, ``data:`` the leased message as a poll answers it), and a comment after
        ``KEEPALIVE_S`` without one. Ends when the server stops, the client has gone, or
        after an ``error`` event (``data:`` the error envelope: the queue was removed, say).
        Its leases are given back when it ends, however it ends."""
        rt, streams = self.rt, self.rt.streams
        rt.waiting_polls += 1  # a stream waits as a long poll does (max_waiting_polls)
        streams._opened(self.queue, self._wake)
        try:
            yield ServerSentEventMessage(data=None, comment="open")
            try:
                async for event in self._leased():
                    yield event
            except errors.SqewError as exc:
                yield ServerSentEventMessage(event="error", data=_encode(exc.to_dict()).decode())
        finally:
            rt.waiting_polls -= 1
            streams._closed(self.queue, self._wake)
            await self._give_back()

    async def _leased(self) -> AsyncIterator[ServerSentEventMessage]:
        rt = self.rt
        last = time.monotonic()
        recheck = False
        # A poll for a client that has gone answers at once, without a pause: this loop ends
        # on it, or it would spin and hold the event loop (which would never run the server's
        # own disconnect handling, nor anything else).
        while not rt.draining and not (self.gone is not None and self.gone()):
            free = self.max_in_flight - len(self.held)
            # Only at the bound does it matter which leases are settled: below it, a stale
            # count only asks for fewer.
            if free <= 0 and (recheck or self._wake.is_set()):
                await self._recheck()
                free = self.max_in_flight - len(self.held)
            recheck = False
            quiet = max(0.0, KEEPALIVE_S - (time.monotonic() - last))
            if free > 0:
                got = await rt.service.poll(
                    self.queue, batch=min(free, models.MAX_POLL_BATCH),
                    wait_ms=min(int(quiet * 1000), models.MAX_WAIT_MS),
                    visibility_ms=self.visibility_ms, gone=self.gone)
                for m in got:  # held before the first is sent: nothing leased is lost
                    self.held[m.id] = (m.token, m.lease_expires_at)
                rt.streams._sent(len(got))
                for m in got:
                    yield ServerSentEventMessage(data=_encode(m).decode(), id=m.id)
                if got:
                    last = time.monotonic()
                    continue
            else:
                await self._slot_or(quiet)
                recheck = True
            if time.monotonic() - last >= KEEPALIVE_S:
                yield ServerSentEventMessage(data=None, comment="keep-alive")
                last = time.monotonic()

    async def _slot_or(self, quiet: float) -> None:
        """Wait until a lease may have been settled here, ``RECHECK_S`` passed, the first
        lease ends or ``quiet`` (the keep-alive) runs out."""
        ends = min(end for _, end in self.held.values())
        timeout = min(RECHECK_S, quiet, max(0.0, (ends - self.rt.service.clock()) / 1000))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _recheck(self) -> None:
        self._wake.clear()
        leases = [(i, token) for i, (token, _) in self.held.items()]
        still = await self.rt.service.held(self.queue, leases)
        self.held = {i: (self.held[i][0], end) for i, end in still.items()}

    async def _give_back(self) -> None:
        """Give back the leases still held, even while the stream is being cancelled."""
        if not self.held:
            return
        leases = [(i, token) for i, (token, _) in self.held.items()]
        self.held = {}
        with anyio.CancelScope(shield=True):
            try:
                await self.rt.service.give_back(self.queue, leases)
            except errors.QueueNotFound:
                pass  # removed meanwhile, and its messages with it: nothing is held
            except Exception:  # the server stopping, the database gone: the leases end
                log.warning("a closed stream of %r could not give back %d lease(s); they "
                            "end with their lease", self.queue, len(leases), exc_info=True)
