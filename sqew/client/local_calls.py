"""What the in-process clients do with each call, written once for both.

``LocalClient`` runs these coroutines to their end without a loop (``run_sync``: on a direct
writer they never suspend); ``sqew.AsyncClient`` on a file or a database URL awaits them on
its loop, through the service's group commit. Each validates its arguments as every client
does (``sqew.client.arguments``), calls the service, and turns the answer into what the
``Client`` method returns (payloads decoded, a failed single ack or nack raised).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import msgspec

from sqew import errors, models, payloads
from sqew.client.arguments import convert, key_create, key_id, message_in, messages_in
from sqew.core.rules import check_range
from sqew.core.service import QueueService

_decode = msgspec.json.decode
M = TypeVar("M", bound=models.Message)


def decoded(messages: list[M]) -> list[M]:
    """The messages with their payloads decoded, each keeping its text as sent
    (``sqew.payloads``: what ``--json``, exports and signatures show)."""
    for m in messages:
        if isinstance(m.payload, msgspec.Raw):
            payloads.keep_text(m, bytes(m.payload).decode())
            m.payload = _decode(m.payload)
    return messages


class ServiceCalls:
    """The ``Client`` methods as coroutines over ``service``."""

    def __init__(self, service: QueueService) -> None:
        self.service = service

    # --- queues ---------------------------------------------------------------------------------
    async def create_queue(self, name: str, settings: Mapping[str, Any]) -> models.Queue:
        spec = convert({"name": name, **settings}, models.QueueCreate)
        return await self.service.create_queue(spec)

    async def update_queue(self, name: str, settings: Mapping[str, Any]) -> models.Queue:
        return await self.service.update_queue(name, convert(settings, models.QueueSettings))

    # --- messages -------------------------------------------------------------------------------
    async def enqueue(
        self, queue: str, payload: Any, *, priority: int | None, delay_ms: int | None,
        ttl_ms: int | None, idempotency_key: str | None, attributes: Mapping[str, str] | None,
    ) -> models.EnqueueResult:
        msg = message_in(
            payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes,
        )
        return (await self.service.enqueue(queue, [msg]))[0]

    async def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return await self.service.enqueue(queue, messages_in(messages))

    async def poll(
        self, queue: str, *, batch: int, wait_ms: int, visibility_ms: int | None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        return decoded(await self.service.poll(queue, batch=batch, wait_ms=wait_ms,
                                               visibility_ms=visibility_ms, order=order))

    async def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        # Validated as the single item it is, so an error names `id`, as the server's does.
        item = convert({"id": id, "token": token}, models.AckIn)
        result = (await self.service.ack(queue, [(item.id, item.token)]))[0]
        if result.status != "acked":
            raise errors.for_item(result.status, result.id)
        return result

    async def ack_batch(
        self, queue: str, acks: Iterable[tuple[int, str]]
    ) -> list[models.ItemResult]:
        items = convert({"acks": [{"id": i, "token": t} for i, t in acks]}, models.AckBatchIn)
        return await self.service.ack(queue, [(a.id, a.token) for a in items.acks])

    async def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None, error: str | None,
        dead_letter: bool,
    ) -> models.ItemResult:
        body = {"id": id, "token": token, "delay_ms": delay_ms, "error": error,
                "dead_letter": dead_letter or None}
        item = convert({k: v for k, v in body.items() if v is not None}, models.NackIn)
        result = (await self.service.nack(queue, [item]))[0]
        if result.status in errors.ITEM_ERRORS:
            raise errors.for_item(result.status, result.id)
        return result

    async def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        items = [{k: v for k, v in n.items() if v is not None} for n in nacks]
        parsed = convert({"nacks": items}, models.NackBatchIn).nacks
        return await self.service.nack(queue, parsed)

    async def extend_lease(
        self, queue: str, id: int, token: str, ms: int
    ) -> models.LeaseExtended:
        item = convert({"id": id, "token": token, "ms": ms}, models.ExtendLeaseIn)
        return await self.service.extend_lease(queue, item.id, item.token, item.ms)

    async def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        body = {"extends": [{"id": i, "token": t, "ms": ms} for i, t, ms in extends]}
        items = convert(body, models.ExtendLeaseBatchIn).extends
        return await self.service.extend_leases(queue, [(e.id, e.token, e.ms) for e in items])

    async def peek(self, queue: str, *, limit: int) -> list[models.Message]:
        return decoded(await self.service.peek(queue, limit))

    async def get_message(self, queue: str, id: int) -> models.Message:
        check_range("id", id, 1, models.MAX_ID)
        return decoded([await self.service.get_message(queue, id)])[0]

    async def remove_message(self, queue: str, id: int) -> None:
        check_range("id", id, 1, models.MAX_ID)
        await self.service.remove_message(queue, id)

    async def dlq_list(
        self, queue: str, *, limit: int, after_id: int | None
    ) -> list[models.Message]:
        if after_id is not None:  # the service checks only the lower bound
            check_range("after_id", after_id, 0, models.MAX_ID)
        return decoded(await self.service.dlq_list(queue, limit, after_id))

    async def scan(
        self, queue: str, *, source: str, after_id: int | None, max_id: int | None, limit: int,
    ) -> models.ScanPage:
        page = await self.service.scan(queue, source=source, after_id=after_id, max_id=max_id,
                                       limit=limit)
        decoded(page.messages)
        return page

    async def dlq_requeue(self, queue: str, ids: Iterable[int] | None) -> models.Requeued:
        body = convert({"ids": None if ids is None else list(ids)}, models.RequeueIn)
        return await self.service.dlq_requeue(queue, body.ids)

    # --- API keys (the owner of the database file needs none) -----------------------------------
    async def create_key(
        self, scopes: Iterable[str], *, name: str | None, queue: str | None, sqs: bool,
    ) -> models.KeyCreated:
        return await self.service.create_key(key_create(scopes, name, queue, sqs))

    async def revoke_key(self, id: str) -> None:
        await self.service.revoke_key(key_id(id))

    async def health(self) -> models.Health:
        await self.service.ping()
        return models.Health("ok")

    async def metrics(self) -> str:
        from sqew import queue_metrics  # prometheus-client only for the call that needs it

        return queue_metrics.render_local(await self.service.all_stats()).decode()
