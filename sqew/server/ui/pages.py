"""The dashboard's pages (GET): queues overview, a queue, the keys, login; and how a refusal
or an error is shown (an HTML page, never the API's JSON envelope)."""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Annotated, Any

import msgspec
from litestar import Response, get
from litestar.exceptions import HTTPException
from litestar.params import Parameter
from litestar.response import Redirect, Template

from sqew import errors, models, queue_settings
from sqew.escapes import escape_controls
from sqew.server import wire
from sqew.server.runtime import runtime
from sqew.server.ui import rates, session
from sqew.server.ui.session import Req

PAGE = 20
"""Messages per page on a queue's page (its queue and its DLQ each)."""
REFRESH_S = 5
"""The overview's auto-refresh (``<meta http-equiv=refresh>``: no script needed)."""
OPT = {"access": "open"}
"""The API's middleware consults no key here: each page checks the cookie's key itself
(``session.principal``), with the API's own authenticator and scope check."""


AfterId = Annotated[int, Parameter(ge=0, le=models.MAX_ID, description="page after this id")]
Note = Annotated[str | None, Parameter(max_length=200, description="what the last action did")]


def rates_of(request: Req) -> rates.Rates:
    """This app's rings of rate samples (made on first use)."""
    state = request.app.state
    found: rates.Rates | None = state.get("ui_rates")
    if found is None:
        found = state["ui_rates"] = rates.Rates()
    return found


async def page(request: Req, name: str, status: int = 200, **context: Any) -> Template:
    """The template ``name`` with the context every page has (CSRF token, whether keys are
    enforced, who is logged in), setting the CSRF cookie when the browser has none."""
    token, new = session.csrf_token(request)
    enforced = await session.keys_enforced(request)
    context.setdefault("principal", None)
    return Template(template_name=name, status_code=status, context={
        "csrf": token, "csrf_field": session.CSRF_FIELD, "enforced": enforced,
        "logged_in": bool(request.cookies.get(session.KEY_COOKIE)), **context,
    }, cookies=[new] if new is not None else [])


def is_admin(principal: Any, queue: str | None = None) -> bool:
    """Whether to offer the actions (they are checked again when posted)."""
    return principal is None or principal.allows("admin", queue)


@get("/", opt=OPT, include_in_schema=False, name="ui_queues")
async def overview(request: Req) -> Template:
    """Every queue the key reaches: depths, oldest age, paused, rate charts."""
    who = await session.principal(request, "read")
    stats = await runtime(request).service.all_stats()
    if who is not None and who.queue is not None:
        stats = [s for s in stats if who.reaches(s.queue)]
    ring = rates_of(request)
    ring.sample(stats)
    rows = []
    for s in stats:
        if s.queue.endswith(".dlq"):  # shown as its queue's DLQ depth
            continue
        enq, ack = ring.per_second(s.queue, "enqueued"), ring.per_second(s.queue, "acked")
        rows.append({"s": s, "enq": rates.sparkline(enq), "ack": rates.sparkline(ack),
                     "enq_now": enq[-1] if enq else None, "ack_now": ack[-1] if ack else None})
    return await page(request, "queues.html", rows=rows, principal=who,
                      refresh=REFRESH_S, admin=is_admin(who))


@get("/queues/{q:str}", opt=OPT, include_in_schema=False, name="ui_queue")
async def queue_page(request: Req, q: wire.QueuePath, after: AfterId = 0, dlq_after: AfterId = 0,
                     note: Note = None) -> Template:
    """A queue: settings, stats, a page of its messages and of its DLQ's, the actions."""
    who = await session.principal(request, "consume", q)
    service = runtime(request).service
    queue = await service.get_queue(q)
    shown = await service.scan(q, after_id=after, limit=PAGE)
    dlq = None
    if queue.dlq is not None:
        dlq = await service.scan(q, source="dlq", after_id=dlq_after, limit=PAGE)
    settings = [(s.name, getattr(queue, s.name), s,
                 "bool" if s.type is bool else "choice" if s.choices else "text")
                for s in queue_settings.SETTINGS if s.name != "hmac_secret"]
    return await page(
        request, "queue.html", queue=queue, stats=queue.stats, settings=settings,
        messages=[view(m) for m in shown.messages], next_after=shown.next_after_id,
        dlq=None if dlq is None else [view(m) for m in dlq.messages],
        dlq_next=None if dlq is None else dlq.next_after_id, after=after,
        dlq_after=dlq_after, note=note, principal=who, admin=is_admin(who, q),
    )


@get("/keys", opt=OPT, include_in_schema=False, name="ui_keys")
async def keys_page(request: Req) -> Template:
    """Every API key (admin): revoke, mint."""
    who = await session.principal(request, "admin")
    listed = await runtime(request).service.list_keys()
    return await page(request, "keys.html", keys=listed, principal=who, admin=True)


@get("/login", opt=OPT, include_in_schema=False, name="ui_login")
async def login_page(request: Req) -> Template:
    """The form where a key is entered once."""
    return await page(request, "login.html")


def view(m: models.ScannedMessage) -> dict[str, Any]:
    """A message as the templates show it: the payload pretty-printed, every string with its
    control characters made visible (the templates escape HTML)."""
    payload = m.payload
    try:
        value = json.loads(bytes(payload)) if isinstance(payload, msgspec.Raw) else payload
        text = json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(payload)
    return {
        "id": m.id, "state": m.state, "priority": m.priority, "attempts": m.attempts,
        "payload": "\n".join(escape_controls(line) for line in text.split("\n")),
        "attributes": {escape_controls(k): escape_controls(v) for k, v in m.attributes.items()},
        "last_error": None if m.last_error is None else escape_controls(m.last_error),
        "origin_queue": None if m.origin_queue is msgspec.UNSET else m.origin_queue,
        "enqueued_at": m.enqueued_at,
    }


def refused(request: Req, exc: Exception) -> Response[Any]:
    """A refusal or an error of a dashboard request, as a page of its own (status kept)."""
    if isinstance(exc, session.LoginNeeded):
        response: Response[Any] = Redirect(path="/ui/login", status_code=303)
        response.delete_cookie(session.KEY_COOKIE, path=session.PATH)
        return response
    if isinstance(exc, errors.SqewError):
        status, code, message = exc.status, exc.code, exc.message
    elif isinstance(exc, HTTPException):  # a refusal, a malformed query, a wrong method
        status, message = exc.status_code, str(exc.detail)
        code = HTTPStatus(status).phrase
    else:
        status, code, message = 500, "Internal", "the server failed to answer this page"
    token, new = session.csrf_token(request)
    return Template(template_name="error.html", status_code=status,
                    context={"code": code, "message": escape_controls(message),
                             "csrf": token, "csrf_field": session.CSRF_FIELD,
                             "enforced": True, "logged_in": False, "principal": None},
                    cookies=[new] if new is not None else [])

