"""Request ids and the access log: the outermost layer of the app, around its routing.

Every HTTP response carries ``X-Request-Id``: the request's own when it sent a sane one (1-128
characters of ``A-Z a-z 0-9 . _ : + / = -``), else 16 hex digits: 8 random per process and a
counter (unique without a system call per request; ids need not be secret). The id is kept in
the scope's state (``request_id_of``) for the error handler, which logs a 500's traceback under
it.

With the setting ``access_log``, each request is logged once it is answered, at info level on
``sqew.access`` (event ``request``): method, route *template* (``/queues/{q}/poll``, never the
path with its values, nor the query), status, duration in ms, queue, request id, key id and the
client's address. Never a key, a token, a secret or a payload: nothing of a request's headers
but its id, nothing of its body. uvicorn's own access log is off: one line per request.

It wraps the app's ASGI handler (``install``) rather than being one of Litestar's middlewares,
which run after routing: a request for an unknown path or a wrong method never reaches those,
and is logged here all the same (with no route).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from litestar.enums import ScopeType
from litestar.types import Message, Receive, Scope, Send

from sqew.server.auth import PRINCIPAL

if TYPE_CHECKING:
    from litestar import Litestar

REQUEST_ID = "sqew.request_id"
"""The key of the request's id in the ASGI scope's ``state``."""
HEADER = b"x-request-id"
_SANE = re.compile(rb"[A-Za-z0-9._:+/=-]{1,128}")
log = logging.getLogger("sqew.access")


def request_id_of(scope: Scope) -> str | None:
    """The id of the request of ``scope`` (None outside ``install``'s handler)."""
    state: dict[str, Any] = scope.get("state") or {}
    rid = state.get(REQUEST_ID)
    return rid if isinstance(rid, str) else None


class _Ids:
    """New request ids: a random prefix per process, then a counter (16 hex digits)."""

    def __init__(self) -> None:
        self.renew()
        os.register_at_fork(after_in_child=self.renew)  # a forked process: its own prefix

    def renew(self) -> None:
        self._prefix = os.urandom(4).hex()
        self._count = itertools.count()

    def new(self) -> str:
        return f"{self._prefix}{next(self._count) & 0xFFFFFFFF:08x}"


new_request_id = _Ids().new


def _incoming(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == HEADER:
            return value.decode("ascii") if _SANE.fullmatch(value) else None
    return None


def install(app: Litestar, *, access_log: bool) -> None:
    """Wrap ``app``'s ASGI handler: request ids always, the access log if ``access_log``."""
    inner = app.asgi_handler

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await inner(scope, receive, send)
            return
        started = time.perf_counter() if access_log else 0.0
        rid = _incoming(scope) or new_request_id()
        scope["state"][REQUEST_ID] = rid
        header = (HEADER, rid.encode("ascii"))
        status: int | None = None

        def send_with_id(message: Message) -> Awaitable[None]:
            # A plain function handing back send's awaitable: no coroutine per message.
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            return send(message)

        try:
            await inner(scope, receive, send_with_id)
        finally:
            if access_log and log.isEnabledFor(logging.INFO):
                _log(scope, rid, status, (time.perf_counter() - started) * 1000)

    app.asgi_handler = handle


def _log(scope: Scope, rid: str, status: int | None, duration_ms: float) -> None:
    route = scope.get("path_template") or None  # None: no route matched
    principal = scope["state"].get(PRINCIPAL)
    client = scope.get("client")
    method = str(scope.get("method", "-"))
    level = logging.WARNING if status is None or status >= 500 else logging.INFO
    # A record made and handled directly: Logger.log would also look up the caller's frame,
    # the better part of the cost of a line.
    log.handle(log.makeRecord(
        log.name, level, __file__, 0, "%s %s %s %.1f ms",
        (method, route or "-", status or "-", duration_ms), None, extra={
            "event": "request", "method": method, "route": route, "status": status,
            "duration_ms": round(duration_ms, 3),
            "queue": (scope.get("path_params") or {}).get("q"),
            "request_id": rid,
            "key_id": getattr(principal, "key_id", None),
            "client": client[0] if client else None,
        }))
