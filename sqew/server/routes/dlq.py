"""Dead-letter queue endpoints of a queue: list, requeue, purge."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get, post
from litestar.params import Parameter

from sqew import models
from sqew.server import wire
from sqew.server.runtime import runtime

Req = Request[Any, Any, Any]
DlqLimit = Annotated[int, Parameter(ge=1, le=1000, description="most messages")]
AfterId = Annotated[
    int | None, Parameter(ge=0, le=models.MAX_ID, description="list messages with a larger id")
]


@get("/queues/{q:str}/dlq", operation_id="listDlq", summary="List dead-lettered messages",
     opt={"access": "consume", "refusals": {"400": wire.NAMES_A_DLQ}})
async def list_dlq(
    request: Req, q: wire.QueuePath, limit: DlqLimit = 100, after_id: AfterId = None
) -> models.MessageList:
    """Messages in the queue's DLQ by id, after ``after_id`` (for paging)."""
    rt = runtime(request)
    return models.MessageList(await rt.service.dlq_list(q, limit, after_id))


@post("/queues/{q:str}/dlq/requeue", operation_id="requeueDlq", status_code=200,
      opt={"access": "admin", "body": models.RequeueIn, "body_optional": True,
           "refusals": {"400": wire.NAMES_A_DLQ}},
      summary="Move dead-lettered messages back to their queue")
async def requeue_dlq(request: Req, q: wire.QueuePath) -> models.Requeued:
    """Move DLQ messages (all, or ``{"ids": [...]}``) back with attempts reset to 0.

    The queue's ``max_depth`` admits them: as many move as fit, the smallest ids first, and
    ``left`` counts those that stay in the DLQ for want of room. Messages under a live lease
    stay until it ends; expired ones never move.
    """
    rt = runtime(request)
    body = await wire.read_body(request, rt.settings.max_body_bytes)
    ids = (wire.decode(body, models.RequeueIn, rt.settings.max_json_depth).ids if body.strip()
           else None)
    return await rt.service.dlq_requeue(q, ids)


@post("/queues/{q:str}/dlq/purge", operation_id="purgeDlq", status_code=200,
      summary="Delete every dead-lettered message",
      opt={"access": "admin", "refusals": {"400": wire.NAMES_A_DLQ}})
async def purge_dlq(request: Req, q: wire.QueuePath) -> models.Purged:
    """Delete every message of the queue's DLQ."""
    rt = runtime(request)
    return models.Purged(await rt.service.dlq_purge(q))


HANDLERS = [list_dlq, requeue_dlq, purge_dlq]
