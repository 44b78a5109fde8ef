"""Spans of the write and read transactions, and the span helpers the traced service shares.

Only a traced service (``sqew.core.traced_service.TracedService``, built when a server's
tracing is configured) uses this module; an untraced one never imports it: its writers are
the plain ones and nothing checks whether to trace.

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
asking the SDK (``sampled_out``): under a span that is not sampled (a request the server
span's sampler left out), no operation or transaction span is started at all, so a
sampled-out request costs one sampling decision (the server span's), not one per span.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

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

from sqew.backends.base import Backend, Waiter
from sqew.core.clock import Clock
from sqew.core.group_commit import GroupWriter, Item
from sqew.core.pressure import Pressure
from sqew.core.writer import NO_OBSERVER, DirectWriter, Offload, Op, WriteObserver

R = TypeVar("R")
T = TypeVar("T")

TRANSACTION = "transaction"
"""The name of a write transaction's span (``read`` for a read's)."""


@contextlib.contextmanager
def span(tracer: Tracer, name: str, **options: Any) -> Iterator[Span]:
    """A new span, current inside the block, ended after it (the API's
    ``start_as_current_span``). An exception sets its status to ERROR, described by the
    SqewError's code (``QueueNotFound``, ``LeaseLost``) or the exception's type, and goes
    on; it is not recorded as an event: its message may quote what a caller sent."""
    with tracer.start_as_current_span(name, record_exception=False,
                                      set_status_on_exception=False, **options) as current:
        try:
            yield current
        except BaseException as exc:
            code = getattr(exc, "code", None)
            current.set_status(StatusCode.ERROR,
                               code if isinstance(code, str) else type(exc).__name__)
            raise


def read_span(tracer: Tracer, backend: Backend, run: Callable[[], T]) -> Callable[[], T]:
    """``run`` (a read transaction) inside a span of its own."""
    attrs = {"db.system.name": _db_system(backend)}

    def traced() -> T:
        if sampled_out():
            return run()
        with span(tracer, "read", kind=SpanKind.CLIENT, attributes=attrs):
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
        if sampled_out():
            return super().run(op)
        attrs: dict[str, str | int] = {"db.system.name": self._db,
                                       "sqew.operations": type(op).__name__,
                                       "sqew.group.size": 1}
        with span(self._tracer, TRANSACTION, kind=SpanKind.CLIENT, attributes=attrs):
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
        with span(self._tracer, TRANSACTION, context=parent, kind=SpanKind.CLIENT,
                          links=links, attributes=attrs):
            return await super()._commit(group)


def sampled_out() -> bool:
    """Whether the current span is one that is not sampled (its children are not either)."""
    current = trace.get_current_span()
    return not current.is_recording() and current.get_span_context().is_valid


def _db_system(backend: Backend) -> str:
    """``db.system.name`` of a backend (semantic conventions' names)."""
    name = type(backend).__name__.removesuffix("Backend").lower()
    return {"postgres": "postgresql"}.get(name, name)
