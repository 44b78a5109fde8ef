"""API key endpoints: mint, list, revoke (docs/rest.md, "API keys")."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, delete, get, post
from litestar.params import PathParameter

from sqew import models
from sqew.server import wire
from sqew.server.runtime import runtime

Req = Request[Any, Any, Any]
KeyIdPath = Annotated[str, PathParameter(max_length=32, description="the key's id")]


@post("/keys", operation_id="createKey", status_code=201,
      opt={"access": "admin", "body": models.KeyCreate},
      summary="Mint an API key (shown this once)")
async def create_key(request: Req) -> models.KeyCreated:
    """Mint a key with ``scopes`` (optionally bound to ``queue``); the answer carries the key
    itself, which is never shown again."""
    rt = runtime(request)
    spec = await wire.read_json(request, models.KeyCreate, rt.settings)
    created = await rt.service.create_key(spec)
    rt.auth.minted()  # keys are enforced from now on in this process
    return created


@get("/keys", operation_id="listKeys", summary="List API keys", opt={"access": "admin"})
async def list_keys(request: Req) -> models.KeyList:
    """Every key's id, name, queue, scopes and times (never a key or its hash)."""
    return models.KeyList(await runtime(request).service.list_keys())


@delete("/keys/{id:str}", operation_id="revokeKey", status_code=204, summary="Revoke an API key",
        opt={"access": "admin"})
async def revoke_key(request: Req, id: KeyIdPath) -> None:
    """Remove a key; it stops working on every server process within a second."""
    rt = runtime(request)
    await rt.service.revoke_key(id)
    rt.auth.revoked(id)  # it stops working in this process now


HANDLERS = [create_key, list_keys, revoke_key]
