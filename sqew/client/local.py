"""LocalClient: the Client API running QueueService in-process on a database file or URL."""

from __future__ import annotations

import os
import random
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec

from sqew import errors, models, payloads
from sqew.backends import open_backend
from sqew.client.arguments import convert, key_create, key_id, message_in, messages_in
from sqew.client.base import Client
from sqew.client.streams import MessageStream, PollStream, check_arguments
from sqew.core.clock import Clock
from sqew.core.rules import check_range
from sqew.core.service import QueueService
from sqew.core.writer import run_blocking, run_sync

_decode = msgspec.json.decode
M = TypeVar("M", bound=models.Message)


def _decoded(messages: list[M]) -> list[M]:
    """The messages with their payloads decoded, each keeping its text as sent
    (``sqew.payloads``: what ``--json``, exports and signatures show)."""
    for m in messages:
        if isinstance(m.payload, msgspec.Raw):
            payloads.keep_text(m, bytes(m.payload).decode())
            m.payload = _decode(m.payload)
    return messages


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
        self._waits: ThreadPoolExecutor | None = None

    def _waits_thread(self) -> ThreadPoolExecutor:
        """The thread a long poll waits on when called from inside a running event loop."""
        if self._waits is None:
            self._waits = ThreadPoolExecutor(1, thread_name_prefix="sqew-wait")
        return self._waits

    # --- queues ---------------------------------------------------------------------------------
    def create_queue(self, name: str, **settings: Any) -> models.Queue:
        spec = convert({"name": name, **settings}, models.QueueCreate)
        return run_sync(self.service.create_queue(spec))

    def list_queues(self) -> list[models.Queue]:
        return run_sync(self.service.list_queues())

    def get_queue(self, name: str) -> models.Queue:
        return run_sync(self.service.get_queue(name))

    def update_queue(self, name: str, **settings: Any) -> models.Queue:
        return run_sync(self.service.update_queue(name, convert(settings, models.QueueSettings)))

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
        msg = message_in(
            payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes,
        )
        return run_sync(self.service.enqueue(queue, [msg]))[0]

    def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return self._enqueue_checked(queue, messages_in(messages))

    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        return run_sync(self.service.enqueue(queue, messages))

    def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        call = self.service.poll(queue, batch=batch, wait_ms=wait_ms, visibility_ms=visibility_ms,
                                 order=order)
        # Only a poll that may wait needs an event loop (its wait is awaited).
        return _decoded(run_blocking(call, self._waits_thread) if wait_ms else run_sync(call))

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
        # Validated as the single item it is, so an error names `id`, as the server's does.
        item = convert({"id": id, "token": token}, models.AckIn)
        result = run_sync(self.service.ack(queue, [(item.id, item.token)]))[0]
        if result.status != "acked":
            raise errors.for_item(result.status, result.id)
        return result

    def ack_batch(self, queue: str, acks: Iterable[tuple[int, str]]) -> list[models.ItemResult]:
        items = convert({"acks": [{"id": i, "token": t} for i, t in acks]}, models.AckBatchIn)
        return run_sync(self.service.ack(queue, [(a.id, a.token) for a in items.acks]))

    def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        body = {"id": id, "token": token, "delay_ms": delay_ms, "error": error,
                "dead_letter": dead_letter or None}
        item = convert({k: v for k, v in body.items() if v is not None}, models.NackIn)
        result = run_sync(self.service.nack(queue, [item]))[0]
        if result.status in errors.ITEM_ERRORS:
            raise errors.for_item(result.status, result.id)
        return result

    def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        items = [{k: v for k, v in n.items() if v is not None} for n in nacks]
        parsed = convert({"nacks": items}, models.NackBatchIn).nacks
        return run_sync(self.service.nack(queue, parsed))

    def extend_lease(self, queue: str, id: int, token: str, ms: int) -> models.LeaseExtended:
        item = convert({"id": id, "token": token, "ms": ms}, models.ExtendLeaseIn)
        return run_sync(self.service.extend_lease(queue, item.id, item.token, item.ms))

    def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        body = {"extends": [{"id": i, "token": t, "ms": ms} for i, t, ms in extends]}
        items = convert(body, models.ExtendLeaseBatchIn).extends
        return run_sync(self.service.extend_leases(queue, [(e.id, e.token, e.ms) for e in items]))

    def stats(self, queue: str) -> models.Stats:
        return run_sync(self.service.stats(queue))

    def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        return _decoded(run_sync(self.service.peek(queue, limit)))

    def get_message(self, queue: str, id: int) -> models.Message:
        check_range("id", id, 1, models.MAX_ID)
        return _decoded([run_sync(self.service.get_message(queue, id))])[0]

    def remove_message(self, queue: str, id: int) -> None:
        check_range("id", id, 1, models.MAX_ID)
        run_sync(self.service.remove_message(queue, id))

    def purge(self, queue: str) -> int:
        return run_sync(self.service.purge(queue))

    def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        if after_id is not None:  # the service checks only the lower bound
            check_range("after_id", after_id, 0, models.MAX_ID)
        return _decoded(run_sync(self.service.dlq_list(queue, limit, after_id)))

    def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        page = run_sync(self.service.scan(queue, source=source, after_id=after_id,
                                          max_id=max_id, limit=limit))
        _decoded(page.messages)
        return page

    def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        body = convert({"ids": None if ids is None else list(ids)}, models.RequeueIn)
        return run_sync(self.service.dlq_requeue(queue, body.ids))

    def dlq_purge(self, queue: str) -> int:
        return run_sync(self.service.dlq_purge(queue))

    def compact(self, queue: str) -> int:
        return run_sync(self.service.compact(queue))

    # --- API keys (the owner of the database file needs none) -----------------------------------
    def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        return run_sync(self.service.create_key(key_create(scopes, name, queue, sqs)))

    def list_keys(self) -> list[models.ApiKey]:
        return run_sync(self.service.list_keys())

    def revoke_key(self, id: str) -> None:
        run_sync(self.service.revoke_key(key_id(id)))

    def health(self) -> models.Health:
        run_sync(self.service.ping())
        return models.Health("ok")

    def open_access(self) -> None:
        """Stop enforcing API keys on this database, which must have none left (the owner of
        the database's explicit act: from then on a server on it serves anyone who can reach
        it, on loopback). Keys are enforced again from the next key minted."""
        run_sync(self.service.open_access())

    def metrics(self) -> str:
        from sqew import queue_metrics  # prometheus-client only for the command that needs it

        return queue_metrics.render_local(run_sync(self.service.all_stats())).decode()

    def close(self) -> None:
        if self._waits is not None:
            self._waits.shutdown()
        self.service.close()
