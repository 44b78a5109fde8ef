"""What the handlers share: the QueueService, the threads it runs on, and body decoding.

Enqueue, ack and non-waiting polls join the service's group commit, which runs on the event
loop (``sqew.core.group_commit``): the handler awaits its future and no thread is involved.
The other calls are blocking (SQLite reads, long-poll waits), so handlers hand them to a fixed
thread pool. Fixed pools, not anyio's elastic one: the
SQLite backend keeps one connection per thread, and threads that come and go would leave
connections behind. Long polls get their own, larger pool so that waiting consumers never
starve short requests of threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypeVar

import msgspec
from litestar import Request
from litestar.exceptions import ClientException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.params import PathParameter
from litestar.types import Empty, Receive, Scope, Send
from litestar.utils.scope.state import ScopeState

from sqew import errors, models
from sqew.backends import open_backend
from sqew.client.base import validation_error
from sqew.config import Settings
from sqew.core.clock import Clock, system_clock
from sqew.core.service import QueueService
from sqew.server.metrics import Metrics

T = TypeVar("T")

QueuePath = Annotated[str, PathParameter(description="queue name")]
"""The ``{q}`` path parameter of every queue route."""
log = logging.getLogger("sqew.server")


class Runtime:
    """The per-app state: settings, the service (opened on startup) and the thread pools.

    Args:
        settings: the server settings.
        clock: the service's clock (tests inject a ManualClock).
    """

    def __init__(self, settings: Settings, clock: Clock = system_clock) -> None:
        self.settings = settings
        self.clock = clock
        self._service: QueueService | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._polls: ThreadPoolExecutor | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.draining = False
        self.metrics = Metrics()

    @property
    def service(self) -> QueueService:
        """The open service (only between startup and shutdown)."""
        if self._service is None:
            raise errors.Unavailable("the server is not running")
        return self._service

    # --- lifecycle ------------------------------------------------------------------------------
    def startup(self) -> None:
        """Open the database and start the thread pools and the reaper."""
        s = self.settings
        trace = logging.getLogger("sqew.sql").debug if s.trace_sql else None
        backend = open_backend(s.db, durability=s.durability, trace=trace)
        loop = asyncio.get_running_loop()
        self._service = QueueService(
            backend, clock=self.clock, reap_interval_ms=s.reap_interval_ms,
            commit_loop=loop if s.group_commit else None,
        )
        self._pool = ThreadPoolExecutor(s.threads, thread_name_prefix="sqew-db")
        self._polls = ThreadPoolExecutor(s.poll_threads, thread_name_prefix="sqew-poll")
        self._reaper = loop.create_task(self._reap_forever())
        # Everything built so far lives as long as the server: keep the collector from
        # scanning it again and again (full collections of it were the p99 latency).
        gc.collect()
        gc.freeze()
        # A request allocates a few hundred objects, nearly all freed by reference counting;
        # a young-generation collection every 700 allocations then finds almost nothing. One
        # per 20,000 was 5-10 % more poll+ack throughput (docs/benchmarks.md).
        gc.set_threshold(20_000, *gc.get_threshold()[1:])

    def begin_shutdown(self) -> None:
        """Stop waiting: every long poll returns what it has now (called on SIGINT/SIGTERM)."""
        self.draining = True
        if self._service is not None:
            self._service.waker.close()

    async def shutdown(self) -> None:
        """Wake waiters, let running calls finish, close the database."""
        self.begin_shutdown()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        for pool in (self._pool, self._polls):
            if pool is not None:
                await asyncio.get_running_loop().run_in_executor(None, pool.shutdown)
        if self._service is not None:
            await self._service.aclose()

    async def _reap_forever(self) -> None:
        """Remove expired messages even when nobody polls (polls reap too, this is the floor)."""
        interval = self.settings.reap_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run(self.service.reap)
            except Exception:  # keep reaping; a locked or closing database is retried later
                log.exception("reaping expired messages failed")

    # --- calls ----------------------------------------------------------------------------------
    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking service call on the database threads."""
        if self._pool is None:
            raise errors.Unavailable("the server is not running")
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool, call)

    async def enqueue(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        """Enqueue without holding a thread: the group's commit resolves the awaited future."""
        if not self.settings.group_commit:  # the write would run here, on the event loop
            return await self.run(self.service.enqueue, queue, messages)
        return await self.service.enqueue_soon(queue, messages)

    async def ack(self, queue: str, items: list[tuple[int, str]]) -> list[models.ItemResult]:
        """Acknowledge without holding a thread (see ``enqueue``)."""
        if not self.settings.group_commit:
            return await self.run(self.service.ack, queue, items)
        return await self.service.ack_soon(queue, items)

    async def poll(
        self, request: Request[Any, Any, Any], queue: str, batch: int, wait_ms: int,
        visibility_ms: int | None,
    ) -> list[models.LeasedMessage]:
        """A poll; one that may wait runs on the poll threads and ends, leasing nothing, if the
        client disconnects meanwhile."""
        if wait_ms == 0 and self.settings.group_commit:
            return await self.service.poll_soon(queue, batch=batch, visibility_ms=visibility_ms)
        if wait_ms == 0 or self._polls is None:
            return await self.run(self.service.poll, queue, batch=batch, wait_ms=0,
                                  visibility_ms=visibility_ms)
        gone = threading.Event()
        watcher = asyncio.get_running_loop().create_task(_watch_disconnect(request, gone))
        try:
            call = functools.partial(
                self.service.poll, queue, batch=batch, wait_ms=wait_ms,
                visibility_ms=visibility_ms, cancel=gone,
            )
            return await asyncio.get_running_loop().run_in_executor(self._polls, call)
        finally:
            watcher.cancel()


async def _watch_disconnect(request: Request[Any, Any, Any], gone: threading.Event) -> None:
    """Set ``gone`` when the client disconnects (the ASGI server's ``http.disconnect``)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


def runtime(request: Request[Any, Any, Any]) -> Runtime:
    """The Runtime of the app serving ``request``."""
    rt: Runtime = request.app.state.runtime
    return rt


# --- bodies -------------------------------------------------------------------------------------
# The hot endpoints (enqueue, poll, ack) read and write their bodies with ``read_body`` and
# ``JsonResponse`` instead of ``Request.body()`` and a returned model. Litestar builds the
# request's header map and an async generator to read a body, and a Response, then an
# ASGIResponse, to send one: together about a fifth of an enqueue's cost on the event loop
# (docs/benchmarks.md). The bytes on the wire are the same; the handlers declare their
# response model in ``opt["returns"]`` for the OpenAPI document.
_encode = msgspec.json.Encoder().encode


async def read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The request body, refused while streaming once it exceeds ``limit`` bytes.

    Shares Litestar's cache of the body, so ``Request.body()`` before or after still works.

    Raises:
        RequestEntityTooLarge: over the limit (by ``Content-Length`` or as read), the same
            refusal as Litestar's own body reading.
        ClientException: the client went away before the body ended.
    """
    state = ScopeState.from_scope(request.scope)
    if state.body is not Empty:
        return state.body
    for name, value in request.scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise RequestEntityTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await request.receive()
        if message["type"] != "http.request":
            raise ClientException("the client disconnected before the body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestEntityTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            state.body = body
            return body


class JsonResponse:
    """A model sent as JSON: what Litestar sends for a returned model, as two ASGI messages.

    Litestar's own ``ASGIResponse`` builds a header map per response (cookies, HEAD, background
    tasks): none of which these POST answers have, and a third of an enqueue's handler time.
    """

    __slots__ = ("body", "status")

    def __init__(self, model: msgspec.Struct, status: int = 200) -> None:
        self.body = _encode(model)
        self.status = status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(self.body)).encode())]})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


def batch_key(key: bytes) -> re.Pattern[bytes]:
    """A pattern telling a batch body (``{"<key>": [...]}``) from a single item, by its start.

    A valid batch body has exactly one key, so looking at the first one decides; anything else
    is decoded as a single item, whose decoder rejects unknown fields.
    """
    return re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"' + re.escape(key) + rb'"[ \t\r\n]*:')


def decode(body: bytes, type_: type[T]) -> T:
    """Decode a JSON body into a request model.

    Raises:
        sqew.errors.InvalidRequest: empty, not UTF-8 or not JSON.
        sqew.errors.ValidationError: JSON of the wrong shape (with ``details``).
    """
    if not body.strip():
        raise errors.InvalidRequest("the request needs a JSON body")
    try:
        # Raw payloads are kept as sent and not checked by the decoder: check the encoding here.
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidRequest(f"the body is not UTF-8 (byte {exc.start})") from None
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        raise validation_error(exc) from None
    except msgspec.DecodeError as exc:
        raise errors.InvalidRequest(f"malformed JSON: {exc}") from None
