"""AsyncLocalClient: ``sqew.AsyncClient`` running the queue service on the caller's event loop.

The service is built as a server builds it (``sqew.server.runtime``): writes go through the
group commit on the loop (concurrent calls share transactions), and what blocks — reads,
long writes, a group's statements on PostgreSQL, waiting for SQLite's write lock — runs on a
bounded pool of ``threads`` database threads. A long poll waits on the backend's waiter, as
a server's does: it holds no thread while it waits. What each call validates and returns is
``sqew.client.local_calls``, the same as ``LocalClient``'s.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqew import errors, models
from sqew.backends import open_backend
from sqew.client.aio import AsyncClient
from sqew.client.local_calls import ServiceCalls
from sqew.client.streams import AsyncPollStream, check_arguments
from sqew.core.clock import Clock
from sqew.core.service import QueueService

T = TypeVar("T")
DEFAULT_THREADS = 4


class AsyncLocalClient(AsyncClient):
    """An asyncio client that works directly on a database (no server).

    The database is opened at once (a missing file, with ``create=False``, raises here);
    the service starts on the event loop of the first call, and the client serves that loop
    only. ``aclose()`` finishes pending writes and closes the database.

    Args:
        target, durability, clock, upgrade, create, read_only, reap_interval_ms, rng,
        hmac_secret, api_key, ca_cert: as ``LocalClient``'s.
        threads: the database threads (1 to 64) that run blocking calls: at most this many
            reads or long writes run at once, the others wait their turn on the loop.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] = "sqew.db",
        *,
        durability: str = "normal",
        clock: Clock | None = None,
        upgrade: bool = False,
        reap_interval_ms: int = 1000,
        rng: random.Random | None = None,
        hmac_secret: str | Sequence[str] | None = None,
        api_key: str | None = None,
        ca_cert: str | os.PathLike[str] | None = None,
        create: bool = True,
        read_only: bool = False,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= 64:
            raise errors.ValidationError(f"threads must be from 1 to 64, not {threads!r}")
        self.target = os.fspath(target)
        self._backend = open_backend(target, durability=durability, upgrade=upgrade,
                                     create=create, read_only=read_only)
        self._options: dict[str, Any] = dict(
            clock=clock, reap_interval_ms=reap_interval_ms, rng=rng,
            reap_when_due=not read_only,
            # A read-only file takes no write session: its writes fail at once, directly.
            group_commit=not read_only)
        self._threads = threads
        self._service: QueueService | None = None
        self._calls: ServiceCalls | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @property
    def service(self) -> QueueService:
        """The service (started on the first call's loop)."""
        return self._start()[0]

    def _start(self) -> tuple[QueueService, ServiceCalls]:
        loop = asyncio.get_running_loop()
        if self._closed:
            raise errors.Unavailable("the client is closed")
        if self._service is None or self._calls is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="sqew-async-db")
            self._loop = loop
            self._service = QueueService(self._backend, offload=self._offload, **self._options)
            self._calls = ServiceCalls(self._service)
        elif loop is not self._loop:
            raise RuntimeError("an AsyncLocalClient serves the event loop of its first call "
                               "only: open one client per loop")
        return self._service, self._calls

    def _offload(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run a blocking call on the database threads, with the caller's context variables."""
        if self._pool is None:
            raise errors.Unavailable("the client is closed")
        context = contextvars.copy_context()
        return asyncio.get_running_loop().run_in_executor(self._pool, context.run, fn)

    @property
    def _do(self) -> ServiceCalls:
        return self._start()[1]

    # --- queues ---------------------------------------------------------------------------------
    async def create_queue(self, name: str, **settings: Any) -> models.Queue:
        return await self._do.create_queue(name, settings)

    async def list_queues(self) -> list[models.Queue]:
        return await self.service.list_queues()

    async def get_queue(self, name: str) -> models.Queue:
        return await self.service.get_queue(name)

    async def update_queue(self, name: str, **settings: Any) -> models.Queue:
        return await self._do.update_queue(name, settings)

    async def pause_queue(self, name: str) -> models.Queue:
        return await self.service.set_paused(name, True)

    async def resume_queue(self, name: str) -> models.Queue:
        return await self.service.set_paused(name, False)

    async def delete_queue(self, name: str) -> None:
        await self.service.delete_queue(name)

    # --- messages -------------------------------------------------------------------------------
    async def enqueue(
        self, queue: str, payload: Any, *, priority: int | None = None,
        delay_ms: int | None = None, ttl_ms: int | None = None,
        idempotency_key: str | None = None, attributes: Mapping[str, str] | None = None,
    ) -> models.EnqueueResult:
        return await self._do.enqueue(
            queue, payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes)

    async def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return await self._do.enqueue_batch(queue, messages)

    async def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        return await self.service.enqueue(queue, messages)

    async def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        return await self._do.poll(queue, batch=batch, wait_ms=wait_ms,
                                   visibility_ms=visibility_ms, order=order)

    async def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> AsyncPollStream:
        check_arguments(max_in_flight, visibility_ms)
        service = self.service
        await service.get_queue(queue)  # QueueNotFound now, not at the first message
        return AsyncPollStream(
            queue, max_in_flight, visibility_ms, poll=self.poll,
            held=lambda leases: service.held(queue, leases),
            give_back=lambda leases: service.give_back(queue, leases), clock=service.clock)

    async def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        return await self._do.ack(queue, id, token)

    async def ack_batch(
        self, queue: str, acks: Iterable[tuple[int, str]]
    ) -> list[models.ItemResult]:
        return await self._do.ack_batch(queue, acks)

    async def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        return await self._do.nack(queue, id, token, delay_ms=delay_ms, error=error,
                                   dead_letter=dead_letter)

    async def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        return await self._do.nack_batch(queue, nacks)

    async def extend_lease(
        self, queue: str, id: int, token: str, ms: int
    ) -> models.LeaseExtended:
        return await self._do.extend_lease(queue, id, token, ms)

    async def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        return await self._do.extend_leases(queue, extends)

    async def stats(self, queue: str) -> models.Stats:
        return await self.service.stats(queue)

    async def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        return await self._do.peek(queue, limit=limit)

    async def get_message(self, queue: str, id: int) -> models.Message:
        return await self._do.get_message(queue, id)

    async def remove_message(self, queue: str, id: int) -> None:
        await self._do.remove_message(queue, id)

    async def purge(self, queue: str) -> int:
        return await self.service.purge(queue)

    async def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        return await self._do.dlq_list(queue, limit=limit, after_id=after_id)

    async def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        return await self._do.scan(queue, source=source, after_id=after_id, max_id=max_id,
                                   limit=limit)

    async def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        return await self._do.dlq_requeue(queue, ids)

    async def dlq_purge(self, queue: str) -> int:
        return await self.service.dlq_purge(queue)

    async def compact(self, queue: str) -> int:
        return await self.service.compact(queue)

    # --- API keys (the owner of the database file needs none) -----------------------------------
    async def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        return await self._do.create_key(scopes, name=name, queue=queue, sqs=sqs)

    async def list_keys(self) -> list[models.ApiKey]:
        return await self.service.list_keys()

    async def revoke_key(self, id: str) -> None:
        await self._do.revoke_key(id)

    async def health(self) -> models.Health:
        return await self._do.health()

    async def metrics(self) -> str:
        return await self._do.metrics()

    async def aclose(self) -> None:
        """Wake every long poll, finish the pending writes, close the database."""
        if self._closed:
            return
        self._closed = True
        if self._service is not None:
            await self._service.drain()
        if self._pool is not None:  # calls running on the database threads finish
            await asyncio.get_running_loop().run_in_executor(None, self._pool.shutdown)
        if self._service is not None:
            self._service.close()
        else:
            self._backend.close()
