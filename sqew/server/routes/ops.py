"""Operations endpoints: liveness, readiness (database and schema) and metrics."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response, get

from sqew import errors, models
from sqew.server.metrics import CONTENT_TYPE
from sqew.server.runtime import runtime

log = logging.getLogger("sqew.server")

Req = Request[Any, Any, Any]


@get("/healthz", operation_id="healthz", summary="Liveness", opt={"access": "open"})
async def healthz() -> models.Health:
    """``{"status": "ok"}`` while the process serves (the database is not consulted)."""
    return models.Health("ok")


@get("/readyz", operation_id="readyz", summary="Readiness", opt={"access": "open"})
async def readyz(request: Req) -> models.Readiness:
    """200 when the database answers and its schema is at the newest migration, else 503.

    An overloaded process (refusing enqueues, backpressure) stays ready: it still serves
    polls and acks, which is what drains it. The body says so.
    """
    rt = runtime(request)
    if rt.draining:
        raise errors.Unavailable("the server is shutting down")
    backend = rt.service.backend
    revision = await rt.offload(backend.schema_revision)
    if revision != backend.schema_head:
        raise errors.Unavailable(
            f"the database schema is at {revision}, not at {backend.schema_head}; "
            "run `sqew db upgrade`"
        )
    state = rt.service.pressure
    return models.Readiness(
        "ok", overloaded=bool(state and state.overloaded),
        overload_reasons=list(state.reasons) if state else [],
        reaper_leader=rt.background.leader,
    )


@get("/metrics", operation_id="metrics", media_type=CONTENT_TYPE, summary="Prometheus metrics",
     opt={"access": "metrics"})
async def metrics(request: Req) -> Response[bytes]:
    """Metrics in the Prometheus text format (docs/operations.md)."""
    rt = runtime(request)
    queues: list[models.Stats] | None
    try:
        queues = list(await rt.service.all_stats())
    except errors.Unavailable as exc:
        # The process's own metrics (requests, refusals, the reaper) matter most during an
        # outage: they are still served, and the queues' are marked missing.
        log.warning("metrics without the queues' figures: %s", exc.message)
        queues = None
    else:  # every queue's name: refusals held until their queue was known are counted now
        rt.metrics.queue_labels.settle(s.queue for s in queues)
    # Rendering thousands of samples takes milliseconds: on a thread, not on the loop.
    body = await rt.offload(lambda: rt.metrics.render(queues))
    return Response(content=body, media_type=CONTENT_TYPE)


HANDLERS = [healthz, readyz, metrics]
