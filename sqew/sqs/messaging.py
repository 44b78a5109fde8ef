"""The message actions: send, receive, delete, change visibility (docs/sqs.md).

Each calls ``QueueService``: a send is an enqueue (``sqew.sqs.envelope`` stores the parts), a
receive a poll (a long one with ``WaitTimeSeconds``), a delete an ack and a visibility change an
extend-lease, by the id and token in the receipt handle (``sqew.sqs.handles``). The batch
actions are in ``sqew.sqs.batches``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from sqew import models
from sqew.core import signing
from sqew.sqs import digests, envelope, fifo, handles, service, typed
from sqew.sqs.errors import SqsError, invalid
from sqew.sqs.typed import Attribute
from sqew.sqs.urls import Context, queue_name

Params = dict[str, Any]

MAX_RECEIVE = 10
MAX_WAIT_S = 20
MAX_VISIBILITY_S = 43_200
MAX_DELAY_S = 900
UNSIGNED = signing.Proof(None, b"")
"""What an SQS send offers a queue with an ``hmac_secret``: no ``X-Sqew-Signature``, so such a
queue refuses it (``AccessDenied``), as REST refuses an unsigned enqueue; a queue without a
secret takes it. (An SQS client has no way to sign sqew's way.)"""
MAX_MESSAGE_BYTES = 1_048_576
"""The largest message (body and attributes) SQS takes; a queue's ``MaximumMessageSize``
(its ``max_payload_bytes``) bounds the stored payload below it."""


def parts_of(p: Params) -> tuple[envelope.Parts, int]:
    """The checked parts of a message to send (a SendMessage or a batch entry) and its size.

    Raises:
        SqsError: ``InvalidMessageContents``, ``InvalidParameterValue``.
    """
    body: str = p["MessageBody"]
    if not body:
        raise invalid("The request must contain the parameter MessageBody.")
    typed.check_text(body, "the message body")
    attrs = typed.user_attributes(p.get("MessageAttributes"))
    size = len(body.encode()) + sum(a.size(n) for n, a in attrs.items())
    if size > MAX_MESSAGE_BYTES:
        raise invalid(f"One or more parameters are invalid. Reason: Message must be shorter "
                      f"than {MAX_MESSAGE_BYTES} bytes.")
    parts = envelope.Parts(body, attrs, typed.system_attributes(p.get("MessageSystemAttributes")),
                           p.get("MessageGroupId"))
    return parts, size


def delay_ms(p: Params, default_s: int = 0) -> int:
    """A send's ``DelaySeconds`` (0-900; ``default_s``, the queue's, when absent) in ms."""
    return seconds(p, "DelaySeconds", 0, MAX_DELAY_S, default_s) * 1000


DEFAULTS_MAX_AGE_MS = 1000
"""How old a server process's copy of a queue's ``DelaySeconds`` and
``ReceiveMessageWaitTimeSeconds`` may be when a send or receive uses it: a change made through
another process (another worker or replica) applies within this long, one made through this
process at once (``QueueService.recent_sqs_data``). AWS lets such changes take up to a minute
to reach every server; a second spares nearly every send and receive a read of its own."""


async def queue_default(ctx: Context, queue: str, name: str) -> int:
    """The queue-level ``DelaySeconds`` or ``ReceiveMessageWaitTimeSeconds`` of ``queue``
    (as of at most ``DEFAULTS_MAX_AGE_MS`` ago)."""
    value: int = (await ctx.service.recent_sqs_data(queue, DEFAULTS_MAX_AGE_MS)).get(name, 0)
    return value


def seconds(p: Params, name: str, low: int, high: int, default: int) -> int:
    """The integer ``p[name]`` (``default`` if absent), refused outside ``low``-``high``."""
    value: int = p.get(name, default)
    if not low <= value <= high:
        raise invalid(f"Value {value} for parameter {name} is invalid. Reason: Must be "
                      f"between {low} and {high}, if provided.")
    return value


def sent(parts: envelope.Parts, message_id: int) -> Params:
    """What a send answers for one message: its id and digests."""
    out: Params = {"MessageId": str(message_id), "MD5OfMessageBody": digests.of_body(parts.body)}
    if parts.attributes:
        out["MD5OfMessageAttributes"] = digests.of_attributes(parts.attributes)
    if parts.system:
        out["MD5OfMessageSystemAttributes"] = digests.of_attributes(parts.system)
    return out


def fifo_message(p: Params, parts: envelope.Parts, is_fifo: bool, data: Params,
                 max_depth: int) -> tuple[models.MessageIn, str | None]:
    """The sqew message of a send's checked ``parts`` to a queue (FIFO or not) whose SQS
    data is ``data``, and its ordered group (``sqew.sqs.fifo``: None on a standard queue)."""
    group, dedup = fifo.check_send(is_fifo, p, data)
    key = None
    if group is not None and dedup is not None:
        parts.dedup_id = dedup
        key = fifo.idempotency_key(group, dedup, data)
    delay = delay_ms(p, data.get("DelaySeconds", 0))
    return envelope.to_message(parts, delay, max_depth, key), group


async def send_data(ctx: Context, name: str, p: Params) -> tuple[bool, Params]:
    """Whether queue ``name`` is FIFO, and the SQS data a send to it needs (its delay
    and, on a FIFO queue, its deduplication), as of at most ``DEFAULTS_MAX_AGE_MS`` ago;
    read only when needed."""
    is_fifo = fifo.is_fifo(name)
    need = is_fifo or "DelaySeconds" not in p
    return is_fifo, (await ctx.service.recent_sqs_data(name, DEFAULTS_MAX_AGE_MS)) if need else {}


def sent_fifo(parts: envelope.Parts, message_id: int, is_fifo: bool) -> Params:
    """``sent``, with the message's ``SequenceNumber`` on a FIFO queue."""
    out = sent(parts, message_id)
    if is_fifo:
        out["SequenceNumber"] = fifo.sequence_number(message_id)
    return out


async def send_message(ctx: Context, p: Params) -> Params:
    """SendMessage: enqueue the body with its attributes, delayed by ``DelaySeconds`` (on a
    FIFO queue, in its group, deduplicated: a duplicate answers the first's id)."""
    name = queue_name(p["QueueUrl"])
    parts, _ = parts_of(p)
    is_fifo, data = await send_data(ctx, name, p)
    message, group = fifo_message(p, parts, is_fifo, data, ctx.max_json_depth)
    (result,) = await ctx.service.enqueue(name, [message], UNSIGNED,
                                          [group] if is_fifo else None)
    return sent_fifo(parts, result.message_id, is_fifo)


async def receive_message(ctx: Context, p: Params) -> Params:
    """ReceiveMessage: lease up to ``MaxNumberOfMessages`` (1-10), waiting up to
    ``WaitTimeSeconds`` (0-20) for the first; the system attributes and message attributes
    asked for come with each."""
    name = queue_name(p["QueueUrl"])
    most = seconds(p, "MaxNumberOfMessages", 1, MAX_RECEIVE, 1)
    wait = seconds(p, "WaitTimeSeconds", 0, MAX_WAIT_S, 0) if "WaitTimeSeconds" in p else (
        await queue_default(ctx, name, "ReceiveMessageWaitTimeSeconds"))
    visibility = p.get("VisibilityTimeout")
    if visibility is not None:
        visibility = seconds(p, "VisibilityTimeout", 0, MAX_VISIBILITY_S, 0) * 1000
    wanted = _system_names(p)
    prefixes = [typed.check_name(n[:-2]) + "." if n.endswith(".*") and n != ".*" else n
                for n in p.get("MessageAttributeNames", [])]
    got = await ctx.service.poll(name, batch=most, wait_ms=wait * 1000,
                                 visibility_ms=visibility, gone=ctx.gone)
    received = [_received(ctx, name, m, wanted, prefixes) for m in got]
    return {"Messages": received} if received else {}


def _system_names(p: Params) -> set[str]:
    """The system attributes asked for, by either parameter (``AttributeNames`` is modelled as
    queue attribute names, but SQS reads message system attribute names there)."""
    names = set(p.get("AttributeNames", [])) | set(p.get("MessageSystemAttributeNames", []))
    for name in names:
        if name not in _known_names():
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
    return names


@functools.cache
def _known_names() -> frozenset[str]:
    """Every name ``_system_names`` takes (the model's, read once)."""
    return frozenset(service.enum("MessageSystemAttributeName")) | frozenset(
        service.enum("QueueAttributeName"))


def _received(ctx: Context, queue: str, m: models.LeasedMessage, wanted: set[str],
              prefixes: list[str]) -> Params:
    parts = envelope.from_message(m)
    out: Params = {
        "MessageId": str(m.id), "ReceiptHandle": handles.make(queue, m.id, m.token),
        "MD5OfBody": digests.of_body(parts.body), "Body": parts.body,
    }
    system = {"SenderId": ctx.account, "SentTimestamp": str(m.enqueued_at),
              "ApproximateReceiveCount": str(m.attempts)}
    if isinstance(m.first_leased_at, int):
        system["ApproximateFirstReceiveTimestamp"] = str(m.first_leased_at)
    system.update({n: a.text for n, a in parts.system.items()})
    if parts.group_id is not None:
        system["MessageGroupId"] = parts.group_id
    if parts.dedup_id is not None:
        system["MessageDeduplicationId"] = parts.dedup_id
    if fifo.is_fifo(queue):
        system["SequenceNumber"] = fifo.sequence_number(m.id)
    if isinstance(m.origin_queue, str):
        system["DeadLetterQueueSourceArn"] = ctx.arn(m.origin_queue)
    chosen = system if "All" in wanted else {k: v for k, v in system.items() if k in wanted}
    if chosen:
        out["Attributes"] = chosen
    attrs = _chosen(parts.attributes, prefixes)
    if attrs:
        out["MessageAttributes"] = {n: a.to_wire() for n, a in attrs.items()}
        out["MD5OfMessageAttributes"] = digests.of_attributes(attrs)
    return out


def _chosen(attrs: dict[str, Attribute], asked: list[str]) -> dict[str, Attribute]:
    """The message attributes ``MessageAttributeNames`` asks for: ``All`` or ``.*`` every
    one, ``prefix.*`` those under ``prefix.``, else by name."""
    if "All" in asked or ".*" in asked:
        return attrs
    return {n: a for n, a in attrs.items()
            if any(n == x or (x.endswith(".") and n.startswith(x)) for x in asked)}


async def delete_message(ctx: Context, p: Params) -> Params:
    """DeleteMessage: ack the message by its receipt handle. As on SQS, a handle whose
    message is gone or was received again since succeeds and deletes nothing."""
    name = queue_name(p["QueueUrl"])
    handle = handles.read(p["ReceiptHandle"], name)
    await ctx.service.ack(name, [(handle.id, handle.token)])
    return {}


async def change_message_visibility(ctx: Context, p: Params) -> Params:
    """ChangeMessageVisibility: the message becomes visible ``VisibilityTimeout`` (0-43200)
    seconds from now (an extend-lease)."""
    name = queue_name(p["QueueUrl"])
    handle = handles.read(p["ReceiptHandle"], name)
    ms = seconds(p, "VisibilityTimeout", 0, MAX_VISIBILITY_S, 0) * 1000
    (result,) = await ctx.service.extend_leases(name, [(handle.id, handle.token, ms)])
    raise_for(result.status, p["ReceiptHandle"])
    return {}


def raise_for(status: str, handle: str) -> None:
    """Raise what SQS answers a visibility change whose extend-lease ended in ``status``:
    ``MessageNotInflight`` when the message was received again since (its lease moved on),
    ``InvalidParameterValue`` when it is gone."""
    if status == "extended":
        return
    if status == "lease_lost":
        raise SqsError("MessageNotInflight", "The message referred to isn't in flight.")
    raise invalid(f"Value {handle[:100]} for parameter ReceiptHandle is invalid. Reason: "
                  "Message does not exist or is not available for visibility timeout change.")


Action = Callable[[Context, Params], Awaitable[Params]]
ACTIONS: dict[str, Action] = {
    "SendMessage": send_message,
    "ReceiveMessage": receive_message,
    "DeleteMessage": delete_message,
    "ChangeMessageVisibility": change_message_visibility,
}
