"""What the handlers share: the QueueService and the threads it runs on.

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
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from litestar import Request

from sqew import errors, models
from sqew.backends import open_backend
from sqew.config import Settings
from sqew.core.clock import Clock, system_clock
from sqew.core.service import QueueService
from sqew.server.metrics import Metrics

T = TypeVar("T")

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
