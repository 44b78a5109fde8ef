"""The server span of every HTTP request (tracing on: ``sqew.telemetry.server_tracing``).

An ASGI middleware, the outermost of the app's, so that refused requests (401, 403, 429) have
their span too. The span is named after the route template (``POST /queues/{q}/messages``:
few names, whatever the queue), is of kind SERVER and continues the caller's trace: the
context of its ``traceparent``/``tracestate`` headers (the configured propagators) is the
span's parent. The service's spans (``sqew.core.tracing``) are its children.

``create_app`` adds the middleware only when tracing is wanted, so a server without tracing
runs none of this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import context, propagate
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context

from sqew import errors, telemetry

if TYPE_CHECKING:
    from sqew.server.runtime import Runtime

_PARAM_TYPE = re.compile(r"\{(\w+):[^}]*\}")


class _Headers(Getter[Iterable[tuple[bytes, bytes]]]):
    """Reads a propagator's headers from an ASGI scope's raw header list."""

    def get(self, carrier: Iterable[tuple[bytes, bytes]], key: str) -> list[str] | None:
        name = key.lower().encode("latin-1")
        found = [v.decode("latin-1") for k, v in carrier if k == name]
        if name == telemetry.TRACEPARENT_HEADER and len(found) > 1:
            return None  # invalid (W3C), as the enqueue route reads it: no parent, not the first
        return found or None

    def keys(self, carrier: Iterable[tuple[bytes, bytes]]) -> list[str]:
        return [k.decode("latin-1") for k, _ in carrier]


_HEADERS = _Headers()
_routes: dict[str, str] = {}


def route_of(scope: Scope) -> str:
    """The route template of a routed request, its parameters without their types
    (``/queues/{q}/messages``)."""
    template: str = scope.get("path_template") or scope["path"]
    route = _routes.get(template)
    if route is None:
        route = _routes[template] = _PARAM_TYPE.sub(r"{\1}", template)
    return route


_ROOT = Context()
"""The parent of a request span with no caller: none (never whatever context is current)."""


def _extract(scope: Scope, fields: frozenset[bytes]) -> Context:
    """The caller's context from the request's headers (the configured propagators, whose
    header names are ``fields``); an empty one, at once, when the request has none of them."""
    headers: Iterable[tuple[bytes, bytes]] = scope["headers"]
    for name, _ in headers:
        if name in fields:
            return propagate.extract(headers, getter=_HEADERS)
    return _ROOT


def middleware(runtime_of: Callable[[Scope], Runtime]) -> Callable[[ASGIApp], ASGIApp]:
    """The middleware (for ``Litestar(middleware=...)``) that gives each request its span,
    with the tracing of the request's ``runtime_of(scope)``."""

    fields = frozenset(f.lower().encode("latin-1") for f in propagate.get_global_textmap().fields)

    def wrap(app: ASGIApp) -> ASGIApp:
        async def traced(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            tracing = runtime_of(scope).tracing
            if tracing is None:
                await app(scope, receive, send)
                return
            method = scope["method"]
            route = route_of(scope)
            # By hand rather than start_as_current_span: this is on every request's path.
            span = tracing.tracer.start_span(
                f"{method} {route}", context=_extract(scope, fields), kind=SpanKind.SERVER,
                attributes={"http.request.method": method, "http.route": route},
            )
            token = context.attach(set_span_in_context(span))
            if not span.is_recording():  # sampled out: current only so that its children
                try:  # are left out too (sqew.core.tracing)
                    await app(scope, receive, send)
                finally:
                    context.detach(token)
                return
            status = 0

            async def send_status(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            try:
                await app(scope, receive, send_status)
            except Exception as exc:  # answered by the app's exception handler, outside
                status = status or _status_of(exc)
                raise
            finally:
                context.detach(token)
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(StatusCode.ERROR)
                span.end()

        return traced

    return wrap


def _status_of(exc: Exception) -> int:
    if isinstance(exc, errors.SqewError):
        return exc.status
    if isinstance(exc, HTTPException):
        return exc.status_code
    return 500
