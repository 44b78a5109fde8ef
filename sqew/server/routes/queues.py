"""Queue endpoints: create, list, show (with stats), update, delete, pause and resume,
compact."""

from __future__ import annotations

from typing import Any

from litestar import Request, delete, get, patch, post

from sqew import models
from sqew.server import auth, wire
from sqew.server.runtime import runtime

Req = Request[Any, Any, Any]


@post("/queues", operation_id="createQueue", status_code=201,
      opt={"access": "admin", "body": models.QueueCreate, "refusals": {"400": (
          "ValidationError: backoff_max_ms (default 900000) is below backoff_base_ms "
          "(default 1000)")}},
      summary="Create a queue (and its dead-letter queue)")
async def create_queue(request: Req) -> models.Queue:
    """Create a queue named ``name`` with optional settings; its DLQ is ``name.dlq``."""
    rt = runtime(request)
    spec = await wire.read_json(request, models.QueueCreate, rt.settings)
    return await rt.service.create_queue(spec)


@get("/queues", operation_id="listQueues", summary="List queues", opt={"access": "read"})
async def list_queues(request: Req) -> models.QueueList:
    """Every queue, dead-letter queues included, by name (those the caller's key reaches)."""
    rt = runtime(request)
    listed = await rt.service.list_queues()
    principal = auth.principal_of(request)
    if principal is not None and principal.queue is not None:
        listed = [q for q in listed if principal.reaches(q.name)]
    return models.QueueList(listed)


@get("/queues/{q:str}", operation_id="getQueue", summary="Show a queue with its stats",
     opt={"access": "read"})
async def get_queue(request: Req, q: wire.QueuePath) -> models.Queue:
    """One queue's settings and its ``stats``."""
    rt = runtime(request)
    return await rt.service.get_queue(q)


@patch("/queues/{q:str}", operation_id="updateQueue",
       opt={"access": "admin", "body": models.QueueSettings, "refusals": {"400": (
           "ValidationError: backoff_max_ms would be below backoff_base_ms (the queue's "
           "current value stands for the one not given)")}},
       summary="Change queue settings")
async def update_queue(request: Req, q: wire.QueuePath) -> models.Queue:
    """Change some settings of a queue; the others keep their values."""
    rt = runtime(request)
    settings = await wire.read_json(request, models.QueueSettings, rt.settings)
    return await rt.service.update_queue(q, settings)


@delete("/queues/{q:str}", operation_id="deleteQueue", status_code=204,
        summary="Delete a queue, its DLQ and their messages",
        opt={"access": "admin", "refusals": {"400": (
            "ValidationError: q names a dead-letter queue (it is removed with its queue)")}})
async def delete_queue(request: Req, q: wire.QueuePath) -> None:
    """Remove a queue with its dead-letter queue and every message of both."""
    rt = runtime(request)
    await rt.service.delete_queue(q)
    rt.auth.queue_deleted(q)  # the keys bound to it went with it: they stop working here now


@post("/queues/{q:str}/pause", operation_id="pauseQueue", status_code=200,
      summary="Pause delivery: enqueues go on, polls return nothing", opt={"access": "admin"})
async def pause_queue(request: Req, q: wire.QueuePath) -> models.Queue:
    """Pause the queue's delivery: it still takes enqueues, but polls return nothing (long
    polls wait) until it is resumed. Pausing a paused queue changes nothing."""
    return await runtime(request).service.set_paused(q, True)


@post("/queues/{q:str}/resume", operation_id="resumeQueue", status_code=200,
      summary="Resume delivery of a paused queue", opt={"access": "admin"})
async def resume_queue(request: Req, q: wire.QueuePath) -> models.Queue:
    """Resume the queue's delivery; long polls waiting on it get its messages at once.
    Resuming a queue that is not paused changes nothing."""
    return await runtime(request).service.set_paused(q, False)


@post("/queues/{q:str}/compact", operation_id="compactQueue", status_code=200,
      summary="Remove expired messages and reclaim space", opt={"access": "admin"})
async def compact(request: Req, q: wire.QueuePath) -> models.Removed:
    """Remove expired messages and tombstones, then let the database reclaim space."""
    rt = runtime(request)
    return models.Removed(await rt.service.compact(q))


HANDLERS = [create_queue, list_queues, get_queue, update_queue, delete_queue, pause_queue,
            resume_queue, compact]
