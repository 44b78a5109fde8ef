"""The REST app (docs/rest.md): ``create_app(settings)`` wires routes, errors and lifecycle.

Wiring only: handlers live in ``routes/``, rules in ``QueueService``, the error envelope in
``errors.py``. The database is opened on startup and closed on shutdown, so building an app
(for the OpenAPI document, say) opens nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple

import msgspec
from litestar import Litestar
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send
from litestar.utils.scope.state import ScopeState
from opentelemetry.trace import TracerProvider

from sqew import errors, telemetry
from sqew.core.clock import Clock
from sqew.server import access, auth, metrics, openapi, tracing
from sqew.server import errors as server_errors
from sqew.server.authenticator import Authenticator
from sqew.server.metrics import Metrics
from sqew.server.routes import dlq, keys, messages, ops, options, queues, sqs, stream
from sqew.server.runtime import Runtime, runtime_of_scope
from sqew.server.ui import router as ui_router
from sqew.server.ui import template_config as ui_templates
from sqew.settings import Settings, load

HANDLERS = [*queues.HANDLERS, *messages.HANDLERS, *stream.HANDLERS, *dlq.HANDLERS, *keys.HANDLERS,
            *ops.HANDLERS]
# The SQS endpoint's routes answer in AWS's shapes: no OPTIONS of their own, not in HANDLERS.
ROUTES = [*options.handlers(HANDLERS), *HANDLERS, *sqs.HANDLERS]
log = logging.getLogger("sqew.server")


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None,
    rng: random.Random | None = None, reaper_timer: bool = True,
    tracer_provider: TracerProvider | None = None, reuse: Litestar | None = None,
) -> Litestar:
    """The sqew REST app for ``settings``.

    Args:
        settings: server settings (database, body limit, threads, …); defaults if omitted.
        clock: the service's clock in epoch milliseconds (tests inject a ManualClock); by
            default the database's (``Backend.clock``: the server's time on PostgreSQL).
        rng: the randomness of backoff jitter (tests seed it for repeatable runs).
        reaper_timer: reap on a wall-clock timer every ``reap_interval_ms`` when this process
            leads the reaper (``sqew.server.background``); off, polls and reads still reap once
            due by ``clock``, taking the lead for a moment (a test on a ManualClock decides
            when).
        tracer_provider: trace requests, operations and transactions with it (tests, a
            program embedding the server). Without one, a server traces when the process has
            an OpenTelemetry SDK set up, or when ``OTEL_TRACES_EXPORTER`` names an exporter
            (``sqew.telemetry.server_tracing``); otherwise it runs no tracing code at all.
        reuse: an app this function made earlier, not serving now, whose routes were built
            for the same ``shape`` of settings: it is given a new runtime for ``settings``
            and returned (ValueError otherwise). Building the routes is nearly all of an
            app's cost (a tenth of a second); a program that serves one app after another in
            one process (a test suite) builds them once.
    """
    settings = settings or Settings()
    rt = Runtime(settings, clock, rng=rng, reaper_timer=reaper_timer,
                 tracer_provider=tracer_provider)
    built_for = shape(settings, tracer_provider)
    if reuse is not None:
        if reuse.state.get(_SHAPE) != built_for or reuse.state.get(_SERVING):
            raise ValueError("only a stopped app built for the same shape of settings "
                             "can be reused")
        reuse.state.clear()  # what the last runtime's pages kept there goes with it
        reuse.state.update({"runtime": rt, _SHAPE: built_for})
        return reuse
    auth.check_routes(ROUTES)
    app = Litestar(
        route_handlers=[*ROUTES, ui_router()],  # the dashboard (/ui) checks its own cookie
        template_config=ui_templates(),
        on_startup=[_startup],
        on_shutdown=[_shutdown],
        exception_handlers={Exception: server_errors.handle},
        # Metrics outermost: they see the status of every answer, a cancelled request's too.
        # Each middleware finds the request's runtime in its app's state.
        middleware=[
            *([metrics.middleware(_metrics_of)] if settings.metrics else []),
            # Decided once, here: a server without tracing has no tracing middleware.
            *([tracing.middleware(runtime_of_scope)] if built_for.traced else []),
            answer_cancelled, auth.middleware(_auth_of),
        ],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=openapi.config(),
        state=State({"runtime": rt, _SHAPE: built_for}),
        logging_config=None,
        debug=False,
    )
    access.install(app, access_log=settings.access_log)
    return app


class Shape(NamedTuple):
    """What of the settings the routes of an app are built for (``create_app(reuse=...)``)."""

    max_body_bytes: int
    metrics: bool
    access_log: bool
    traced: bool


def shape(settings: Settings, tracer_provider: TracerProvider | None = None) -> Shape:
    """The shape of the app ``create_app(settings, tracer_provider=...)`` builds."""
    return Shape(settings.max_body_bytes, settings.metrics, settings.access_log,
                 telemetry.wanted(tracer_provider))


_SHAPE = "sqew.shape"
_SERVING = "sqew.serving"
_RESTORE = "sqew.restore_signals"


def _metrics_of(scope: Scope) -> Metrics:
    return runtime_of_scope(scope).metrics


def _auth_of(scope: Scope) -> Authenticator:
    return runtime_of_scope(scope).auth


async def _startup(app: Litestar) -> None:
    rt: Runtime = app.state.runtime
    app.state[_SERVING] = True
    rt.startup()
    app.state[_RESTORE] = _chain_stop_signals(rt)


async def _shutdown(app: Litestar) -> None:
    restore: list[Callable[[], None]] = app.state.pop(_RESTORE, [])
    while restore:
        restore.pop()()
    rt: Runtime = app.state.runtime
    try:
        await rt.shutdown()
    finally:
        app.state[_SERVING] = False


def answer_cancelled(app: ASGIApp) -> ASGIApp:
    """Middleware: a request cancelled before it answered gets the error envelope (503).

    The ASGI server cancels the requests still running when its graceful shutdown timeout
    ends. Cancellation is no ``Exception``, so it passes Litestar's exception handlers, and
    uvicorn would answer a plain-text 500. Here the request answers ``Unavailable`` with
    ``Connection: close`` instead, and ends: its task was cancelled to end it, and it has.
    """

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await app(scope, receive, send)
        except asyncio.CancelledError:
            # Litestar's exception middleware, around this one, records whether the response
            # started (reading its record costs nothing per request; wrapping send would).
            if scope["type"] != ScopeType.HTTP or ScopeState.from_scope(scope).response_started:
                raise
            log.warning("request cancelled before it finished (server shutting down): %s %s",
                        scope.get("method"), scope.get("path"))
            err = errors.Unavailable(
                "the server shut down before this request finished; it may or may not have "
                "taken effect"
            )
            body = msgspec.json.encode(err.to_dict())
            await send({
                "type": "http.response.start",
                "status": err.status,
                "headers": [(b"content-type", server_errors.JSON.encode()),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")],
            })
            await send({"type": "http.response.body", "body": body, "more_body": False})
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # handled: later awaits of this task are not cancelled

    return middleware


def app_from_env() -> Litestar:
    """App factory for server processes: settings from ``SQEW_*`` (and ``SQEW_CONFIG``)."""
    return create_app(load())


def begin_shutdown(app: Litestar) -> None:
    """End every long poll of ``app`` now (the server is about to stop)."""
    rt: Runtime = app.state.runtime
    rt.begin_shutdown()


def _chain_stop_signals(rt: Runtime) -> list[Callable[[], None]]:
    """Make SIGINT/SIGTERM also end long polls at once, then call the server's own handler.

    An ASGI server stops accepting on these signals and waits for running requests before it
    tells the app to shut down; a long poll would hold that wait for up to 20 s. Chaining onto
    the handler the server installed (uvicorn installs its own before startup) ends waits as
    soon as the signal arrives. Only in the main thread (where signal handlers live) and only
    over a handler someone installed. Returns functions that undo it.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    loop = asyncio.get_running_loop()
    undo: list[Callable[[], None]] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if not callable(previous) or previous is signal.default_int_handler:
            continue

        def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
            with contextlib.suppress(RuntimeError):  # the loop may be closing already
                loop.call_soon_threadsafe(rt.begin_shutdown)
            previous(signum, frame)

        signal.signal(sig, handler)
        undo.append(functools.partial(_restore, sig, handler, previous))
    return undo


def _restore(sig: int, ours: Any, previous: Any) -> None:
    if signal.getsignal(sig) is ours:
        signal.signal(sig, previous)
