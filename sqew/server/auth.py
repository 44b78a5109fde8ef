"""API keys enforced on every endpoint (docs/rest.md, "Auth"): what each route needs, and the
middleware that checks it.

**What a route needs.** Every route handler declares it in ``opt["access"]``
(``sqew.server.route_access``): ``open`` (no key
consulted: /healthz, /readyz), ``read`` (any scope: a queue's settings and stats, the list of
queues), ``produce``, ``consume``, ``admin``, or ``metrics`` (``admin`` when the setting
``metrics_auth`` is on, else ``open``). ``check_routes`` makes ``create_app`` refuse a handler
that declares nothing, so no route can be added without deciding. Handlers Litestar adds itself
(the automatic OPTIONS answers) are open; anything else undeclared needs ``admin``.

**When.** Keys are enforced as soon as one exists in the database (looked up at most once a
second per process, and at once in the process that mints or revokes one), or always with the
setting ``require_auth``.

**How.** The middleware (``middleware``) runs after routing, before the handler reads anything:
``Authorization: Bearer <key>``; missing, malformed, wrong or revoked → 401 ``Unauthorized``
(with ``WWW-Authenticate: Bearer``), wrong scope or queue → 403 ``Forbidden``. The principal of
a key is left in the request's scope state (``principal_of``) for handlers and the access log
(which names the key of a 403 too: the state is set before the scope is checked).
It is an ASGI middleware and not a Litestar guard because Litestar copies the route handler for
every guard call, a cost on every request of the order of a whole statement of an enqueue. Who the
key is, without paying argon2 per request, is ``sqew.server.authenticator``'s job; failed
attempts per address are ``sqew.server.attempts``'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from litestar import Request
from litestar.enums import ScopeType
from litestar.handlers import BaseRouteHandler
from litestar.types import ASGIApp, Receive, Scope, Send

from sqew import errors
from sqew.core import keys, rules
from sqew.server.authenticator import Authenticator
from sqew.server.route_access import ACCESS

PRINCIPAL = "sqew.principal"
"""The key of the request's principal in the ASGI scope's ``state``."""
CHALLENGE = 'Bearer realm="sqew"'
"""``WWW-Authenticate`` of every 401 Unauthorized."""
REJECTED_BY_AUTH = "sqew.rejected_by_auth"
"""Set in the scope's ``state`` when this middleware refused the request (its 429 for failed
attempts too): the error handler counts it as an ``auth`` rejection."""


def check_routes(handlers: Iterable[BaseRouteHandler]) -> None:
    """Refuse handlers that do not declare what they need (``opt["access"]``).

    Raises:
        RuntimeError: a handler declares nothing, or something unknown.
    """
    bad = [f"{h.handler_name} ({h.paths})" for h in handlers
           if h.opt.get("access") not in ACCESS]
    if bad:
        raise RuntimeError(
            "every route must declare opt={'access': one of " + ", ".join(sorted(ACCESS))
            + "}; these do not: " + "; ".join(bad)
        )


def principal_of(request: Request[Any, Any, Any]) -> keys.Principal | None:
    """The key the request was accepted with (None: no key was needed or checked)."""
    principal: keys.Principal | None = request.scope["state"].get(PRINCIPAL)
    return principal


def middleware(auth_of: Callable[[Scope], Authenticator]) -> Callable[[ASGIApp], ASGIApp]:
    """The ASGI middleware (for ``Litestar(middleware=...)``) that enforces the request's
    ``auth_of(scope)``."""

    def wrap(app: ASGIApp) -> ASGIApp:
        async def enforce(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == ScopeType.HTTP:
                auth = auth_of(scope)
                need = auth.need_of(scope["route_handler"])
                if need != "open":
                    try:
                        principal = await auth.authenticate(scope)
                        if principal is not None:
                            authorize(principal, need, scope["path_params"].get("q"))
                    except errors.SqewError:
                        scope["state"][REJECTED_BY_AUTH] = True
                        raise
                    if principal is not None:
                        scope["state"][PRINCIPAL] = principal
                        authorize(principal, need, scope["path_params"].get("q"))
            await app(scope, receive, send)

        return enforce

    return wrap


def authorize(principal: keys.Principal, need: str, queue: str | None) -> None:
    """Raise Forbidden unless ``principal`` may do what needs ``need`` on ``queue``."""
    if principal.allows(need, queue):  # type: ignore[arg-type]  # need is a keys.Need here
        return
    who = f"API key {principal.key_id}"
    if need == "produce" and queue is not None and rules.is_dlq(queue) \
            and principal.reaches(queue):
        raise errors.Forbidden(f"{who}: an enqueue into a dead-letter queue needs the admin "
                               "scope")
    if queue is not None and not principal.reaches(queue):
        raise errors.Forbidden(f"{who} is bound to queue '{principal.queue}' and cannot act on "
                               f"queue '{queue}'")
    if queue is None and principal.queue is not None:
        raise errors.Forbidden(f"{who} is bound to queue '{principal.queue}'; this needs a key "
                               "bound to no queue")
    raise errors.Forbidden(f"{who} lacks the {need} scope (it has: "
                           f"{', '.join(sorted(principal.scopes))})")

