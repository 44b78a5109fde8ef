"""What the handlers share: the QueueService (built on the server's loop) and its threads.

The service is built with the group commit on the event loop and the thread pool as its
``offload`` for blocking reads and long writes; handlers await its methods directly, so a
waiting long poll holds no thread. The pool is fixed, not anyio's elastic one: the SQLite
backend keeps one connection per thread, and threads that come and go would leave connections
behind. Work handed to the pool carries the caller's context variables (tracing will need them).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
from collections.abc import Awaitable, Callable
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
    """The per-app state: settings, the service (opened on startup) and its thread pool.

    Args:
        settings: the server settings.
        clock: the service's clock (tests inject a ManualClock).
    """

    def __init__(self, settings: Settings, clock: Clock = system_clock) -> None:
        self.settings = settings
        self.clock = clock
        self._service: QueueService | None = None
        self._pool: ThreadPoolExecutor | None = None
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
        """Open the database, build the service on this loop, start the reaper."""
        s = self.settings
        trace = logging.getLogger("sqew.sql").debug if s.trace_sql else None
        backend = open_backend(s.db, durability=s.durability, trace=trace)
        self._pool = ThreadPoolExecutor(s.threads, thread_name_prefix="sqew-db")
        self._service = QueueService(
            backend, clock=self.clock, reap_interval_ms=s.reap_interval_ms,
            group_commit=s.group_commit, offload=self.offload,
        )
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    def begin_shutdown(self) -> None:
        """Stop waiting: every long poll returns what it has now (called on SIGINT/SIGTERM)."""
        self.draining = True
        if self._service is not None:
            self._service.waiter.close()

    async def shutdown(self) -> None:
        """Wake waiters, let running calls finish, close the database."""
        self.begin_shutdown()
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        if self._service is not None:
            await self._service.aclose()
        if self._pool is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)

    async def _reap_forever(self) -> None:
        """Remove expired messages and end last leases even when nobody polls."""
        interval = self.settings.reap_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await self.service.reap()
            except Exception:  # keep reaping; a locked or closing database is retried later
                log.exception("reaping expired messages failed")

    # --- calls ----------------------------------------------------------------------------------
    def offload(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run a blocking call on the database threads, with the caller's context variables."""
        if self._pool is None:
            raise errors.Unavailable("the server is not running")
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(self._pool, context.run, fn)

    async def poll(
        self, request: Request[Any, Any, Any], queue: str, batch: int, wait_ms: int,
        visibility_ms: int | None,
    ) -> list[models.LeasedMessage]:
        """The service's poll; one that may wait ends, leasing nothing, when the client
        disconnects meanwhile."""
        call = self.service.poll(queue, batch=batch, wait_ms=wait_ms, visibility_ms=visibility_ms)
        if wait_ms == 0:
            return await call
        polling = asyncio.ensure_future(call)
        watcher = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait((polling, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if not polling.done():  # the client has gone: nobody to lease messages to
            polling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await polling
            return []
        return polling.result()


async def _disconnected(request: Request[Any, Any, Any]) -> None:
    """Return when the client disconnects (the ASGI server's ``http.disconnect``)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
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
