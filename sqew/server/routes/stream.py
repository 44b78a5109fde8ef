"""``GET /queues/{q}/stream``: leased messages pushed as server-sent events
(docs/rest.md#the-stream; the stream itself is ``sqew.server.streams``)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get
from litestar.params import Parameter
from litestar.response import ServerSentEvent

from sqew import errors, models
from sqew.server import wire
from sqew.server.routes.messages import VisibilityMs
from sqew.server.runtime import runtime
from sqew.server.streams import Stream

Req = Request[Any, Any, Any]
MaxInFlight = Annotated[
    int, Parameter(ge=1, le=models.MAX_STREAM_IN_FLIGHT,
                   description="the most unacknowledged messages the stream holds"),
]


@get("/queues/{q:str}/stream", operation_id="streamMessages",
     summary="Lease messages as they come, as server-sent events",
     opt={"access": "consume", "errors": ("503",), "events": (
         "A comment line (`: open`) once the stream is open, then one event per leased "
         "message: `id:` its id, `data:` the leased message as a poll answers it (JSON, "
         "with its token); a comment (`: keep-alive`) after 15 s without an event; an "
         "`event: error` whose data is the error envelope ends the stream")})
async def stream(
    request: Req, q: wire.QueuePath, max_in_flight: MaxInFlight = models.DEFAULT_STREAM_IN_FLIGHT,
    visibility_ms: VisibilityMs = None,
) -> ServerSentEvent:
    """A ``text/event-stream`` of the queue's messages, each leased to this stream as it is
    ready and sent as an event: ``id:`` the message id, ``data:`` the leased message as a
    poll answers it (with its ``token``). Never more than ``max_in_flight`` unacknowledged:
    ack or nack through the usual endpoints to free a slot (a lease that ends frees one too).
    A comment line opens the stream and follows 15 s without an event. When the client
    disconnects, the leases the stream holds are given back at once (ready again, the
    attempt not counted). A stream counts as a waiting long poll (``max_waiting_polls``).
    An error after the stream began (the queue removed) is an ``error`` event whose data is
    the error envelope, and the stream ends."""
    rt = runtime(request)
    await rt.service.get_queue(q)  # QueueNotFound as an answer, before the stream begins
    if rt.waiting_polls >= rt.settings.max_waiting_polls:
        raise errors.Overloaded(
            f"{rt.waiting_polls} long polls and streams are waiting in this server process, "
            "the most it allows (max_waiting_polls): retry later", retry_after=1.0)
    session = Stream(rt, q, max_in_flight, visibility_ms, wire.client_gone(request))
    return ServerSentEvent(session.events())


HANDLERS = [stream]
