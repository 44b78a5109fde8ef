"""Queue tags: TagQueue, UntagQueue, ListQueueTags and the ``tags`` of CreateQueue (docs/sqs.md).

A queue's tags are kept in its SQS data (``sqew.core.sqs_data``) under ``tags``, with AWS's
limits: at most 50 per queue, keys of 1-128 characters, values of at most 256, and no key
starting with ``aws:`` (reserved for AWS's own tags).
"""

from __future__ import annotations

from typing import Any

from sqew import errors
from sqew.core.sqs_data import Data
from sqew.sqs.errors import SqsError, invalid
from sqew.sqs.urls import Context, queue_name

Params = dict[str, Any]
MAX_TAGS = 50
MAX_KEY = 128
MAX_VALUE = 256


def check(tags: dict[str, str]) -> dict[str, str]:
    """``tags`` checked against AWS's rules for one key and value.

    Raises:
        SqsError: ``InvalidParameterValue`` for a key or value AWS refuses.
    """
    for key, value in tags.items():
        if not 1 <= len(key) <= MAX_KEY:
            raise invalid(f"Tag keys must be between 1 and {MAX_KEY} characters in length.")
        if key.lower().startswith("aws:"):
            raise invalid(f"Tag key {key} is invalid: the prefix aws: is reserved.")
        if len(value) > MAX_VALUE:
            raise invalid(f"Tag values must be between 0 and {MAX_VALUE} characters in "
                          "length.")
    return tags


def added(name: str, tags: dict[str, str]) -> Any:
    """The change (``sqew.core.sqs_data.Change``) that adds ``tags`` to queue ``name``'s,
    refused when the queue would have more than 50."""
    def change(data: Data) -> Data:
        merged = {**data.get("tags", {}), **tags}
        if len(merged) > MAX_TAGS:
            # (sqew's own error: raised inside the core's transaction, which it rolls back)
            raise errors.ValidationError(f"Too many tags added for queue {name}: a queue has "
                                         f"at most {MAX_TAGS} tags.")
        return {**data, "tags": merged}

    return change


async def tag_queue(ctx: Context, p: Params) -> Params:
    """TagQueue: add tags to a queue (a key it has gets the new value)."""
    name = queue_name(p["QueueUrl"])
    tags = check(p["Tags"])
    if not tags:
        raise SqsError("MissingParameter", "The request must contain the parameter Tags.")
    await ctx.service.change_sqs_data(name, added(name, tags))
    return {}


async def untag_queue(ctx: Context, p: Params) -> Params:
    """UntagQueue: remove tags from a queue by key (a key it does not have is no error)."""
    name = queue_name(p["QueueUrl"])
    keys = set(p["TagKeys"])
    if not keys:
        raise SqsError("MissingParameter", "The request must contain the parameter TagKeys.")

    def change(data: Data) -> Data:
        left = {k: v for k, v in data.get("tags", {}).items() if k not in keys}
        return {**{k: v for k, v in data.items() if k != "tags"},
                **({"tags": left} if left else {})}

    await ctx.service.change_sqs_data(name, change)
    return {}


async def list_queue_tags(ctx: Context, p: Params) -> Params:
    """ListQueueTags: a queue's tags (no ``Tags`` when it has none)."""
    tags = (await ctx.service.sqs_data(queue_name(p["QueueUrl"]))).get("tags", {})
    return {"Tags": tags} if tags else {}


ACTIONS = {"TagQueue": tag_queue, "UntagQueue": untag_queue, "ListQueueTags": list_queue_tags}
