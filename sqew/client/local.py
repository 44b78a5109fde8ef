"""LocalClient: the Client API running QueueService in-process on a database file or URL.

What each call validates and returns is ``sqew.client.local_calls``, shared with
``sqew.AsyncClient``; this client runs those coroutines without a loop (``run_sync``).
"""

from __future__ import annotations

import inspect
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqew import models
from sqew.backends import open_backend
from sqew.client.base import Client
from sqew.client.local_calls import ServiceCalls
from sqew.client.streams import MessageStream, PollStream, check_arguments
from sqew.core.clock import Clock
from sqew.core.service import QueueService
from sqew.core.writer import run_blocking, run_sync


class LocalClient(Client):
    """A client that works directly on a database (no server).

    Args:
        target: a SQLite file path or ``sqlite:///path`` URL.
        durability: ``"normal"`` or ``"full"`` (SQLite synchronous level).
        clock: epoch-milliseconds clock (tests); default: the database's
            (``Backend.clock``: this host's for a file, the server's time on PostgreSQL).
        upgrade: apply pending migrations to an existing database.
        create: create the database if there is none (else ``Unavailable``: a mistyped path
            is not silently a new, empty store).
        read_only: open a SQLite file for reading only (one this process may not write):
            reads work, writes are ``Unavailable`` ("read-only"); the reaper does not run.
        reap_interval_ms: how often (by ``clock``) a poll or a read runs the reaper first.
        rng: the randomness of backoff jitter (seed it for repeatable runs).
        hmac_secret: accepted so that ``Client(target, hmac_secret=...)`` works for a file
            as for a server, and not used: an enqueue here is not signed or checked, as the
            owner of the database file, who runs this client, can read every queue's secret
            anyway (the file's permissions are the boundary). Leased messages still carry
            their ``signature``.
        api_key, ca_cert: accepted, and not used, for the same reason: so that one
            ``Client(target, api_key=..., ca_cert=...)`` call works whether ``target`` is a
            file or a server (a file needs no key; the CLI ignores ``--api-key`` on ``--db``
            too).
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
    ) -> None:
        self.target = os.fspath(target)
        backend = open_backend(target, durability=durability, upgrade=upgrade, create=create,
                               read_only=read_only)
        self.service = QueueService(
            backend, clock=clock, reap_interval_ms=reap_interval_ms, rng=rng,
            reap_when_due=not read_only,
        )
        self._calls = ServiceCalls(self.service)
        self._waits: ThreadPoolExecutor | None = None

    def _waits_thread(self) -> ThreadPoolExecutor:
        """The thread a long poll waits on when called from inside a running event loop."""
        if self._waits is None:
            self._waits = ThreadPoolExecutor(1, thread_name_prefix="sqew-wait")
        return self._waits

    # --- queues ---------------------------------------------------------------------------------
    def create_queue(self, name: str, **settings: Any) -> models.Queue:
        return run_sync(self._calls.create_queue(name, settings))

    def list_queues(self) -> list[models.Queue]:
        return run_sync(self.service.list_queues())

    def get_queue(self, name: str) -> models.Queue:
        return run_sync(self.service.get_queue(name))

    def update_queue(self, name: str, **settings: Any) -> models.Queue:
        return run_sync(self._calls.update_queue(name, settings))

    def pause_queue(self, name: str) -> models.Queue:
        return run_sync(self.service.set_paused(name, True))

    def resume_queue(self, name: str) -> models.Queue:
        return run_sync(self.service.set_paused(name, False))

    def delete_queue(self, name: str) -> None:
        run_sync(self.service.delete_queue(name))

    # --- messages -------------------------------------------------------------------------------
    def enqueue(
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
        return run_sync(self._calls.enqueue(
            queue, payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes))

    def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return run_sync(self._calls.enqueue_batch(queue, messages))

    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        return run_sync(self.service.enqueue(queue, messages))

    def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        call = None
        try:
            call = self._calls.poll(queue, batch=batch, wait_ms=wait_ms,
                                    visibility_ms=visibility_ms, order=order)
            # Only a poll that may wait needs an event loop (its wait is awaited).
            return run_blocking(call, self._waits_thread) if wait_ms else run_sync(call)
        except BaseException:
            # Interrupted (Ctrl-C, SIGTERM) before the poll began: closed, Python prints no
            # "coroutine was never awaited" on stderr.
            if call is not None and inspect.getcoroutinestate(call) == inspect.CORO_CREATED:
                call.close()
            raise

    def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> MessageStream:
        check_arguments(max_in_flight, visibility_ms)
        self.get_queue(queue)  # QueueNotFound now, not at the first message
        return PollStream(
            queue, max_in_flight, visibility_ms, poll=self.poll,
            held=lambda leases: run_sync(self.service.held(queue, leases)),
            give_back=lambda leases: run_sync(self.service.give_back(queue, leases)),
            clock=self.service.clock)

    def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        return run_sync(self._calls.ack(queue, id, token))

    def ack_batch(self, queue: str, acks: Iterable[tuple[int, str]]) -> list[models.ItemResult]:
        return run_sync(self._calls.ack_batch(queue, acks))

    def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        return run_sync(self._calls.nack(queue, id, token, delay_ms=delay_ms, error=error,
                                         dead_letter=dead_letter))

    def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        return run_sync(self._calls.nack_batch(queue, nacks))

    def extend_lease(self, queue: str, id: int, token: str, ms: int) -> models.LeaseExtended:
        return run_sync(self._calls.extend_lease(queue, id, token, ms))

    def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        return run_sync(self._calls.extend_leases(queue, extends))

    def stats(self, queue: str) -> models.Stats:
        return run_sync(self.service.stats(queue))

    def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        return run_sync(self._calls.peek(queue, limit=limit))

    def get_message(self, queue: str, id: int) -> models.Message:
        return run_sync(self._calls.get_message(queue, id))

    def remove_message(self, queue: str, id: int) -> None:
        run_sync(self._calls.remove_message(queue, id))

    def purge(self, queue: str) -> int:
        return run_sync(self.service.purge(queue))

    def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        return run_sync(self._calls.dlq_list(queue, limit=limit, after_id=after_id))

    def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        return run_sync(self._calls.scan(queue, source=source, after_id=after_id,
                                         max_id=max_id, limit=limit))

    def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        return run_sync(self._calls.dlq_requeue(queue, ids))

    def dlq_purge(self, queue: str) -> int:
        return run_sync(self.service.dlq_purge(queue))

    def compact(self, queue: str) -> int:
        return run_sync(self.service.compact(queue))

    # --- API keys (the owner of the database file needs none) -----------------------------------
    def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        return run_sync(self._calls.create_key(scopes, name=name, queue=queue, sqs=sqs))

    def list_keys(self) -> list[models.ApiKey]:
        return run_sync(self.service.list_keys())

    def revoke_key(self, id: str) -> None:
        run_sync(self._calls.revoke_key(id))

    def health(self) -> models.Health:
        return run_sync(self._calls.health())

    def open_access(self) -> None:
        """Stop enforcing API keys on this database, which must have none left (the owner of
        the database's explicit act: from then on a server on it serves anyone who can reach
        it, on loopback). Keys are enforced again from the next key minted."""
        run_sync(self.service.open_access())

    def metrics(self) -> str:
        return run_sync(self._calls.metrics())

    def close(self) -> None:
        if self._waits is not None:
            self._waits.shutdown()
        self.service.close()
