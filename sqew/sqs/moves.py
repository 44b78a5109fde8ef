"""Message move tasks seen from SQS (docs/sqs.md): StartMessageMoveTask, ListMessageMoveTasks
and CancelMessageMoveTask, on the core's tasks (``sqew.core.move_tasks``), which the server
runs in the background, not in the request.
"""

from __future__ import annotations

from typing import Any

from sqew import errors
from sqew.core.move_tasks import RUNNING, MoveTask, TaskStateError
from sqew.sqs.errors import SqsError, invalid
from sqew.sqs.urls import Context

Params = dict[str, Any]
MAX_RATE = 500
"""The most messages a second a task may be asked to move (AWS's limit)."""
MAX_LISTED = 10


def _name(ctx: Context, p: Params, field: str) -> str:
    arn = p[field]
    try:
        return ctx.name_of_arn(arn)
    except SqsError:
        raise invalid(f"Value {arn} for parameter {field} is invalid. Reason: the ARN of a "
                      f"queue here starts with {ctx.arn('')}.") from None


def _missing(field: str) -> SqsError:
    return SqsError("ResourceNotFoundException",
                    f"The resource that you specified for the {field} parameter doesn't exist.")


async def start_message_move_task(ctx: Context, p: Params) -> Params:
    """StartMessageMoveTask: a task moving the messages of a dead-letter queue (``SourceArn``)
    to ``DestinationArn``, or each back to its origin queue."""
    source = _name(ctx, p, "SourceArn")
    destination = _name(ctx, p, "DestinationArn") if "DestinationArn" in p else None
    rate = p.get("MaxNumberOfMessagesPerSecond")
    if rate is not None and not 1 <= rate <= MAX_RATE:
        raise invalid(f"Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. "
                      f"Reason: it must be an integer from 1 to {MAX_RATE}.")
    try:
        await ctx.service.get_queue(source)
    except errors.QueueNotFound:
        raise _missing("SourceArn") from None
    try:
        task = await ctx.service.start_move_task(source, destination, rate)
    except errors.QueueNotFound:
        raise _missing("DestinationArn") from None
    except TaskStateError:
        raise SqsError("UnsupportedOperation", "Only one active message movement task is "
                       "supported per queue.") from None
    except errors.ValidationError as exc:
        raise invalid(f"Source queue must be configured as a Dead Letter Queue: "
                      f"{exc.message}.") from None
    return {"TaskHandle": task.handle}


def _entry(ctx: Context, task: MoveTask) -> Params:
    out: Params = {
        "Status": task.status, "SourceArn": ctx.arn(task.source),
        "ApproximateNumberOfMessagesMoved": task.moved,
        "ApproximateNumberOfMessagesToMove": task.to_move,
        "StartedTimestamp": task.started_at,
    }
    if task.status == RUNNING:  # (as on AWS: a finished task has no handle to cancel)
        out["TaskHandle"] = task.handle
    if task.destination is not None:
        out["DestinationArn"] = ctx.arn(task.destination)
    if task.max_per_s is not None:
        out["MaxNumberOfMessagesPerSecond"] = task.max_per_s
    if task.failure_reason is not None:
        out["FailureReason"] = task.failure_reason
    return out


async def list_message_move_tasks(ctx: Context, p: Params) -> Params:
    """ListMessageMoveTasks: the most recent tasks of a source queue (``MaxResults``, 1-10,
    default 1), newest first."""
    source = _name(ctx, p, "SourceArn")
    most = p.get("MaxResults", 1)
    if not 1 <= most <= MAX_LISTED:
        raise invalid(f"Value {most} for parameter MaxResults is invalid. Reason: it must be "
                      f"an integer from 1 to {MAX_LISTED}.")
    try:
        await ctx.service.get_queue(source)
    except errors.QueueNotFound:
        raise _missing("SourceArn") from None
    return {"Results": [_entry(ctx, t) for t in await ctx.service.move_tasks(source, most)]}


async def cancel_message_move_task(ctx: Context, p: Params) -> Params:
    """CancelMessageMoveTask: stop a running task; what it moved stays moved."""
    try:
        task = await ctx.service.cancel_move_task(p["TaskHandle"])
    except errors.NotFound:
        raise _missing("TaskHandle") from None
    except TaskStateError:
        raise SqsError("UnsupportedOperation", "Only active (RUNNING) message movement tasks "
                       "can be cancelled.") from None
    return {"ApproximateNumberOfMessagesMoved": task.moved}


ACTIONS = {
    "StartMessageMoveTask": start_message_move_task,
    "ListMessageMoveTasks": list_message_move_tasks,
    "CancelMessageMoveTask": cancel_message_move_task,
}
