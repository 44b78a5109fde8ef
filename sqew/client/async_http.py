"""AsyncHttpClient: ``sqew.AsyncClient`` over a sqew server's REST API, on httpx.AsyncClient.

What each method sends, how it is signed and how its answer (or error envelope) is read are
``sqew.client.http_calls`` and ``http_wire``, the same as ``HttpClient``'s: only the
sending is asynchronous.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from sqew import models
from sqew.client import http_wire
from sqew.client.aio import AsyncClient
from sqew.client.http import DEFAULT_TIMEOUT_S
from sqew.client.http_calls import CALLS, Calls
from sqew.client.http_wire import Call
from sqew.client.sse import open_async_sse
from sqew.client.streams import AsyncSseStream, check_arguments

T = TypeVar("T")


class AsyncHttpClient(AsyncClient):
    """An asyncio client of a sqew server.

    Args:
        target: the server's base URL, e.g. ``http://127.0.0.1:8888``.
        api_key, hmac_secret, timeout, ca_cert: as ``HttpClient``'s.
        http: an ``httpx.AsyncClient`` to use instead of a new one (its base URL is kept);
            ``aclose()`` does not close it.

    Raises:
        sqew.errors.ValidationError: as ``HttpClient``.
    """

    max_json_depth = Calls.max_json_depth

    def __init__(
        self,
        target: str = "http://127.0.0.1:8888",
        *,
        api_key: str | None = None,
        hmac_secret: str | Sequence[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        http: httpx.AsyncClient | None = None,
        ca_cert: str | os.PathLike[str] | None = None,
    ) -> None:
        self.base_url = str(target).rstrip("/")
        self.timeout = timeout
        self._wire = http_wire.Wire(self.base_url, api_key=api_key, hmac_secret=hmac_secret,
                                     timeout=timeout)
        self._owned = http is None
        self._http = http or httpx.AsyncClient(
            timeout=timeout, verify=http_wire.verify(self.base_url, ca_cert),
        )

    async def _run(self, call: Call[T]) -> T:
        r = self._wire.prepare(call, self._http)
        try:
            response = await self._http.request(
                r.method, r.url, content=r.content, headers=r.headers,
                timeout=r.timeout)
        except httpx.LocalProtocolError as exc:
            raise self._wire.failed(exc) from None  # its text may quote a key
        except httpx.TransportError as exc:
            raise self._wire.failed(exc) from exc
        return self._wire.answer(call, response)

    # --- queues ---------------------------------------------------------------------------------
    async def create_queue(self, name: str, **settings: Any) -> models.Queue:
        return await self._run(CALLS.create_queue(name, settings))

    async def list_queues(self) -> list[models.Queue]:
        return await self._run(CALLS.list_queues())

    async def get_queue(self, name: str) -> models.Queue:
        return await self._run(CALLS.get_queue(name))

    async def update_queue(self, name: str, **settings: Any) -> models.Queue:
        return await self._run(CALLS.update_queue(name, settings))

    async def pause_queue(self, name: str) -> models.Queue:
        return await self._run(CALLS.set_paused(name, True))

    async def resume_queue(self, name: str) -> models.Queue:
        return await self._run(CALLS.set_paused(name, False))

    async def delete_queue(self, name: str) -> None:
        await self._run(CALLS.delete_queue(name))

    # --- messages -------------------------------------------------------------------------------
    async def enqueue(
        self,
        queue: str,
        payload: Any,
        *,
        priority: int | None = None,
        delay_ms: int | None = None,
        ttl_ms: int | None = None,
        idempotency_key: str | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> models.EnqueueResult:
        return await self._run(CALLS.enqueue(
            queue, payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes))

    async def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return await self._run(CALLS.enqueue_batch(queue, messages))

    async def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        return await self._run(CALLS.enqueue_checked(queue, messages))

    async def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        return await self._run(CALLS.poll(queue, batch=batch, wait_ms=wait_ms,
                                          visibility_ms=visibility_ms, order=order))

    async def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> AsyncSseStream:
        check_arguments(max_in_flight, visibility_ms)
        call = CALLS.stream(queue, max_in_flight=max_in_flight, visibility_ms=visibility_ms)
        return await open_async_sse(self._http, self._wire, call, queue, max_in_flight)

    async def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        return await self._run(CALLS.ack(queue, id, token))

    async def ack_batch(
        self, queue: str, acks: Iterable[tuple[int, str]]
    ) -> list[models.ItemResult]:
        return await self._run(CALLS.ack_batch(queue, acks))

    async def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        return await self._run(CALLS.nack(queue, id, token, delay_ms=delay_ms, error=error,
                                    dead_letter=dead_letter))

    async def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        return await self._run(CALLS.nack_batch(queue, nacks))

    async def extend_lease(self, queue: str, id: int, token: str, ms: int) -> models.LeaseExtended:
        return await self._run(CALLS.extend_lease(queue, id, token, ms))

    async def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        return await self._run(CALLS.extend_leases(queue, extends))

    async def stats(self, queue: str) -> models.Stats:
        return await self._run(CALLS.stats(queue))

    async def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        return await self._run(CALLS.peek(queue, limit=limit))

    async def get_message(self, queue: str, id: int) -> models.Message:
        return await self._run(CALLS.get_message(queue, id))

    async def remove_message(self, queue: str, id: int) -> None:
        await self._run(CALLS.remove_message(queue, id))

    async def purge(self, queue: str) -> int:
        return await self._run(CALLS.purge(queue))

    async def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        return await self._run(CALLS.dlq_list(queue, limit=limit, after_id=after_id))

    async def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        return await self._run(CALLS.scan(queue, source=source, after_id=after_id, max_id=max_id,
                                    limit=limit))

    async def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        return await self._run(CALLS.dlq_requeue(queue, ids))

    async def dlq_purge(self, queue: str) -> int:
        return await self._run(CALLS.dlq_purge(queue))

    async def compact(self, queue: str) -> int:
        return await self._run(CALLS.compact(queue))

    # --- API keys -------------------------------------------------------------------------------
    async def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        return await self._run(CALLS.create_key(scopes, name=name, queue=queue, sqs=sqs))

    async def list_keys(self) -> list[models.ApiKey]:
        return await self._run(CALLS.list_keys())

    async def revoke_key(self, id: str) -> None:
        await self._run(CALLS.revoke_key(id))

    # --- operations -----------------------------------------------------------------------------
    async def health(self) -> models.Health:
        return await self._run(CALLS.health())

    async def ready(self) -> models.Readiness:
        """``/readyz``: raises ``Unavailable`` unless the database answers at the newest schema;
        says whether the server process that answered is overloaded (backpressure)."""
        return await self._run(CALLS.ready())

    async def metrics(self) -> str:
        """The server's ``/metrics`` in the Prometheus text format."""
        return await self._run(CALLS.metrics())

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()
