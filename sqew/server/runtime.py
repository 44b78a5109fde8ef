"""What the handlers share: the QueueService (built on the server's loop) and its threads.

The service is built with the group commit on the event loop and the thread pool as its
``offload`` for blocking reads and long writes; handlers await its methods directly, so a
waiting long poll holds no thread. The pool is fixed, not anyio's elastic one: the SQLite
backend keeps one connection per thread, and threads that come and go would leave connections
behind. Work handed to the pool carries the caller's context variables (the current span,
when tracing).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from litestar import Request
from litestar.types import Scope
from opentelemetry.trace import TracerProvider

from sqew import errors, telemetry
from sqew.backends import open_backend
from sqew.core.clock import Clock
from sqew.core.pressure import Thresholds
from sqew.core.service import QueueService
from sqew.server.authenticator import Authenticator
from sqew.server.background import Background
from sqew.server.canary import Canary, replica_label
from sqew.server.metrics import Metrics
from sqew.server.streams import Streams
from sqew.settings import Settings

T = TypeVar("T")

log = logging.getLogger("sqew.server")


class Runtime:
    """The per-app state: settings, the service (opened on startup) and its thread pool.

    Args:
        settings: the server settings.
        clock: the service's clock (tests inject a ManualClock); None: the backend's.
        rng: backoff jitter's randomness (see ``create_app``).
        reaper_timer: reap on a wall-clock timer (see ``create_app``).
        tracer_provider: trace with it (see ``create_app``); else as the process's
            OpenTelemetry setup or ``OTEL_*`` environment says (``telemetry.server_tracing``).
    """

    def __init__(
        self, settings: Settings, clock: Clock | None = None, *,
        rng: random.Random | None = None, reaper_timer: bool = True,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._rng = rng
        self._reaper_timer = reaper_timer
        self._tracer_provider = tracer_provider
        self.tracing: telemetry.Tracing | None = None
        """The process's tracing, set up at startup (None: off)."""
        self._service: QueueService | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._timer: asyncio.Task[None] | None = None
        self._canary: asyncio.Task[None] | None = None
        self.draining = False
        self.metrics = Metrics(enabled=settings.metrics)
        self.background = Background(self, self.metrics,
                                     reap_interval_ms=settings.reap_interval_ms,
                                     reap=reaper_timer)
        self.waiting_polls = 0  # long polls (wait_ms > 0) and streams open (max_waiting_polls)
        self.streams = Streams(self.metrics)
        self.auth = Authenticator(settings, self.metrics, self)

    @property
    def service(self) -> QueueService:
        """The open service (only between startup and shutdown)."""
        if self._service is None:
            raise errors.Unavailable("the server is not running")
        return self._service

    # --- lifecycle ------------------------------------------------------------------------------
    def startup(self) -> None:
        """Open the database, build the service on this loop, start the background timer."""
        s = self.settings
        trace = logging.getLogger("sqew.sql").debug if s.trace_sql else None
        backend = open_backend(s.db, durability=s.durability, trace=trace)
        self._pool = ThreadPoolExecutor(s.threads, thread_name_prefix="sqew-db")
        self.tracing = telemetry.server_tracing(self._tracer_provider)  # in every worker
        try:
            options: dict[str, Any] = dict(
                clock=self._clock, reap_interval_ms=s.reap_interval_ms,
                group_commit=s.group_commit, offload=self.offload, rng=self._rng,
                observer=self.metrics.observer, reap_when_due=not self._reaper_timer,
                backpressure=Thresholds(s.overload_pending_writes, s.overload_wal_bytes,
                                        s.overload_commit_ms),
            )
            if self.tracing is None:
                self._service = QueueService(backend, **options)
            else:  # chosen once: an untraced server never loads the tracing code
                from sqew.core.traced_service import TracedService

                self._service = TracedService(backend, tracer=self.tracing.tracer, **options)
        except BaseException:
            backend.close()
            self._close_tracing()
            raise
        self.background.watch(self._service.pressure)
        self.metrics.queue_labels.look_up_with(self._queue_names)
        self._timer = asyncio.get_running_loop().create_task(self.background.run_forever())
        if s.canary_interval_s > 0:
            canary = Canary(self, self.metrics, interval_s=s.canary_interval_s,
                            replica=replica_label(s.canary_replica),
                            draining=lambda: self.draining)
            self._canary = asyncio.get_running_loop().create_task(canary.run_forever())
        self.auth.start()
        log.info("ready: database open, serving requests", extra={"event": "ready"})

    def begin_shutdown(self) -> None:
        """Stop waiting: every long poll returns what it has now (called on SIGINT/SIGTERM)."""
        if not self.draining and self._service is not None:
            grace = self.settings.graceful_timeout_s
            log.info("shutdown begun: long polls end, running requests get up to %s s", grace,
                     extra={"event": "shutdown_begun", "graceful_timeout_s": grace})
        self.draining = True
        if self._service is not None:
            self._service.waiter.close()

    async def shutdown(self) -> None:
        """Wake waiters, let running calls finish, close the database."""
        self.begin_shutdown()
        for task in (self._timer, self._canary):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.background.release()
        if self._service is not None:
            await self.auth.stop()  # records the last uses of keys
            await self._service.drain()  # pending group commits may still offload waits
        if self._pool is not None:  # calls running on the database threads finish
            await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)
        if self._service is not None:
            self._service.close()
            log.info("shutdown finished: database closed", extra={"event": "shutdown_finished"})
        await self.metrics.queue_labels.close()
        self.metrics.close()
        self._close_tracing()

    def _close_tracing(self) -> None:
        """Export the spans still buffered (a provider set up here) and stop tracing."""
        if self.tracing is not None:
            try:
                self.tracing.close()
            except Exception:  # an exporter that fails must not fail the shutdown
                log.exception("exporting the last spans failed")
            self.tracing = None

    async def _queue_names(self) -> list[str]:
        """Every queue's name (which names may label the metrics' queues)."""
        return [q.name for q in await self.service.list_queues()]

    # --- calls ----------------------------------------------------------------------------------
    def offload(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run a blocking call on the database threads, with the caller's context variables."""
        if self._pool is None:
            raise errors.Unavailable("the server is not running")
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(self._pool, context.run, fn)


def runtime(request: Request[Any, Any, Any]) -> Runtime:
    """The Runtime of the app serving ``request``."""
    return runtime_of_scope(request.scope)


def runtime_of_scope(scope: Scope) -> Runtime:
    """The Runtime of the app serving the request of ``scope`` (ASGI middleware too)."""
    rt: Runtime = scope["app"].state.runtime
    return rt
