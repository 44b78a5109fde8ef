"""Spans of the service: one per operation, one per database transaction.

Only a service built with a tracer (``QueueService(..., tracer=)``: a server whose tracing is
configured) is instrumented; without one nothing here runs, not even a check per call: the
service's methods and its writer are the plain ones.

- **Operations** (``instrument``): the public methods listed in ``KINDS`` are wrapped, on the
  instance, in a span named ``<operation> <queue>`` (messaging semantic conventions): enqueue
  is a PRODUCER span, poll a CONSUMER span that links to the producer of every message it
  leased (docs/rest.md, "Trace context").
- **Transactions**: ``TracedDirectWriter`` runs each transaction in a span, a child of the
  operation's. ``TracedGroupWriter`` (the server's group commit) gives a group's transaction
  one span: the child of its caller's span when one caller's operations fill the group, else
  a span of its own with a LINK to the span of every caller in it (a merged transaction serves
  several traces at once; being the child of one of them would be a lie to the others). A
  group none of whose callers is recorded (sampled out, or background work outside any span)
  has no span.
- **Reads** (``read_span``): a read transaction's span, around the read on its thread.

**Sampling.** Spans follow their parent's sampling decision, as the SDK's default sampler
(``parentbased_always_on``) and ``parentbased_traceidratio`` do, but sqew decides it before
asking the SDK: under a span that is not sampled (a request the server span's sampler left
out), no operation or transaction span is started at all, so a sampled-out request costs one
sampling decision (the server span's), not one per span.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    StatusCode,
    Tracer,
)

from sqew import telemetry
from sqew.backends.base import Backend, Waiter
from sqew.core.clock import Clock
from sqew.core.group_commit import GroupWriter, Item
from sqew.core.pressure import Pressure
from sqew.core.writer import NO_OBSERVER, DirectWriter, Offload, Op, WriteObserver

if TYPE_CHECKING:
    from sqew.core.service import QueueService

R = TypeVar("R")
T = TypeVar("T")

KINDS: dict[str, SpanKind] = {
    "enqueue": SpanKind.PRODUCER,
    "poll": SpanKind.CONSUMER,
    **{name: SpanKind.INTERNAL for name in (
        "ack", "nack", "extend_lease", "extend_leases", "create_queue", "list_queues",
        "get_queue", "update_queue", "delete_queue", "stats", "peek", "get_message",
        "remove_message", "purge", "scan", "dlq_list", "dlq_requeue", "dlq_purge", "compact",
        "reap", "create_key", "list_keys", "revoke_key",
    )},
}
"""The traced operations and their span kinds."""
TRANSACTION = "transaction"
"""The name of a write transaction's span (``read`` for a read's)."""


def instrument(service: QueueService, tracer: Tracer) -> None:
    """Wrap ``service``'s operations (``KINDS``) in spans, on this instance only."""
    for name, kind in KINDS.items():
        setattr(service, name, _traced(tracer, name, kind, getattr(service, name)))


@contextlib.contextmanager
def current_span(tracer: Tracer, name: str, **options: Any) -> Iterator[Span]:
    """A new span, current inside the block, ended after it; an exception sets its status to
    ERROR (described by the SqewError's code) and goes on.

    What ``Tracer.start_as_current_span`` does, at about half its cost (it is on every
    request's path): no generator of the API's own inside, no exception event recorded.
    """
    span = tracer.start_span(name, **options)
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        yield span
    except BaseException as exc:
        code = getattr(exc, "code", None)  # a SqewError's: QueueNotFound, LeaseLost, …
        span.set_status(StatusCode.ERROR, code if isinstance(code, str) else type(exc).__name__)
        raise
    finally:
        otel_context.detach(token)
        span.end()


def _traced(
    tracer: Tracer, name: str, kind: SpanKind, method: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Awaitable[Any]:
        # Sampled out: the method's own coroutine, with no frame of ours around it (a frame
        # in the chain of awaits costs at every suspension of the request).
        if _sampled_out():
            return method(*args, **kwargs)
        return spanned(*args, **kwargs)

    async def spanned(*args: Any, **kwargs: Any) -> Any:
        queue = args[0] if args and isinstance(args[0], str) else None
        attrs: dict[str, Any] = {"messaging.system": telemetry.SYSTEM,
                                 "messaging.operation.name": name}
        if queue is not None:
            attrs["messaging.destination.name"] = queue
        with current_span(tracer, f"{name} {queue}" if queue is not None else name, kind=kind,
                          attributes=attrs) as span:
            result = await method(*args, **kwargs)
            if name == "poll":
                for message in result:  # the consumer's span links to each producer's
                    link = telemetry.producer_link(message)
                    if link is not None:
                        span.add_link(link.context, {"messaging.message.id": str(message.id)})
            return result

    return call


def read_span(tracer: Tracer, backend: Backend, run: Callable[[], T]) -> Callable[[], T]:
    """``run`` (a read transaction) inside a span of its own."""
    attrs = {"db.system.name": _db_system(backend)}

    def traced() -> T:
        if _sampled_out():
            return run()
        with current_span(tracer, "read", kind=SpanKind.CLIENT, attributes=attrs):
            return run()

    return traced


class TracedDirectWriter(DirectWriter):
    """``DirectWriter`` with a span per transaction (a child of the current span)."""

    def __init__(self, backend: Backend, clock: Clock, waiter: Waiter, tracer: Tracer,
                 observer: WriteObserver = NO_OBSERVER) -> None:
        super().__init__(backend, clock, waiter, observer)
        self._tracer = tracer
        self._db = _db_system(backend)

    def run(self, op: Op[R]) -> R:
        if _sampled_out():
            return super().run(op)
        attrs: dict[str, str | int] = {"db.system.name": self._db,
                                       "sqew.operations": type(op).__name__,
                                       "sqew.group.size": 1}
        with current_span(self._tracer, TRANSACTION, kind=SpanKind.CLIENT, attributes=attrs):
            return super().run(op)


class TracedGroupWriter(GroupWriter):
    """``GroupWriter`` with a span per group transaction, linked to its callers' spans."""

    def __init__(
        self, backend: Backend, clock: Clock, waiter: Waiter, offload: Offload[Any],
        tracer: Tracer, observer: WriteObserver = NO_OBSERVER, pressure: Pressure | None = None,
    ) -> None:
        super().__init__(backend, clock, waiter, offload, observer, pressure)
        self._tracer = tracer
        self._db = _db_system(backend)
        # The span each pending operation was submitted in, by its future: read when its
        # group commits (the commit runs in a task of its own, outside every caller's context).
        self._callers: dict[asyncio.Future[Any], SpanContext] = {}

    def _add(self, op: Op[R]) -> asyncio.Future[R]:
        future = super()._add(op)
        caller = trace.get_current_span().get_span_context()
        if caller.trace_flags.sampled:
            self._callers[future] = caller
        return future

    async def _commit(self, group: list[Item]) -> float:
        by_id: dict[tuple[int, int], SpanContext] = {}
        for _, future in group:
            caller = self._callers.pop(future, None)
            if caller is not None:
                by_id.setdefault((caller.trace_id, caller.span_id), caller)
        callers = list(by_id.values())
        if not callers:  # no caller is recorded (sampled out, or background work with no
            return await super()._commit(group)  # span): neither is their transaction
        attrs: dict[str, Any] = {
            "db.system.name": self._db, "sqew.group.size": len(group),
            "sqew.operations": ",".join(sorted({type(op).__name__ for op, _ in group})),
        }
        if len(callers) == 1:  # one caller's operations: a child of its span
            parent = trace.set_span_in_context(NonRecordingSpan(callers[0]))
            links: list[Link] | None = None
        else:  # a merged transaction: its own span, linked to every caller's
            parent = otel_context.Context()
            links = [Link(c) for c in callers]
        with current_span(self._tracer, TRANSACTION, context=parent, kind=SpanKind.CLIENT,
                          links=links, attributes=attrs):
            return await super()._commit(group)


def _sampled_out() -> bool:
    """Whether the current span is one that is not sampled (its children are not either)."""
    span = trace.get_current_span()
    return not span.is_recording() and span.get_span_context().is_valid


def _db_system(backend: Backend) -> str:
    """``db.system.name`` of a backend (semantic conventions' names)."""
    name = type(backend).__name__.removesuffix("Backend").lower()
    return {"postgres": "postgresql"}.get(name, name)
