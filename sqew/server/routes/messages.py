"""Message endpoints: enqueue, poll, ack, nack, extend-lease, stats, peek, get, remove, purge.

Enqueue, ack and nack take one item or a batch (``{"messages"|"acks"|"nacks": [...]}``); a
single ack or nack that fails answers with the error codes, a batch with per-item statuses.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, delete, get, post
from litestar.params import HeaderParameter, Parameter, PathParameter
from litestar.types import ASGIApp

from sqew import errors, models
from sqew.core.service import item_error
from sqew.server.routes import MAX_ID
from sqew.server.runtime import JsonResponse, QueuePath, batch_key, decode, read_body, runtime

Req = Request[Any, Any, Any]
_MESSAGES = batch_key(b"messages")
_ACKS = batch_key(b"acks")
_NACKS = batch_key(b"nacks")

IdempotencyHeader = Annotated[
    str | None,
    HeaderParameter(name="Idempotency-Key", min_length=1, max_length=128,
                    pattern=models.IDEMPOTENCY_KEY_PATTERN,
                    description="idempotency_key of a single message"),
]
Batch = Annotated[int, Parameter(ge=1, le=models.MAX_POLL_BATCH, description="most messages")]
WaitMs = Annotated[int, Parameter(ge=0, le=models.MAX_WAIT_MS, description="long-poll wait")]
VisibilityMs = Annotated[
    int | None, Parameter(ge=0, le=43_200_000, description="lease length (default: the queue's)")
]
MessageIdParam = Annotated[int, PathParameter(ge=1, le=MAX_ID, description="message id")]
PeekLimit = Annotated[int, Parameter(ge=1, le=100, description="most messages")]


@post("/queues/{q:str}/messages", operation_id="enqueue", status_code=201,
      opt={"body": models.MessageIn | models.MessageBatchIn, "errors": ("429",),
           "returns": models.EnqueueResult | models.EnqueueBatchResult},
      summary="Enqueue messages")
async def enqueue(request: Req, q: QueuePath, idempotency_key: IdempotencyHeader = None) -> ASGIApp:
    """Enqueue one message, or ``{"messages": [...]}`` (≤ 1000, all or nothing)."""
    rt = runtime(request)
    body = await read_body(request, rt.settings.max_body_bytes)
    if _MESSAGES.match(body):
        if idempotency_key is not None:
            raise errors.ValidationError(
                "the Idempotency-Key header applies to a single message; "
                "give each message of a batch its idempotency_key",
                details=[{"field": "Idempotency-Key", "message": "not allowed with a batch"}],
            )
        batch = decode(body, models.MessageBatchIn)
        results = await rt.service.enqueue(q, batch.messages)
        return JsonResponse(models.EnqueueBatchResult(results), 201)
    message = decode(body, models.MessageIn)
    if idempotency_key is not None:
        message = _with_key(message, idempotency_key)
    (result,) = await rt.service.enqueue(q, [message])
    return JsonResponse(result, 201)


def _with_key(message: models.MessageIn, key: str) -> models.MessageIn:
    if message.idempotency_key not in (None, key):
        raise errors.ValidationError(
            "the Idempotency-Key header and the body's idempotency_key differ",
            details=[{"field": "idempotency_key", "message": "differs from Idempotency-Key"}],
        )
    return msgspec.structs.replace(message, idempotency_key=key)


@post("/queues/{q:str}/poll", operation_id="poll", status_code=200,
      opt={"returns": models.LeasedMessageList}, summary="Lease messages")
async def poll(
    request: Req, q: QueuePath, batch: Batch = 1, wait_ms: WaitMs = 0,
    visibility_ms: VisibilityMs = None,
) -> ASGIApp:
    """Lease up to ``batch`` ready messages, waiting up to ``wait_ms`` for one to arrive."""
    got = await runtime(request).poll(request, q, batch, wait_ms, visibility_ms)
    return JsonResponse(models.LeasedMessageList(got))


@post("/queues/{q:str}/ack", operation_id="ack", status_code=200,
      opt={"body": models.AckIn | models.AckBatchIn, "returns": models.ResultList},
      summary="Acknowledge messages")
async def ack(request: Req, q: QueuePath) -> ASGIApp:
    """Acknowledge ``{"id", "token"}`` or ``{"acks": [...]}`` (per-item statuses)."""
    rt = runtime(request)
    body = await read_body(request, rt.settings.max_body_bytes)
    if _ACKS.match(body):
        items = decode(body, models.AckBatchIn).acks
        acked = await rt.service.ack(q, [(a.id, a.token) for a in items])
        return JsonResponse(models.ResultList(acked))
    one = decode(body, models.AckIn)
    (result,) = await rt.service.ack(q, [(one.id, one.token)])
    if result.status != "acked":
        raise item_error(result)
    return JsonResponse(models.ResultList([result]))


@post("/queues/{q:str}/nack", operation_id="nack", status_code=200,
      opt={"body": models.NackIn | models.NackBatchIn}, summary="Release leases for a retry")
async def nack(request: Req, q: QueuePath) -> models.ResultList:
    """Nack ``{"id", "token", "delay_ms"?, "error"?}`` or ``{"nacks": [...]}``."""
    body = await request.body()
    rt = runtime(request)
    if _NACKS.match(body):
        items = decode(body, models.NackBatchIn).nacks
        return models.ResultList(await rt.service.nack(q, items))
    one = decode(body, models.NackIn)
    (result,) = await rt.service.nack(q, [one])
    if result.status in ("lease_lost", "not_found"):
        raise item_error(result)
    return models.ResultList([result])


@post("/queues/{q:str}/extend-lease", operation_id="extendLease", status_code=200,
      opt={"body": models.ExtendLeaseIn}, summary="Extend a lease (heartbeat)")
async def extend_lease(request: Req, q: QueuePath) -> models.LeaseExtended:
    """Set the lease of a held message to end ``ms`` from now."""
    item = decode(await request.body(), models.ExtendLeaseIn)
    rt = runtime(request)
    return await rt.service.extend_lease(q, item.id, item.token, item.ms)


@get("/queues/{q:str}/stats", operation_id="getStats", summary="Queue depths and counters")
async def stats(request: Req, q: QueuePath) -> models.Stats:
    """Depths (ready, delayed, leased, dlq) and lifetime counters of a queue."""
    rt = runtime(request)
    return await rt.service.stats(q)


@get("/queues/{q:str}/peek", operation_id="peek", summary="Look at the next ready messages")
async def peek(request: Req, q: QueuePath, limit: PeekLimit = 10) -> models.MessageList:
    """The next ready messages in delivery order, without leasing them."""
    rt = runtime(request)
    return models.MessageList(await rt.service.peek(q, limit))


@get("/queues/{q:str}/messages/{id:int}", operation_id="getMessage", summary="Get a message")
async def get_message(request: Req, q: QueuePath, id: MessageIdParam) -> models.Message:
    """One message of the queue by id."""
    rt = runtime(request)
    return await rt.service.get_message(q, id)


@delete("/queues/{q:str}/messages/{id:int}", operation_id="removeMessage", status_code=204,
        summary="Remove a message")
async def remove_message(request: Req, q: QueuePath, id: MessageIdParam) -> None:
    """Delete one message by id, whatever its state."""
    rt = runtime(request)
    await rt.service.remove_message(q, id)


@post("/queues/{q:str}/purge", operation_id="purgeQueue", status_code=200,
      summary="Delete every message of a queue")
async def purge(request: Req, q: QueuePath) -> models.Purged:
    """Delete every message of the queue (its DLQ is kept)."""
    rt = runtime(request)
    return models.Purged(await rt.service.purge(q))


HANDLERS = [enqueue, poll, ack, nack, extend_lease, stats, peek, get_message, remove_message,
            purge]
