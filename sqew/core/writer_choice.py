"""Which writers a service runs its operations through, chosen once when it is built.

A direct writer (a transaction per operation) always exists; a server adds the group commit.
With a tracer both are their traced subclasses (``sqew.core.tracing``, imported only then), so
an untraced service runs no tracing code at all.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.trace import Tracer

from sqew.backends.base import Backend, Waiter
from sqew.core.clock import Clock
from sqew.core.pressure import Pressure
from sqew.core.writer import DirectWriter, Offload, WriteObserver, Writer


def choose(
    backend: Backend, clock: Clock, waiter: Waiter, *, group_commit: bool,
    offload: Offload[Any], observer: WriteObserver, tracer: Tracer | None,
    pressure: Pressure | None,
) -> tuple[DirectWriter, Writer]:
    """The direct writer, and the writer of every operation (the group commit, or the same
    direct writer)."""
    if tracer is not None:
        from sqew.core import tracing

        direct: DirectWriter = tracing.TracedDirectWriter(backend, clock, waiter, tracer, observer)
        if not group_commit:
            return direct, direct
        return direct, tracing.TracedGroupWriter(
            backend, clock, waiter, offload, tracer, observer, pressure)
    direct = DirectWriter(backend, clock, waiter, observer)
    if not group_commit:
        return direct, direct
    from sqew.core.group_commit import GroupWriter

    return direct, GroupWriter(backend, clock, waiter, offload, observer, pressure)
