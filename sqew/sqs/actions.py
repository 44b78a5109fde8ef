"""SQS actions, one function per action, each calling ``QueueService`` (docs/sqs.md).

``ACTIONS`` maps an action's name to its function; ``run`` checks the input against the service
model and runs it. The queue actions are here; the message actions in ``sqew.sqs.messaging``.
An action of the model that sqew does not implement yet answers ``UnsupportedOperation``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from sqew import errors, models
from sqew.core import rules
from sqew.sqs import (
    attributes,
    batches,
    fifo,
    inputs,
    messaging,
    moves,
    permissions,
    redrive,
    tags,
)
from sqew.sqs.errors import SqsError, from_sqew, invalid
from sqew.sqs.urls import Context, queue_name

Params = dict[str, Any]
Action = Callable[[Context, Params], Awaitable[Params]]

_SQS_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")


async def run(ctx: Context, action: str, params: Any) -> Params:
    """Run ``action`` with ``params`` (the decoded request body).

    Raises:
        SqsError: the answer to anything wrong, sqew's own errors translated.
    """
    checked = inputs.check_input(action, params)
    fn = ACTIONS.get(action)
    if fn is None:
        raise SqsError("UnsupportedOperation", f"The action {action} is not supported yet.")
    try:
        return await fn(ctx, checked)
    except errors.SqewError as exc:
        raise from_sqew(exc) from exc


async def create_queue(ctx: Context, p: Params) -> Params:
    """CreateQueue: a new queue (and its DLQ) with the settings its attributes ask; an
    existing queue's URL when it has the same attributes, else ``QueueNameExists``."""
    name: str = p["QueueName"]
    given: dict[str, str] = p.get("Attributes", {})
    is_fifo = fifo.check_create(name, given)
    if len(name) > fifo.MAX_NAME or not _SQS_NAME.fullmatch(
            name[: -len(fifo.SUFFIX)] if is_fifo else name):
        raise invalid("Can only include alphanumeric characters, hyphens, or underscores. "
                      "1 to 80 in length")
    if not rules.is_queue_name(name):
        raise invalid(f"Queue name {name} is invalid: a sqew queue's name starts with a "
                      "letter or a digit")
    settings = attributes.to_settings(ctx, name, given)
    if is_fifo:
        settings["dedup_window_ms"] = fifo.DEDUP_WINDOW_MS
    data = {**attributes.data_of(given), **fifo.attribute_data(is_fifo, given, {})}
    target = await redrive.checked_target(ctx, name, given)
    given_tags = tags.check(p.get("tags", {}))
    if len(given_tags) > tags.MAX_TAGS:
        raise invalid(f"Too many tags added for queue {name}: a queue has at most "
                      f"{tags.MAX_TAGS} tags.")
    try:
        await ctx.service.create_queue(models.QueueCreate(name=name, **settings))
    except errors.QueueExists:
        # (As on AWS, the tags of a CreateQueue for an existing queue are not compared.)
        queue = await ctx.service.get_queue(name)
        if not attributes.same(ctx, queue, given, await ctx.service.sqs_data(name)):
            raise SqsError("QueueNameExists", f"A queue already exists with the same name "
                           f"({name}) and a different value for an attribute.") from None
        return {"QueueUrl": ctx.queue_url(name)}
    if target is not None:
        await ctx.service.set_dead_letter_target(name, target)
    if data or given_tags:
        new = {**data, **({"tags": given_tags} if given_tags else {})}
        await ctx.service.change_sqs_data(name, lambda _: new)
    return {"QueueUrl": ctx.queue_url(name)}


async def get_queue_url(ctx: Context, p: Params) -> Params:
    """GetQueueUrl: the URL of an existing queue."""
    name: str = p["QueueName"]
    if not rules.is_queue_name(name):
        raise SqsError("QueueDoesNotExist", "The specified queue does not exist.")
    await ctx.service.get_queue(name)
    return {"QueueUrl": ctx.queue_url(name)}


async def list_queues(ctx: Context, p: Params) -> Params:
    """ListQueues: URLs of the queues (DLQs too) by name, after ``QueueNamePrefix``; pages
    of ``MaxResults`` (1-1000) with a ``NextToken`` when there are more."""
    prefix: str = p.get("QueueNamePrefix", "")
    names = sorted(q.name for q in await ctx.service.list_queues()
                   if q.name.startswith(prefix) and (ctx.reaches is None or ctx.reaches(q.name)))
    out = redrive.page(names, p, ctx, "QueueUrls")
    return out if out["QueueUrls"] else {}


async def delete_queue(ctx: Context, p: Params) -> Params:
    """DeleteQueue: the queue, its DLQ and their messages."""
    await ctx.service.delete_queue(queue_name(p["QueueUrl"]))
    return {}


async def get_queue_attributes(ctx: Context, p: Params) -> Params:
    """GetQueueAttributes: the attributes named (``All``: every one)."""
    name = queue_name(p["QueueUrl"])
    queue = await ctx.service.get_queue(name)
    got = attributes.read(ctx, queue, p.get("AttributeNames", []),
                          await ctx.service.sqs_data(name))
    return {"Attributes": got} if got else {}


async def set_queue_attributes(ctx: Context, p: Params) -> Params:
    """SetQueueAttributes: the settings the attributes map to (``sqew.sqs.attributes``)."""
    name = queue_name(p["QueueUrl"])
    if "FifoQueue" in p["Attributes"]:  # (a queue's type is set once, by CreateQueue)
        raise SqsError("InvalidAttributeName", "Unknown Attribute FifoQueue.")
    settings = attributes.to_settings(ctx, name, p["Attributes"])
    data = attributes.data_of(p["Attributes"])
    if any(n in fifo.CHOICES for n in p["Attributes"]):
        data.update(fifo.attribute_data(fifo.is_fifo(name), p["Attributes"],
                                        await ctx.service.sqs_data(name)))
    target = await redrive.checked_target(ctx, name, p["Attributes"])
    await ctx.service.update_queue(name, models.QueueSettings(**settings))
    if target is not None:
        await ctx.service.set_dead_letter_target(name, target)
    if data:
        await ctx.service.change_sqs_data(name, lambda current: {**current, **data})
    return {}


async def purge_queue(ctx: Context, p: Params) -> Params:
    """PurgeQueue: every message of the queue (not of its DLQ)."""
    await ctx.service.purge(queue_name(p["QueueUrl"]))
    return {}


ACTIONS: dict[str, Action] = {
    "CreateQueue": create_queue,
    "GetQueueUrl": get_queue_url,
    "ListQueues": list_queues,
    "DeleteQueue": delete_queue,
    "GetQueueAttributes": get_queue_attributes,
    "SetQueueAttributes": set_queue_attributes,
    "PurgeQueue": purge_queue,
    **messaging.ACTIONS,
    **batches.ACTIONS,
    **tags.ACTIONS,
    **permissions.ACTIONS,
    **redrive.ACTIONS,
    **moves.ACTIONS,
}
"""The actions sqew implements, by name (the rest of the model's: ``UnsupportedOperation``)."""
