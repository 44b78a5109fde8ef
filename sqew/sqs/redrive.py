"""Dead-letter queues seen from SQS (docs/sqs.md): ListDeadLetterSourceQueues and the
``RedriveAllowPolicy`` attribute, and the pages both listing actions answer.

A queue ``x`` dead-letters into its own ``x.dlq`` unless its ``RedrivePolicy`` names another
queue (the core's dead-letter target, ``sqew.core.dead_letters``). A ``RedriveAllowPolicy``
(kept in the queue's SQS data) says which queues may name the queue as their dead-letter
target: a RedrivePolicy that names a queue whose policy does not allow it is refused.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from sqew import errors
from sqew.core import rules
from sqew.sqs import fifo, inputs
from sqew.sqs.errors import SqsError, invalid
from sqew.sqs.urls import Context, queue_name

Params = dict[str, Any]
MAX_LIST = 1000
MAX_SOURCE_ARNS = 10
PERMISSIONS = ("allowAll", "denyAll", "byQueue")


def page(names: list[str], p: Params, ctx: Context, key: str) -> Params:
    """One page of queue URLs of the sorted ``names`` (under ``key``): ``MaxResults`` (1-1000)
    of them after ``NextToken``, with a ``NextToken`` when there are more."""
    most: int | None = p.get("MaxResults")
    if most is not None and not 1 <= most <= MAX_LIST:
        raise invalid(f"Value {most} for parameter MaxResults is invalid. Reason: MaxResults "
                      f"must be an integer between 1 and {MAX_LIST}.")
    if "NextToken" in p:
        after = _token_name(p["NextToken"])
        names = [n for n in names if n > after]
    shown = names[: most or MAX_LIST]
    out: Params = {key: [ctx.queue_url(n) for n in shown]}
    if most is not None and len(names) > len(shown):
        out["NextToken"] = base64.urlsafe_b64encode(shown[-1].encode()).decode()
    return out


def _token_name(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode("ascii")).decode()
    except (ValueError, UnicodeError, binascii.Error):
        raise invalid("Invalid NextToken value.") from None


async def list_dead_letter_source_queues(ctx: Context, p: Params) -> Params:
    """ListDeadLetterSourceQueues: the queues whose dead-letter queue is this one."""
    name = queue_name(p["QueueUrl"])
    await ctx.service.get_queue(name)  # (QueueDoesNotExist)
    return page(await ctx.service.dead_letter_sources(name), p, ctx, "queueUrls")


async def checked_target(ctx: Context, name: str, given: dict[str, str]) -> str | None:
    """The dead-letter target the attributes ``given`` of queue ``name`` name (None: they
    have no RedrivePolicy): an existing queue whose RedriveAllowPolicy lets ``name`` name it.

    Raises:
        SqsError: ``InvalidParameterValue``: no such queue, not of the source's type (FIFO
            or standard), or its policy does not allow it.
    """
    if "RedrivePolicy" not in given:
        return None
    value = given["RedrivePolicy"]
    target = target_of(ctx, name, value)
    try:
        data = await ctx.service.sqs_data(target)
    except errors.QueueNotFound:
        if target == rules.dlq_name(name):
            return target  # (a CreateQueue: made with the queue, with no policy yet)
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: Dead "
                      "letter target does not exist.") from None
    if fifo.is_fifo(target) != fifo.is_fifo(name):
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: "
                      "Dead-letter queue must be same type of queue as the source.")
    if not allows(ctx, data, name):
        raise invalid(f"Value {value} for parameter RedrivePolicy is invalid. Reason: the "
                      f"RedriveAllowPolicy of {target} does not allow {name} to name it as its "
                      "dead-letter queue.")
    return target


def check_allow_policy(ctx: Context, text: str) -> str:
    """A ``RedriveAllowPolicy`` value: ``redrivePermission`` one of allowAll, denyAll, byQueue;
    ``sourceQueueArns`` (1-10 ARNs of queues here) with byQueue only; ``""``: none.

    Raises:
        SqsError: ``InvalidAttributeValue``: anything else.
    """
    if text == "":
        return text
    policy = inputs.json_object(text)
    if policy is None or set(policy) - {"redrivePermission", "sourceQueueArns"}:
        raise _bad("it must be a JSON object of redrivePermission and sourceQueueArns")
    permission = policy.get("redrivePermission")
    if permission not in PERMISSIONS:
        raise _bad(f"redrivePermission must be one of {', '.join(PERMISSIONS)}")
    arns = policy.get("sourceQueueArns")
    if permission == "byQueue":
        if (not isinstance(arns, list) or not 1 <= len(arns) <= MAX_SOURCE_ARNS
                or not all(isinstance(a, str) for a in arns)):
            raise _bad(f"byQueue needs sourceQueueArns, 1 to {MAX_SOURCE_ARNS} queue ARNs")
        for arn in arns:
            ctx.name_of_arn(arn)
    elif arns is not None:
        raise _bad(f"sourceQueueArns goes with byQueue only, not {permission}")
    return text


def allows(ctx: Context, data: dict[str, Any], source: str) -> bool:
    """Whether a queue with SQS data ``data`` may be the dead-letter target of ``source``."""
    text = data.get("RedriveAllowPolicy")
    if not text:
        return True
    policy = msgspec.json.decode(text)
    permission = policy.get("redrivePermission")
    if permission == "denyAll":
        return False
    return permission != "byQueue" or ctx.arn(source) in policy.get("sourceQueueArns", [])


def target_of(ctx: Context, queue: str, value: str) -> str:
    """The dead-letter target a RedrivePolicy ``value`` of ``queue`` names (the queue's own
    ``<name>.dlq`` when it names none)."""
    return parse_policy(ctx, queue, value)[1]


def parse_policy(ctx: Context, queue: str, value: str) -> tuple[int, str]:
    """``maxReceiveCount`` of a RedrivePolicy and the name of its ``deadLetterTargetArn``
    (the queue's own DLQ if absent): a queue here other than ``queue`` itself."""
    if rules.is_dlq(queue):
        raise _bad_policy("a dead-letter queue has no dead-letter queue of its own")
    try:
        policy = msgspec.json.decode(value)
    except msgspec.DecodeError:
        policy = None
    if not isinstance(policy, dict) or set(policy) - {"deadLetterTargetArn", "maxReceiveCount"}:
        raise _bad_policy("it must be a JSON object of deadLetterTargetArn and maxReceiveCount")
    count = policy.get("maxReceiveCount")
    if isinstance(count, str) and count.isdigit():
        count = int(count)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 1000:
        raise _bad_policy("maxReceiveCount must be an integer from 1 to 1000")
    arn = policy.get("deadLetterTargetArn")
    target = rules.dlq_name(queue) if arn is None else ctx.name_of_arn(str(arn))
    if target == queue:
        raise _bad_policy("a queue cannot be its own dead-letter queue")
    return count, target


def _bad_policy(why: str) -> SqsError:
    return _bad(why, "RedrivePolicy")


def _bad(why: str, parameter: str = "RedriveAllowPolicy") -> SqsError:
    return SqsError("InvalidAttributeValue",
                    f"Invalid value for the parameter {parameter}: {why}.")


ACTIONS = {"ListDeadLetterSourceQueues": list_dead_letter_source_queues}
