"""HttpClient: the Client API over a sqew server's REST API (docs/rest.md), on httpx.

Same methods, models and errors as ``LocalClient``: JSON answers decode into ``sqew.models``
(payloads into Python values), error envelopes raise the SqewError class named by their code,
and a server that cannot be reached raises ``Unavailable``. The ``httpx.Client`` is injectable,
so tests can pass Litestar's ``TestClient`` (an ``httpx.Client``) to drive an app in-process.
What each method sends and how its answer is read is ``sqew.client.http_calls`` and
``sqew.client.http_wire``, shared with ``sqew.AsyncClient``; this module only sends.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx

from sqew import models
from sqew.client import http_wire
from sqew.client.base import Client
from sqew.client.http_calls import CALLS, Calls
from sqew.client.http_wire import Call
from sqew.client.sse import open_sse
from sqew.client.streams import MessageStream, check_arguments

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 30.0


class HttpClient(Client):
    """A client of a sqew server.

    Args:
        target: the server's base URL, e.g. ``http://127.0.0.1:8888``.
        api_key: sent as ``Authorization: Bearer <key>``.
        hmac_secret: sign every enqueue with it (the ``X-Sqew-Signature`` header over the
            exact body sent), as a queue with that ``hmac_secret`` requires; several secrets
            give one ``v1=`` each (while a queue's secret changes). Never sent itself.
        timeout: seconds to wait for a response (a long poll adds its ``wait_ms``).
        http: an ``httpx.Client`` to use instead of a new one (its base URL is kept); it is
            not closed by ``close()``.
        ca_cert: a PEM file of the CA certificate(s) to verify an ``https://`` server against
            (a private CA), instead of the system's. Certificates are always verified.

    Raises:
        sqew.errors.ValidationError: ``ca_cert`` cannot be read or holds no PEM certificate,
            or ``api_key`` holds a character no HTTP header can carry (surrounding whitespace,
            a line ending kept from a file, is dropped).
    """

    max_json_depth = Calls.max_json_depth

    def __init__(
        self,
        target: str = "http://127.0.0.1:8888",
        *,
        api_key: str | None = None,
        hmac_secret: str | Sequence[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        http: httpx.Client | None = None,
        ca_cert: str | os.PathLike[str] | None = None,
    ) -> None:
        self.base_url = str(target).rstrip("/")
        self.timeout = timeout
        self._wire = http_wire.Wire(self.base_url, api_key=api_key, hmac_secret=hmac_secret,
                                     timeout=timeout)
        self._owned = http is None
        self._http = http or httpx.Client(
            timeout=timeout, verify=http_wire.verify(self.base_url, ca_cert),
        )

    # --- transport ------------------------------------------------------------------------------
    def _run(self, call: Call[T]) -> T:
        r = self._wire.prepare(call, self._http)
        try:
            response = self._http.request(r.method, r.url, content=r.content,
                                          headers=r.headers, timeout=r.timeout)
        except httpx.LocalProtocolError as exc:
            raise self._wire.failed(exc) from None  # its text may quote a key
        except httpx.TransportError as exc:
            raise self._wire.failed(exc) from exc
        return self._wire.answer(call, response)

    # --- queues ---------------------------------------------------------------------------------
    def create_queue(self, name: str, **settings: Any) -> models.Queue:
        return self._run(CALLS.create_queue(name, settings))

    def list_queues(self) -> list[models.Queue]:
        return self._run(CALLS.list_queues())

    def get_queue(self, name: str) -> models.Queue:
        return self._run(CALLS.get_queue(name))

    def update_queue(self, name: str, **settings: Any) -> models.Queue:
        return self._run(CALLS.update_queue(name, settings))

    def pause_queue(self, name: str) -> models.Queue:
        return self._run(CALLS.set_paused(name, True))

    def resume_queue(self, name: str) -> models.Queue:
        return self._run(CALLS.set_paused(name, False))

    def delete_queue(self, name: str) -> None:
        self._run(CALLS.delete_queue(name))

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
        return self._run(CALLS.enqueue(
            queue, payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes))

    def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return self._run(CALLS.enqueue_batch(queue, messages))

    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        return self._run(CALLS.enqueue_checked(queue, messages))

    def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        return self._run(CALLS.poll(queue, batch=batch, wait_ms=wait_ms,
                                    visibility_ms=visibility_ms, order=order))

    def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> MessageStream:
        check_arguments(max_in_flight, visibility_ms)
        call = CALLS.stream(queue, max_in_flight=max_in_flight, visibility_ms=visibility_ms)
        return open_sse(self._http, self._wire, call, queue, max_in_flight)

    def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        return self._run(CALLS.ack(queue, id, token))

    def ack_batch(self, queue: str, acks: Iterable[tuple[int, str]]) -> list[models.ItemResult]:
        return self._run(CALLS.ack_batch(queue, acks))

    def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        return self._run(CALLS.nack(queue, id, token, delay_ms=delay_ms, error=error,
                                    dead_letter=dead_letter))

    def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        return self._run(CALLS.nack_batch(queue, nacks))

    def extend_lease(self, queue: str, id: int, token: str, ms: int) -> models.LeaseExtended:
        return self._run(CALLS.extend_lease(queue, id, token, ms))

    def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        return self._run(CALLS.extend_leases(queue, extends))

    def stats(self, queue: str) -> models.Stats:
        return self._run(CALLS.stats(queue))

    def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        return self._run(CALLS.peek(queue, limit=limit))

    def get_message(self, queue: str, id: int) -> models.Message:
        return self._run(CALLS.get_message(queue, id))

    def remove_message(self, queue: str, id: int) -> None:
        self._run(CALLS.remove_message(queue, id))

    def purge(self, queue: str) -> int:
        return self._run(CALLS.purge(queue))

    def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        return self._run(CALLS.dlq_list(queue, limit=limit, after_id=after_id))

    def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        return self._run(CALLS.scan(queue, source=source, after_id=after_id, max_id=max_id,
                                    limit=limit))

    def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        return self._run(CALLS.dlq_requeue(queue, ids))

    def dlq_purge(self, queue: str) -> int:
        return self._run(CALLS.dlq_purge(queue))

    def compact(self, queue: str) -> int:
        return self._run(CALLS.compact(queue))

    # --- API keys -------------------------------------------------------------------------------
    def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        return self._run(CALLS.create_key(scopes, name=name, queue=queue, sqs=sqs))

    def list_keys(self) -> list[models.ApiKey]:
        return self._run(CALLS.list_keys())

    def revoke_key(self, id: str) -> None:
        self._run(CALLS.revoke_key(id))

    # --- operations -----------------------------------------------------------------------------
    def health(self) -> models.Health:
        return self._run(CALLS.health())

    def ready(self) -> models.Readiness:
        """``/readyz``: raises ``Unavailable`` unless the database answers at the newest schema;
        says whether the server process that answered is overloaded (backpressure)."""
        return self._run(CALLS.ready())

    def metrics(self) -> str:
        """The server's ``/metrics`` in the Prometheus text format."""
        return self._run(CALLS.metrics())

    def close(self) -> None:
        if self._owned:
            self._http.close()

