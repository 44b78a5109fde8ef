"""The dashboard's actions (POST, plain forms, each with its CSRF field): log in and out,
pause and resume, purge (confirmed by typing the queue's name), requeue DLQ messages (those
ticked, or all), change settings, mint and revoke keys. Each runs the service method the API's
route runs, after the API's own scope check of the cookie's key (``admin``), and answers with
a redirect (303) back to the page, or a page of its own."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

import msgspec
from litestar import post
from litestar.response import Redirect, Template

from sqew import errors, models, queue_settings
from sqew.server import wire
from sqew.server.routes.keys import KeyIdPath
from sqew.server.runtime import runtime
from sqew.server.ui import pages, session
from sqew.server.ui.session import Req

OPT = pages.OPT
KEY_MAX_AGE_S = 7 * 24 * 3600
"""How long a browser keeps the dashboard's key (it is checked on every request anyway)."""


def back(q: str, note: str) -> Redirect:
    """303 to the queue's page, with ``note`` shown on it."""
    return Redirect(path=f"/ui/queues/{quote(q)}?{urlencode({'note': note})}", status_code=303)


@post("/login", opt=OPT, include_in_schema=False, status_code=303, name="ui_login_post")
async def login(request: Req) -> Redirect | Template:
    """Check the key as the API would (any scope); keep it in the cookie."""
    form = await session.form_of(request)
    key = str(form.get("key") or "").strip()
    try:
        await session.principal(request, "read", key=key)
    except session.LoginNeeded as exc:
        return await pages.page(request, "login.html", status=401, error=exc.args[0])
    response = Redirect(path="/ui/", status_code=303)
    response.set_cookie(session.cookie(request, session.KEY_COOKIE, key,
                                       max_age=KEY_MAX_AGE_S))
    return response


@post("/logout", opt=OPT, include_in_schema=False, status_code=303, name="ui_logout")
async def logout(request: Req) -> Redirect:
    """Forget the key."""
    await session.form_of(request)
    response = Redirect(path="/ui/login", status_code=303)
    response.delete_cookie(session.KEY_COOKIE, path=session.PATH)
    return response


@post("/queues/{q:str}/pause", opt=OPT, include_in_schema=False, status_code=303,
      name="ui_pause")
async def pause(request: Req, q: wire.QueuePath) -> Redirect:
    """Pause the queue's delivery."""
    await session.form_of(request)
    await session.principal(request, "admin", q)
    await runtime(request).service.set_paused(q, True)
    return back(q, "paused: polls get nothing until it is resumed")


@post("/queues/{q:str}/resume", opt=OPT, include_in_schema=False, status_code=303,
      name="ui_resume")
async def resume(request: Req, q: wire.QueuePath) -> Redirect:
    """Resume the queue's delivery."""
    await session.form_of(request)
    await session.principal(request, "admin", q)
    await runtime(request).service.set_paused(q, False)
    return back(q, "resumed")


@post("/queues/{q:str}/purge", opt=OPT, include_in_schema=False, status_code=303,
      name="ui_purge")
async def purge(request: Req, q: wire.QueuePath) -> Redirect:
    """Delete every message of the queue, once its name was typed to confirm."""
    form = await session.form_of(request)
    await session.principal(request, "admin", q)
    if form.get("confirm") != q:
        raise errors.ValidationError(
            f"type the queue's name ('{q}') in the confirmation field to purge it")
    n = await runtime(request).service.purge(q)
    return back(q, f"purged {n} message{'' if n == 1 else 's'}")


@post("/queues/{q:str}/dlq/requeue", opt=OPT, include_in_schema=False, status_code=303,
      name="ui_requeue")
async def requeue(request: Req, q: wire.QueuePath) -> Redirect:
    """Move the ticked DLQ messages (or, with ``all``, every one) back to the queue."""
    form = await session.form_of(request)
    await session.principal(request, "admin", q)
    ids: list[int] | None = None
    if not form.get("all"):
        try:
            ids = [int(i) for i in form.get("ids") or []]
        except ValueError as exc:
            raise errors.ValidationError("ids must be message ids") from exc
        if not ids:
            raise errors.ValidationError("tick the messages to requeue, or requeue all")
    done = await runtime(request).service.dlq_requeue(q, ids)
    note = f"requeued {done.requeued}" + (f" ({done.left} left: max_depth)" if done.left else "")
    return back(q, note)


@post("/queues/{q:str}/settings", opt=OPT, include_in_schema=False, status_code=303,
      name="ui_settings")
async def settings(request: Req, q: wire.QueuePath) -> Redirect:
    """Change the settings whose fields were filled in; the others stay."""
    form = await session.form_of(request)
    await session.principal(request, "admin", q)
    given: dict[str, Any] = {}
    for s in queue_settings.SETTINGS:
        if s.name == "hmac_secret":
            continue
        value = form.get(s.name)
        if s.type is bool:
            given[s.name] = value == "on"
        elif isinstance(value, str) and value.strip():
            given[s.name] = value.strip()
    try:
        update = msgspec.convert(given, models.QueueSettings, strict=False)
    except msgspec.ValidationError as exc:
        raise errors.ValidationError(str(exc)) from exc
    await runtime(request).service.update_queue(q, update)
    return back(q, "settings saved")


@post("/keys", opt=OPT, include_in_schema=False, status_code=200, name="ui_mint")
async def mint(request: Req) -> Template:
    """Mint a key and show it, this once."""
    form = await session.form_of(request)
    who = await session.principal(request, "admin")
    scopes = [s for s in ("produce", "consume", "admin") if form.get(f"scope_{s}") == "on"]
    try:
        spec = msgspec.convert({
            "name": str(form.get("name") or "").strip() or None,
            "queue": str(form.get("queue") or "").strip() or None,
            "scopes": scopes,
        }, models.KeyCreate)
    except msgspec.ValidationError as exc:  # no scope ticked, a name too long, …
        raise errors.ValidationError(str(exc)) from exc
    rt = runtime(request)
    created = await rt.service.create_key(spec)
    rt.auth.minted()
    listed = await rt.service.list_keys()
    return await pages.page(request, "keys.html", keys=listed, principal=who, admin=True,
                            created=created)


@post("/keys/{key_id:str}/revoke", opt=OPT, include_in_schema=False, status_code=303,
      name="ui_revoke")
async def revoke(request: Req, key_id: KeyIdPath) -> Redirect:
    """Revoke a key."""
    await session.form_of(request)
    await session.principal(request, "admin")
    rt = runtime(request)
    await rt.service.revoke_key(key_id)
    rt.auth.revoked(key_id)
    return Redirect(path="/ui/keys", status_code=303)
