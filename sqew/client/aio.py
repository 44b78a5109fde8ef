"""``sqew.AsyncClient``: the Client contract on asyncio (docs/consumers.md, "asyncio").

The same methods, arguments, models and errors as ``sqew.Client``, each a coroutine.
``AsyncClient(target)`` picks the implementation as ``Client(target)`` does: an
``http://``/``https://`` URL gives an ``AsyncHttpClient`` (``httpx.AsyncClient``); a file
path, ``sqlite:///…`` or database URL gives an ``AsyncLocalClient``, which runs the queue
service on the caller's event loop as a server does. Use ``async with AsyncClient(...)`` or
``await client.aclose()``.
"""

from __future__ import annotations

import abc
import asyncio
import importlib
import os
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

from sqew import jsonlimits, models
from sqew.client import bulk
from sqew.client.streams import AsyncMessageStream

_URL_CLIENT = ("sqew.client.async_http", "AsyncHttpClient")
_FILE_CLIENT = ("sqew.client.async_local", "AsyncLocalClient")


class AsyncClient(abc.ABC):
    """What every asyncio sqew client offers: ``sqew.Client``'s methods as coroutines
    (see each method there). Methods raise ``sqew.errors.SqewError`` subclasses.

    ``AsyncClient(target, **options)`` takes the options of ``Client(target, ...)`` for the
    same target (``api_key``, ``hmac_secret``, ``ca_cert``, ``timeout``; ``clock``,
    ``durability``…), plus ``threads`` on a database (see ``AsyncLocalClient``).
    """

    max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH

    def __new__(
        cls, target: str | os.PathLike[str] = "sqew.db", *args: Any, **kwargs: Any
    ) -> AsyncClient:
        if cls is AsyncClient:
            url = os.fspath(target).startswith(("http://", "https://"))
            module, name = _URL_CLIENT if url else _FILE_CLIENT
            cls = getattr(importlib.import_module(module), name)
        return super().__new__(cls)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @abc.abstractmethod
    async def create_queue(self, name: str, **settings: Any) -> models.Queue:
        """Create queue ``name`` (and its DLQ) with optional settings."""

    @abc.abstractmethod
    async def list_queues(self) -> list[models.Queue]:
        """All queues, DLQs included, by name."""

    @abc.abstractmethod
    async def get_queue(self, name: str) -> models.Queue:
        """One queue with its ``stats``."""

    @abc.abstractmethod
    async def update_queue(self, name: str, **settings: Any) -> models.Queue:
        """Change settings of a queue; returns the updated queue."""

    @abc.abstractmethod
    async def pause_queue(self, name: str) -> models.Queue:
        """Pause a queue's delivery (polls return nothing, enqueues go on)."""

    @abc.abstractmethod
    async def resume_queue(self, name: str) -> models.Queue:
        """Resume a paused queue's delivery."""

    @abc.abstractmethod
    async def delete_queue(self, name: str) -> None:
        """Remove a queue, its DLQ and their messages."""

    @abc.abstractmethod
    async def enqueue(
        self, queue: str, payload: Any, *, priority: int | None = None,
        delay_ms: int | None = None, ttl_ms: int | None = None,
        idempotency_key: str | None = None, attributes: Mapping[str, str] | None = None,
    ) -> models.EnqueueResult:
        """Enqueue one message whose payload is any JSON-serialisable value."""

    @abc.abstractmethod
    async def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        """Enqueue up to 1000 messages, all or none."""

    @abc.abstractmethod
    async def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        """Enqueue messages already validated, all or none."""

    async def enqueue_many(
        self, queue: str, messages: Iterable[Mapping[str, Any]], *,
        batch_size: int = bulk.BATCH_SIZE,
        on_progress: Callable[[bulk.Progress], None] | None = None,
        retry: bulk.RetryPolicy | None = None, skip_invalid: bool = False,
        keep_failed: int = bulk.KEEP_FAILED,
    ) -> bulk.EnqueueSummary:
        """Enqueue any number of messages in batches, as ``Client.enqueue_many``.

        The run (reading ``messages``, waiting out refusals) is ``Client.enqueue_many``'s own,
        on a thread of the loop's default executor, each batch sent through this client on
        the loop: ``messages`` is read, and ``on_progress`` called, on that thread.
        """
        loop = asyncio.get_running_loop()
        run = bulk.BulkEnqueue(
            _OnLoop(self, loop), queue, batch_size=batch_size, on_progress=on_progress,
            retry=retry, skip_invalid=skip_invalid, keep_failed=keep_failed)
        return await loop.run_in_executor(None, run.run, messages)

    @abc.abstractmethod
    async def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        """Lease up to ``batch`` ready messages, waiting up to ``wait_ms`` for one
        (``order="shuffle"``: random ready ones)."""

    @abc.abstractmethod
    async def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> AsyncMessageStream:
        """``Client.stream`` on asyncio: ``async with await client.stream(q) as messages:
        async for m in messages: …``. Errors before the stream begins raise here."""

    @abc.abstractmethod
    async def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        """Acknowledge one message; raises LeaseLost / MessageNotFound on failure."""

    @abc.abstractmethod
    async def ack_batch(
        self, queue: str, acks: Iterable[tuple[int, str]]
    ) -> list[models.ItemResult]:
        """Acknowledge many ``(id, token)`` pairs; per-item statuses."""

    @abc.abstractmethod
    async def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        """Release a lease for a retry (or dead-letter it)."""

    @abc.abstractmethod
    async def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        """Nack many (dicts with ``id``, ``token`` and optional fields)."""

    @abc.abstractmethod
    async def extend_lease(
        self, queue: str, id: int, token: str, ms: int
    ) -> models.LeaseExtended:
        """Set the lease of a held message to expire ``ms`` from now."""

    @abc.abstractmethod
    async def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        """Extend many held leases at once, each ``(id, token, ms)``."""

    @abc.abstractmethod
    async def stats(self, queue: str) -> models.Stats:
        """Depths and counters of a queue."""

    @abc.abstractmethod
    async def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        """The next ready messages, without leasing them."""

    @abc.abstractmethod
    async def get_message(self, queue: str, id: int) -> models.Message:
        """One message by id."""

    @abc.abstractmethod
    async def remove_message(self, queue: str, id: int) -> None:
        """Delete one message by id."""

    @abc.abstractmethod
    async def purge(self, queue: str) -> int:
        """Delete every message of a queue; returns how many."""

    @abc.abstractmethod
    async def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        """Messages in the queue's DLQ, by id, after ``after_id``."""

    @abc.abstractmethod
    async def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        """One page of the queue's messages by id, without leasing anything."""

    async def export(
        self, queue: str, *, source: str = "queue", batch: int = 1000
    ) -> AsyncIterator[models.ScannedMessage]:
        """Every message of ``source`` by id, a page at a time (``async for``), as
        ``Client.export``: the highest id is fixed by the first page."""
        page = await self.scan(queue, source=source, limit=batch)
        max_id = page.high_water_id  # fixed by the first page
        while True:
            for m in page.messages:
                yield m
            if page.next_after_id is None or not isinstance(max_id, int):
                return
            page = await self.scan(queue, source=source, after_id=page.next_after_id,
                                   max_id=max_id, limit=batch)

    @abc.abstractmethod
    async def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        """Move DLQ messages (all, or ``ids``) back to the queue with attempts reset."""

    @abc.abstractmethod
    async def dlq_purge(self, queue: str) -> int:
        """Delete every message of the queue's DLQ."""

    @abc.abstractmethod
    async def compact(self, queue: str) -> int:
        """Remove expired messages and tombstones, then reclaim space."""

    @abc.abstractmethod
    async def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        """Mint an API key with ``scopes`` (its ``key`` is seen only here)."""

    @abc.abstractmethod
    async def list_keys(self) -> list[models.ApiKey]:
        """Every API key, oldest first."""

    @abc.abstractmethod
    async def revoke_key(self, id: str) -> None:
        """Remove the API key with this id."""

    @abc.abstractmethod
    async def health(self) -> models.Health:
        """``{"status": "ok"}`` when the database answers."""

    @abc.abstractmethod
    async def metrics(self) -> str:
        """Metrics in the Prometheus text format."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Finish pending writes and release connections."""


class _OnLoop:
    """A ``bulk.Sender`` on a thread that sends through an AsyncClient on its loop."""

    def __init__(self, client: AsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client, self._loop = client, loop
        self.max_json_depth = client.max_json_depth

    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        call = self._client._enqueue_checked(queue, messages)
        return asyncio.run_coroutine_threadsafe(call, self._loop).result()
