"""Who uses the dashboard, and CSRF: the key kept in a cookie, checked as the API checks it.

The key is entered once on the login page and kept in ``sqew_ui_key``: HttpOnly (no script
reads it), ``SameSite=Strict`` (no other site's page sends it), ``Secure`` when the server
speaks TLS, scoped to ``/ui``. Each page and action hands that key to the same authenticator
and the same scope check as ``Authorization: Bearer`` on the API (``sqew.server.auth``):
overview ``read``, a queue's messages ``consume``, every action and the keys page ``admin``.
With no key in the database (and ``require_auth`` off) the API lets everyone in, and so does
the dashboard, saying so on every page.

CSRF: a double-submit token. ``sqew_ui_csrf`` holds a random value (set on the first page a
browser gets); every form carries it in a hidden field, and a POST whose field differs from
its cookie is refused (403) before anything runs. Another site can neither read the cookie
nor set it, so it cannot forge the field.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Any

from litestar import Request, Response
from litestar.datastructures import Cookie
from litestar.exceptions import HTTPException

from sqew import errors
from sqew.core import keys
from sqew.server import auth
from sqew.server.runtime import runtime

Req = Request[Any, Any, Any]
KEY_COOKIE = "sqew_ui_key"
CSRF_COOKIE = "sqew_ui_csrf"
CSRF_FIELD = "csrf"
PATH = "/ui"


class Refused(HTTPException):
    """A dashboard request refused (rendered as an HTML page by ``pages.refused``)."""


class LoginNeeded(Exception):
    """No key, or one that no longer works: the browser goes to the login page."""


def tls(request: Req) -> bool:
    """Whether the request came over TLS (the cookies are then ``Secure``)."""
    return request.scope.get("scheme") == "https"


def cookie(request: Req, name: str, value: str, *, max_age: int | None = None) -> Cookie:
    """A dashboard cookie: HttpOnly, SameSite=Strict, ``/ui`` only, Secure over TLS."""
    return Cookie(key=name, value=value, path=PATH, httponly=True, samesite="strict",
                  secure=tls(request), max_age=max_age)


def csrf_token(request: Req) -> tuple[str, Cookie | None]:
    """The browser's CSRF token, and the cookie to set when it has none yet."""
    token = request.cookies.get(CSRF_COOKIE)
    if token and len(token) == 43:
        return token, None
    token = secrets.token_urlsafe(32)
    return token, cookie(request, CSRF_COOKIE, token)


async def form_of(request: Req) -> dict[str, Any]:
    """The POSTed form, once its CSRF field matches the cookie (else ``Refused`` 403)."""
    form = await request.form()
    sent = form.get(CSRF_FIELD)
    held = request.cookies.get(CSRF_COOKIE)
    if not isinstance(sent, str) or not held or not hmac.compare_digest(sent, held):
        raise Refused(status_code=403, detail="the form's CSRF token is missing or does not "
                      "match this browser's: reload the page and try again")
    return {k: form.getall(k) if k == "ids" else form.get(k) for k in form}


async def principal(request: Req, need: str, queue: str | None = None,
                    key: str | None = None) -> keys.Principal | None:
    """The principal of the dashboard's key (``key``, else the cookie's), allowed ``need``
    on ``queue`` exactly as the API decides; None when the server enforces no keys.

    Raises:
        LoginNeeded: keys are enforced and there is no key, or not a valid one.
        Refused: the key lacks the scope or the queue (403), or too many failed attempts
            from this address (429).
    """
    rt = runtime(request)
    key = key if key is not None else request.cookies.get(KEY_COOKIE)
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"authorization"]
    if key:
        headers.append((b"authorization", b"Bearer " + key.encode("ascii", "replace")))
    scope: Any = {**request.scope, "headers": headers}
    try:
        found = await rt.auth.authenticate(scope)
        if found is not None:
            auth.authorize(found, need, queue)
    except errors.Unauthorized as exc:
        raise LoginNeeded(exc.message) from exc
    except (errors.Forbidden, errors.RateLimited) as exc:
        raise Refused(status_code=exc.status, detail=exc.message) from exc
    return found


async def keys_enforced(request: Req) -> bool:
    """Whether the server enforces API keys now (the API's rule)."""
    return await runtime(request).auth.enforced()


def with_cookies(response: Response[Any], *cookies: Cookie | None) -> Response[Any]:
    """``response`` setting the given cookies (None: nothing)."""
    for c in cookies:
        if c is not None:
            response.set_cookie(c)
    return response
