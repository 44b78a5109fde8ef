"""Message endpoints: enqueue, poll, ack, nack, extend-lease, stats, peek, get, remove, purge.

Enqueue, ack, nack and extend-lease take one item or a batch (``{"messages"|"acks"|"nacks"|
"extends": [...]}``); a single ack, nack or extend-lease that fails answers with the error
codes, a batch with per-item statuses.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, delete, get, post
from litestar.params import HeaderParameter, Parameter, PathParameter
from litestar.types import ASGIApp

from sqew import errors, models, telemetry
from sqew.core import signing
from sqew.server import wire
from sqew.server.runtime import runtime
from sqew.server.wire import JsonResponse

Req = Request[Any, Any, Any]
_MESSAGES = wire.batch_key(b"messages")
_ACKS = wire.batch_key(b"acks")
_NACKS = wire.batch_key(b"nacks")
_EXTENDS = wire.batch_key(b"extends")

IDEMPOTENCY_HEADER = "Idempotency-Key"
_IDEMPOTENCY_HEADER = IDEMPOTENCY_HEADER.lower().encode()
_KEY_RULE = f"{IDEMPOTENCY_HEADER} must be 1-128 printable ASCII characters"
# Checked by the handler (``_idempotency_key``), not by Litestar: its message would show the
# pattern, escaped, and it takes the first of repeated headers without a word. The schema still
# says what a key may be.
IdempotencyHeader = Annotated[
    str | None,
    HeaderParameter(name=IDEMPOTENCY_HEADER, description="idempotency_key of a single message",
                    schema_extra={"min_length": 1, "max_length": 128,
                                  "pattern": models.IDEMPOTENCY_KEY_PATTERN}),
]
_SIGNATURE_HEADER = signing.HEADER.lower().encode()
# Read by the handler from the raw headers (``_signature``), so that a repeated header is seen
# (and refused as malformed) rather than reduced to its first value.
SignatureHeader = Annotated[
    str | None,
    HeaderParameter(name=signing.HEADER, description=(
        "Required on a queue with an hmac_secret: t=<unix seconds>,v1=<hex "
        "HMAC-SHA256(secret, \"<t>.\" + the raw body)>, t within 300 s of the server's "
        f"time; up to {models.SIGNATURE_MAX_V1} v1= (one must match). A header of another "
        "form is refused on any queue, before anything else of the request is looked at "
        "(401 InvalidSignature); one of this form is checked only on a queue with a secret"),
        schema_extra={"pattern": models.SIGNATURE_PATTERN}),
]
# Read by the handler from the raw headers (``telemetry.request_context``), as W3C says: an invalid
# traceparent is ignored (and its tracestate with it), never refused. A signature covers the
# body only, so on a signed request these headers are not stored: anyone replaying a captured
# request could add them. Signed producers put trace context in the body's fields.
TraceparentHeader = Annotated[
    str | None,
    HeaderParameter(name="traceparent", description=(
        "W3C Trace Context of the producer: stored with the message (each message of a batch "
        "without a traceparent of its own) and returned on its leased message; the request's "
        "span continues this trace. An invalid traceparent is ignored (W3C); a later version's "
        "first four fields are read, stored as version 00. Not stored on a request with an "
        "X-Sqew-Signature (the signature does not cover headers): give the message a "
        "traceparent field instead")),
]
TracestateHeader = Annotated[
    str | None,
    HeaderParameter(name="tracestate", description=(
        "W3C tracestate, kept with a valid traceparent: repeated headers are one list; an "
        "invalid list is dropped, one past 512 characters cut by whole members")),
]
Batch = Annotated[int, Parameter(ge=1, le=models.MAX_POLL_BATCH, description="most messages")]
WaitMs = Annotated[int, Parameter(ge=0, le=models.MAX_WAIT_MS, description="long-poll wait")]
VisibilityMs = Annotated[
    int | None,
    Parameter(ge=0, le=models.MAX_VISIBILITY_MS, description="lease length (default: the queue's)"),
]
# Checked by the service, so a bad value reads the same from a server as from a local client.
PollOrderParam = Annotated[
    str, Parameter(description="priority: the head of the queue's order; shuffle: random "
                   "ready messages", schema_extra={"enum": list(models.POLL_ORDERS)}),
]
MessageIdParam = Annotated[
    int, PathParameter(ge=1, le=models.MAX_ID, description="message id")
]
PeekLimit = Annotated[int, Parameter(ge=1, le=100, description="most messages")]


@post("/queues/{q:str}/messages", operation_id="enqueue", status_code=201,
      opt={"access": "produce",
           "body": models.MessageIn | models.MessageBatchIn, "errors": ("429", "503"),
           "returns": models.EnqueueResult | models.EnqueueBatchResult,
           "refusals": {
               "400": "ValidationError: the Idempotency-Key header with a batch (give each "
                      "message its idempotency_key), or with an idempotency_key that differs "
                      "from it; a message's delay_ms not below its ttl_ms, or above the "
                      "queue's retention_ms (it would expire before it could be delivered)",
               "413": "PayloadTooLarge: a payload over the queue's max_payload_bytes, or a "
                      "body over the server's max_body_bytes",
           }},
      summary="Enqueue messages")
async def enqueue(
    request: Req, q: wire.QueuePath, idempotency_key: IdempotencyHeader = None,
    x_sqew_signature: SignatureHeader = None, traceparent: TraceparentHeader = None,
    tracestate: TracestateHeader = None,
) -> ASGIApp:
    """Enqueue one message, or ``{"messages": [...]}`` (≤ 1000, all or nothing).

    On a queue with an ``hmac_secret`` the request must carry a valid ``X-Sqew-Signature``
    over its exact body (a batch is signed as one body), else 401 ``InvalidSignature``.
    The checks, in order: the API key (401, 403, 429); the form of ``X-Sqew-Signature``, on
    any queue (401); the body's size (413), the ``Idempotency-Key`` header, the body (400);
    the queue (404); the signature against the queue's secret (401); each message against
    the queue's settings (400, 413); its quotas (429).
    A valid ``traceparent`` header (and ``tracestate``) is stored with each message that has
    no ``traceparent`` field of its own; an invalid one is ignored (``telemetry.request_context``),
    and so is any on a signed request (``X-Sqew-Signature``): the signature covers the body,
    not the headers.
    """
    rt = runtime(request)
    # A malformed signature is refused first, on any queue, whatever the body: a header of the
    # right form is checked against the secret by the service, on a queue with one.
    signature = None if x_sqew_signature is None else _signature(request)
    if signature is not None:
        signing.check_form(signature)
    body = await wire.read_body(request, rt.settings.max_body_bytes)
    proof = signing.Proof(signature, body)
    if idempotency_key is not None:
        idempotency_key = _idempotency_key(request)
    context = None if traceparent is None or x_sqew_signature is not None else (
        telemetry.request_context(request.scope["headers"]))
    if _MESSAGES.match(body):
        if idempotency_key is not None:
            raise errors.ValidationError(
                "the Idempotency-Key header applies to a single message; "
                "give each message of a batch its idempotency_key",
                details=[{"field": "Idempotency-Key", "message": "not allowed with a batch"}],
            )
        batch = wire.decode_batch(body, rt.settings.max_json_depth)
        messages = batch.messages
        if context is not None:
            messages = [_with_context(m, context) for m in messages]
        results = await rt.service.enqueue(q, messages, proof)
        rt.metrics.duplicates(q, sum(r.duplicate for r in results))
        return JsonResponse(models.EnqueueBatchResult(results), 201)
    message = wire.decode_message(body, rt.settings.max_json_depth)
    if idempotency_key is not None:
        message = _with_key(message, idempotency_key)
    if context is not None:
        message = _with_context(message, context)
    (result,) = await rt.service.enqueue(q, [message], proof)
    if result.duplicate:
        rt.metrics.duplicates(q, 1)
    return JsonResponse(result, 201)


def _idempotency_key(request: Req) -> str:
    """The request's one Idempotency-Key header, checked (only called when there is one)."""
    values = [v for k, v in request.scope["headers"] if k == _IDEMPOTENCY_HEADER]
    if len(values) != 1:
        raise errors.ValidationError(
            f"give one Idempotency-Key header, not {len(values)}",
            details=[{"field": IDEMPOTENCY_HEADER, "message": "repeated", "in": "header"}],
        )
    key = values[0]
    if not 1 <= len(key) <= 128 or not all(0x20 <= c <= 0x7E for c in key):
        raise errors.ValidationError(
            _KEY_RULE, details=[{"field": IDEMPOTENCY_HEADER, "message": _KEY_RULE,
                                 "in": "header"}],
        )
    return key.decode("ascii")


def _with_context(message: models.MessageIn, context: tuple[str, str | None]) -> models.MessageIn:
    """``message`` with the request's trace context, unless it has its own."""
    if message.traceparent is not None:
        return message
    return msgspec.structs.replace(message, traceparent=context[0], tracestate=context[1])


def _signature(request: Req) -> str:
    """The request's X-Sqew-Signature, repeated headers joined with "," as HTTP allows (which
    ``signing.parse`` refuses: two ``t=``)."""
    values = [v for k, v in request.scope["headers"] if k == _SIGNATURE_HEADER]
    return ",".join(v.decode("latin-1") for v in values)


def _with_key(message: models.MessageIn, key: str) -> models.MessageIn:
    if message.idempotency_key not in (None, key):
        raise errors.ValidationError(
            "the Idempotency-Key header and the body's idempotency_key differ",
            details=[{"field": "idempotency_key", "message": "differs from Idempotency-Key"}],
        )
    return msgspec.structs.replace(message, idempotency_key=key)


@post("/queues/{q:str}/poll", operation_id="poll", status_code=200,
      opt={"access": "consume", "returns": models.LeasedMessageList, "errors": ("503",)},
      summary="Lease messages")
async def poll(
    request: Req, q: wire.QueuePath, batch: Batch = 1, wait_ms: WaitMs = 0,
    visibility_ms: VisibilityMs = None, order: PollOrderParam = "priority",
) -> ASGIApp:
    """Lease up to ``batch`` ready messages, waiting up to ``wait_ms`` for one to arrive."""
    rt = runtime(request)
    # A poll whose client has gone (wire.client_gone) leases nothing, at once or waiting.
    gone = wire.client_gone(request)
    if not wait_ms:
        got = await rt.service.poll(q, batch=batch, wait_ms=0, visibility_ms=visibility_ms,
                                    gone=gone, order=order)
        return JsonResponse(models.LeasedMessageList(got))
    # Waiting polls per process are bounded (max_waiting_polls): one more is told to come back
    # rather than answered empty, which would have its client poll again at once, in a loop.
    if rt.waiting_polls >= rt.settings.max_waiting_polls:
        raise errors.Overloaded(
            f"{rt.waiting_polls} long polls are waiting in this server process, the most it "
            "allows (max_waiting_polls): retry later", retry_after=1.0)
    rt.waiting_polls += 1
    rt.metrics.long_poll_started()
    try:
        call = rt.service.poll(q, batch=batch, wait_ms=wait_ms, visibility_ms=visibility_ms,
                               gone=gone, order=order)
        # A waiting poll ends at once when its client disconnects meanwhile.
        got = await wire.unless_disconnected(request, call) or []
    finally:
        rt.waiting_polls -= 1
        rt.metrics.long_poll_ended()
    return JsonResponse(models.LeasedMessageList(got))


@post("/queues/{q:str}/ack", operation_id="ack", status_code=200,
      opt={"access": "consume",
           "body": models.AckIn | models.AckBatchIn, "returns": models.ResultList},
      summary="Acknowledge messages")
async def ack(request: Req, q: wire.QueuePath) -> ASGIApp:
    """Acknowledge ``{"id", "token"}`` or ``{"acks": [...]}`` (per-item statuses)."""
    rt = runtime(request)
    body = await wire.read_body(request, rt.settings.max_body_bytes)
    if _ACKS.match(body):
        items = wire.decode(body, models.AckBatchIn, rt.settings.max_json_depth).acks
        acked = await rt.service.ack(q, [(a.id, a.token) for a in items])
        rt.streams.settled(q)
        return JsonResponse(models.ResultList(acked))
    one = wire.decode(body, models.AckIn, rt.settings.max_json_depth)
    (result,) = await rt.service.ack(q, [(one.id, one.token)])
    rt.streams.settled(q)  # a slot of a stream of this process may be free
    if result.status != "acked":
        raise errors.for_item(result.status, result.id)
    return JsonResponse(models.ResultList([result]))


@post("/queues/{q:str}/nack", operation_id="nack", status_code=200,
      opt={"access": "consume",
           "body": models.NackIn | models.NackBatchIn, "returns": models.ResultList},
      summary="Release leases for a retry, or dead-letter them")
async def nack(request: Req, q: wire.QueuePath) -> ASGIApp:
    """Nack ``{"id", "token", "delay_ms"?, "error"?, "dead_letter"?}`` or ``{"nacks": [...]}``
    (``dead_letter``: to the DLQ at once)."""
    rt = runtime(request)
    body = await wire.read_body(request, rt.settings.max_body_bytes)
    if _NACKS.match(body):
        items = wire.decode(body, models.NackBatchIn, rt.settings.max_json_depth).nacks
        results = await rt.service.nack(q, items)
        rt.streams.settled(q)
        return JsonResponse(models.ResultList(results))
    one = wire.decode(body, models.NackIn, rt.settings.max_json_depth)
    (result,) = await rt.service.nack(q, [one])
    rt.streams.settled(q)
    if result.status in errors.ITEM_ERRORS:
        raise errors.for_item(result.status, result.id)
    return JsonResponse(models.ResultList([result]))


@post("/queues/{q:str}/extend-lease", operation_id="extendLease", status_code=200,
      opt={"access": "consume", "body": models.ExtendLeaseIn | models.ExtendLeaseBatchIn,
           "returns": models.LeaseExtended | models.ResultList},
      summary="Extend leases (heartbeat)")
async def extend_lease(request: Req, q: wire.QueuePath) -> ASGIApp:
    """Set the lease of a held message to end ``ms`` from now: ``{"id", "token", "ms"}``
    (``{"id", "lease_expires_at"}``; a miss answers with the error codes), or
    ``{"extends": [...]}`` (per-item statuses)."""
    rt = runtime(request)
    body = await wire.read_body(request, rt.settings.max_body_bytes)
    if _EXTENDS.match(body):
        items = wire.decode(body, models.ExtendLeaseBatchIn, rt.settings.max_json_depth).extends
        results = await rt.service.extend_leases(q, [(e.id, e.token, e.ms) for e in items])
        return JsonResponse(models.ResultList(results))
    one = wire.decode(body, models.ExtendLeaseIn, rt.settings.max_json_depth)
    return JsonResponse(await rt.service.extend_lease(q, one.id, one.token, one.ms))


@get("/queues/{q:str}/stats", operation_id="getStats", summary="Queue depths and counters",
     opt={"access": "read"})
async def stats(request: Req, q: wire.QueuePath) -> models.Stats:
    """Depths (ready, delayed, leased, dlq) and lifetime counters of a queue."""
    rt = runtime(request)
    return await rt.service.stats(q)


@get("/queues/{q:str}/peek", operation_id="peek", summary="Look at the next ready messages",
     opt={"access": "consume"})
async def peek(request: Req, q: wire.QueuePath, limit: PeekLimit = 10) -> models.MessageList:
    """The next ready messages in delivery order, without leasing them."""
    rt = runtime(request)
    return models.MessageList(await rt.service.peek(q, limit))


# source=dlq reads the DLQ of the queue named: refused for a DLQ (which has none).
ScanSource = Annotated[
    str, Parameter(description="queue (every message, leased ones included), dlq or archive",
                   schema_extra={"enum": list(models.SCAN_SOURCES)}),
]
ScanLimit = Annotated[
    int, Parameter(ge=1, le=models.MAX_SCAN_LIMIT, description="most messages")
]
ScanAfterId = Annotated[
    int | None, Parameter(ge=0, le=models.MAX_ID, description="messages with a larger id")
]
ScanMaxId = Annotated[
    int | None, Parameter(ge=0, le=models.MAX_ID, description="messages with this id or less")
]


@get("/queues/{q:str}/messages", operation_id="scanMessages",
     summary="Page through a queue's messages by id (export)",
     opt={"access": "consume", "refusals": {"400": (
         "ValidationError: source=dlq, and q names a dead-letter queue (it has none): name "
         "its queue")}})
async def scan(
    request: Req, q: wire.QueuePath, source: ScanSource = "queue", after_id: ScanAfterId = None,
    max_id: ScanMaxId = None, limit: ScanLimit = 100,
) -> models.ScanPage:
    """Messages of the queue, its DLQ or its archive by id ascending, each with its
    ``state``; no lease, no side effect. ``next_after_id`` pages on (null: the last page)."""
    rt = runtime(request)
    return await rt.service.scan(q, source=source, after_id=after_id, max_id=max_id,
                                 limit=limit)


@get("/queues/{q:str}/messages/{id:int}", operation_id="getMessage", summary="Get a message",
     opt={"access": "consume"})
async def get_message(request: Req, q: wire.QueuePath, id: MessageIdParam) -> models.Message:
    """One message of the queue by id."""
    rt = runtime(request)
    return await rt.service.get_message(q, id)


@delete("/queues/{q:str}/messages/{id:int}", operation_id="removeMessage", status_code=204,
        summary="Remove a message", opt={"access": "admin"})
async def remove_message(request: Req, q: wire.QueuePath, id: MessageIdParam) -> None:
    """Delete one message by id, whatever its state."""
    rt = runtime(request)
    await rt.service.remove_message(q, id)


@post("/queues/{q:str}/purge", operation_id="purgeQueue", status_code=200,
      summary="Delete every message of a queue", opt={"access": "admin"})
async def purge(request: Req, q: wire.QueuePath) -> models.Purged:
    """Delete every message of the queue (its DLQ is kept)."""
    rt = runtime(request)
    return models.Purged(await rt.service.purge(q))


HANDLERS = [enqueue, poll, ack, nack, extend_lease, stats, peek, scan, get_message,
            remove_message,
            purge]
