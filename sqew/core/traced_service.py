"""``TracedService``: the queue service with a span around each operation.

A server whose tracing is configured builds this class instead of ``QueueService`` (the
choice is made once, when the service is built); one without tracing builds the plain service
and never imports this module or ``sqew.core.tracing``. Each operation below is the service's
own, run inside a span named ``<operation> <queue>`` (messaging semantic conventions): enqueue
is a PRODUCER span, poll a CONSUMER span that links to the producer of every message it leased
(docs/rest.md, "Trace context"), the others INTERNAL. Its writers trace each transaction and
its reads each read transaction (``sqew.core.tracing``), as children of the operation's span.

Under a span that is not sampled (``tracing.sampled_out``) an operation is the service's own
coroutine, with nothing of this class around it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from opentelemetry.trace import SpanKind, Tracer

from sqew import models, telemetry
from sqew.backends.base import Backend
from sqew.core import delivering, maintenance, signing, tracing
from sqew.core.service import QueueService

T = TypeVar("T")
Call = Coroutine[Any, Any, T]


class TracedService(QueueService):
    """``QueueService`` tracing its operations, transactions and reads with ``tracer``.

    Args:
        backend: where state lives.
        tracer: the tracer of every span.
        options: ``QueueService``'s other arguments.
    """

    def __init__(self, backend: Backend, *, tracer: Tracer, **options: Any) -> None:
        super().__init__(backend, tracer=tracer, **options)
        self._tracer = tracer
        self._read_spans = functools.partial(tracing.read_span, tracer, backend)

    def _traced(self, name: str, queue: str | None, call: Call[T],
                kind: SpanKind = SpanKind.INTERNAL) -> Call[T]:
        """``call`` (the operation ``name`` on ``queue``) inside a span, unless sampled out."""
        if tracing.sampled_out():  # no frame of ours in the chain of awaits: it costs at
            return call  # every suspension of the request
        return self._spanned(name, queue, call, kind)

    async def _spanned(self, name: str, queue: str | None, call: Call[T], kind: SpanKind) -> T:
        attrs: dict[str, Any] = {"messaging.system": telemetry.SYSTEM,
                                 "messaging.operation.name": name}
        if queue is not None:
            attrs["messaging.destination.name"] = queue
        title = name if queue is None else f"{name} {queue}"
        with tracing.span(self._tracer, title, kind=kind, attributes=attrs) as current:
            result = await call
            if kind == SpanKind.CONSUMER and isinstance(result, list):
                for message in result:  # the consumer's span links to each producer's
                    link = telemetry.producer_link(message)
                    if link is not None:
                        current.add_link(link.context, {"messaging.message.id": str(message.id)})
            return result

    # --- queues ---------------------------------------------------------------------------------
    def create_queue(self, spec: models.QueueCreate) -> Call[models.Queue]:
        return self._traced("create_queue", None, super().create_queue(spec))

    def list_queues(self) -> Call[list[models.Queue]]:
        return self._traced("list_queues", None, super().list_queues())

    def get_queue(self, name: str) -> Call[models.Queue]:
        return self._traced("get_queue", name, super().get_queue(name))

    def update_queue(self, name: str, settings: models.QueueSettings) -> Call[models.Queue]:
        return self._traced("update_queue", name, super().update_queue(name, settings))

    def set_paused(self, name: str, paused: bool) -> Call[models.Queue]:
        return self._traced("pause_queue" if paused else "resume_queue", name,
                            super().set_paused(name, paused))

    def delete_queue(self, name: str) -> Call[None]:
        return self._traced("delete_queue", name, super().delete_queue(name))

    # --- messages -------------------------------------------------------------------------------
    def enqueue(
        self, queue: str, messages: Sequence[models.MessageIn],
        proof: signing.Proof | None = None, groups: Sequence[str | None] | None = None,
    ) -> Call[list[models.EnqueueResult]]:
        return self._traced("enqueue", queue, super().enqueue(queue, messages, proof, groups),
                            SpanKind.PRODUCER)

    def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        gone: Callable[[], bool] | None = None, order: str = "priority",
    ) -> Call[list[models.LeasedMessage]]:
        call = super().poll(queue, batch=batch, wait_ms=wait_ms, visibility_ms=visibility_ms,
                            gone=gone, order=order)
        return self._traced("poll", queue, call, SpanKind.CONSUMER)

    def ack(self, queue: str, items: Sequence[tuple[int, str]]) -> Call[list[models.ItemResult]]:
        return self._traced("ack", queue, super().ack(queue, items))

    def nack(self, queue: str, items: Sequence[models.NackIn]) -> Call[list[models.ItemResult]]:
        return self._traced("nack", queue, super().nack(queue, items))

    def extend_lease(
        self, queue: str, msg_id: int, token: str, ms: int
    ) -> Call[models.LeaseExtended]:
        return self._traced("extend_lease", queue,
                            super().extend_lease(queue, msg_id, token, ms))

    def extend_leases(
        self, queue: str, items: delivering.Extends
    ) -> Call[delivering.ItemResults]:
        return self._traced("extend_leases", queue, super().extend_leases(queue, items))

    def stats(self, queue: str) -> Call[models.Stats]:
        return self._traced("stats", queue, super().stats(queue))

    def peek(self, queue: str, limit: int = 10) -> Call[list[models.Message]]:
        return self._traced("peek", queue, super().peek(queue, limit))

    def get_message(self, queue: str, msg_id: int) -> Call[models.Message]:
        return self._traced("get_message", queue, super().get_message(queue, msg_id))

    def remove_message(self, queue: str, msg_id: int) -> Call[None]:
        return self._traced("remove_message", queue, super().remove_message(queue, msg_id))

    def purge(self, queue: str) -> Call[int]:
        return self._traced("purge", queue, super().purge(queue))

    def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> Call[models.ScanPage]:
        return self._traced("scan", queue, super().scan(
            queue, source=source, after_id=after_id, max_id=max_id, limit=limit))

    # --- DLQ ------------------------------------------------------------------------------------
    def dlq_list(
        self, queue: str, limit: int = 100, after_id: int | None = None
    ) -> Call[list[models.Message]]:
        return self._traced("dlq_list", queue, super().dlq_list(queue, limit, after_id))

    def dlq_requeue(self, queue: str, ids: Sequence[int] | None = None) -> Call[models.Requeued]:
        return self._traced("dlq_requeue", queue, super().dlq_requeue(queue, ids))

    def dlq_purge(self, queue: str) -> Call[int]:
        return self._traced("dlq_purge", queue, super().dlq_purge(queue))

    # --- API keys -------------------------------------------------------------------------------
    def create_key(self, spec: models.KeyCreate) -> Call[models.KeyCreated]:
        return self._traced("create_key", None, super().create_key(spec))

    def list_keys(self) -> Call[list[models.ApiKey]]:
        return self._traced("list_keys", None, super().list_keys())

    def revoke_key(self, key_id: str) -> Call[None]:
        return self._traced("revoke_key", None, super().revoke_key(key_id))

    # --- housekeeping ---------------------------------------------------------------------------
    def compact(self, queue: str) -> Call[int]:
        return self._traced("compact", queue, super().compact(queue))

    def reap(self) -> Call[maintenance.Reaped]:
        return self._traced("reap", None, super().reap())
