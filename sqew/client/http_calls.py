"""What the HTTP clients send for each ``Client`` method and how they read the answers,
written once for ``HttpClient`` and ``AsyncHttpClient`` (``sqew.client.http_wire`` sends).

Each endpoint is a ``Call``: the method, path, body and query of the request (arguments
validated as every client validates them, ``sqew.client.arguments``) and how its answer
becomes a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from sqew import errors, jsonlimits, models, payloads
from sqew.client.arguments import convert, key_create, key_id, message_in, messages_in
from sqew.client.http_wire import Call, Reader

T = TypeVar("T")


# --- reading answers ----------------------------------------------------------------------------
def decoded(type_: type[T]) -> Reader[T]:
    """Reads an answer as ``type_``."""

    def read(response: httpx.Response, base_url: str) -> T:
        return _decode(type_, response, base_url)

    return read


def _decode(type_: type[T], response: httpx.Response, base_url: str) -> T:
    try:
        return msgspec.json.decode(response.content, type=type_)
    except msgspec.MsgspecError as exc:
        raise errors.InternalError(
            f"unexpected response from {base_url}{response.request.url.path}: {exc}"
        ) from exc


def _messages(type_: type[T]) -> Reader[T]:
    """Reads an answer of messages (one message, or a list under ``messages``), each message
    keeping its payload's text as sent (``sqew.payloads``), which decoding loses: the answer
    is read a second time for it."""

    def read(response: httpx.Response, base_url: str) -> T:
        value = _decode(type_, response, base_url)
        if isinstance(value, models.Message):
            messages: list[Any] = [value]
            raws = [_decode(payloads.RawPayload, response, base_url)]
        else:
            messages = value.messages  # type: ignore[attr-defined]
            raws = list(_decode(payloads.RawPayloads, response, base_url).messages)
        for m, raw in zip(messages, raws, strict=True):
            payloads.keep_text(m, bytes(raw.payload).decode())
        return value

    return read


def _then(read: Reader[Any], pick: Callable[[Any], T]) -> Reader[T]:
    return lambda response, base_url: pick(read(response, base_url))


def _nothing(response: httpx.Response, base_url: str) -> None:
    return None


def _text(response: httpx.Response, base_url: str) -> str:
    return response.text


def q(name: str) -> str:
    """``name`` as one segment of a URL path.

    Percent-encoding keeps any name one segment, except that servers decode ``%2F`` before
    routing and HTTP clients resolve ``.``/``..`` segments: such a name would reach another
    endpoint. None of them can name a queue, so they get the answer a local client gives.
    """
    if "/" in name or name in ("", ".", ".."):
        raise errors.queue_not_found(name)
    return quote(name, safe="")


# --- the endpoints ------------------------------------------------------------------------------
class Calls:
    """The request of each ``Client`` method (docs/rest.md), and how its answer is read.

    The server refuses payloads deeper than its own ``max_json_depth``; checking here only
    keeps what no server accepts from being sent (and from overflowing the encoder's stack).
    """

    max_json_depth = jsonlimits.MAX_DEPTH

    def create_queue(self, name: str, settings: Mapping[str, Any]) -> Call[models.Queue]:
        spec = convert({"name": name, **settings}, models.QueueCreate)
        return Call("POST", "/queues", decoded(models.Queue), body=spec)

    def list_queues(self) -> Call[list[models.Queue]]:
        return Call("GET", "/queues", _then(decoded(models.QueueList), lambda v: v.queues))

    def get_queue(self, name: str) -> Call[models.Queue]:
        return Call("GET", f"/queues/{q(name)}", decoded(models.Queue))

    def update_queue(self, name: str, settings: Mapping[str, Any]) -> Call[models.Queue]:
        body = convert(settings, models.QueueSettings)
        return Call("PATCH", f"/queues/{q(name)}", decoded(models.Queue), body=body)

    def set_paused(self, name: str, paused: bool) -> Call[models.Queue]:
        verb = "pause" if paused else "resume"
        return Call("POST", f"/queues/{q(name)}/{verb}", decoded(models.Queue))

    def delete_queue(self, name: str) -> Call[None]:
        return Call("DELETE", f"/queues/{q(name)}", _nothing)

    def enqueue(
        self, queue: str, payload: Any, *, priority: int | None, delay_ms: int | None,
        ttl_ms: int | None, idempotency_key: str | None, attributes: Mapping[str, str] | None,
    ) -> Call[models.EnqueueResult]:
        msg = message_in(
            payload, priority=priority, delay_ms=delay_ms, ttl_ms=ttl_ms,
            idempotency_key=idempotency_key, attributes=attributes,
            max_json_depth=self.max_json_depth,
        )
        return Call("POST", f"/queues/{q(queue)}/messages", decoded(models.EnqueueResult),
                    body=msg, signed=True)

    def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> Call[list[models.EnqueueResult]]:
        return self.enqueue_checked(
            queue, messages_in(messages, max_json_depth=self.max_json_depth))

    def enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> Call[list[models.EnqueueResult]]:
        return Call("POST", f"/queues/{q(queue)}/messages",
                    _then(decoded(models.EnqueueBatchResult), lambda v: v.messages),
                    body=models.MessageBatchIn(messages), signed=True)

    def poll(
        self, queue: str, *, batch: int, wait_ms: int, visibility_ms: int | None,
        order: str = "priority",
    ) -> Call[list[models.LeasedMessage]]:
        params = {"batch": batch, "wait_ms": wait_ms, "visibility_ms": visibility_ms,
                  "order": None if order == "priority" else order}
        waited = max(0, wait_ms) / 1000 if isinstance(wait_ms, int) else 0
        return Call("POST", f"/queues/{q(queue)}/poll",
                    _then(_messages(models.LeasedMessageList), lambda v: v.messages),
                    params=params, waits_s=waited)

    def stream(
        self, queue: str, *, max_in_flight: int, visibility_ms: int | None
    ) -> Call[None]:
        """The request that opens a stream (its events are read by ``sqew.client.sse``)."""
        return Call("GET", f"/queues/{q(queue)}/stream", _nothing,
                    params={"max_in_flight": max_in_flight, "visibility_ms": visibility_ms},
                    headers={"accept": "text/event-stream"})

    def _results(self, queue: str, verb: str, body: Any) -> Call[list[models.ItemResult]]:
        return Call("POST", f"/queues/{q(queue)}/{verb}",
                    _then(decoded(models.ResultList), lambda v: v.results), body=body)

    def ack(self, queue: str, id: int, token: str) -> Call[models.ItemResult]:
        call = self._results(queue, "ack", {"id": id, "token": token})
        return Call(call.method, call.path, _then(call.read, lambda v: v[0]), body=call.body)

    def ack_batch(
        self, queue: str, acks: Iterable[tuple[int, str]]
    ) -> Call[list[models.ItemResult]]:
        return self._results(queue, "ack", {"acks": [{"id": i, "token": t} for i, t in acks]})

    def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None, error: str | None,
        dead_letter: bool,
    ) -> Call[models.ItemResult]:
        body = _without_none({"id": id, "token": token, "delay_ms": delay_ms, "error": error,
                              "dead_letter": dead_letter or None})
        call = self._results(queue, "nack", body)
        return Call(call.method, call.path, _then(call.read, lambda v: v[0]), body=call.body)

    def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> Call[list[models.ItemResult]]:
        return self._results(queue, "nack", {"nacks": [_without_none(n) for n in nacks]})

    def extend_lease(
        self, queue: str, id: int, token: str, ms: int
    ) -> Call[models.LeaseExtended]:
        return Call("POST", f"/queues/{q(queue)}/extend-lease", decoded(models.LeaseExtended),
                    body={"id": id, "token": token, "ms": ms})

    def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> Call[list[models.ItemResult]]:
        body = {"extends": [{"id": i, "token": t, "ms": ms} for i, t, ms in extends]}
        return self._results(queue, "extend-lease", body)

    def stats(self, queue: str) -> Call[models.Stats]:
        return Call("GET", f"/queues/{q(queue)}/stats", decoded(models.Stats))

    def peek(self, queue: str, *, limit: int) -> Call[list[models.Message]]:
        return Call("GET", f"/queues/{q(queue)}/peek",
                    _then(_messages(models.MessageList), lambda v: v.messages),
                    params={"limit": limit})

    def get_message(self, queue: str, id: int) -> Call[models.Message]:
        return Call("GET", f"/queues/{q(queue)}/messages/{id}", _messages(models.Message))

    def remove_message(self, queue: str, id: int) -> Call[None]:
        return Call("DELETE", f"/queues/{q(queue)}/messages/{id}", _nothing)

    def purge(self, queue: str) -> Call[int]:
        return Call("POST", f"/queues/{q(queue)}/purge",
                    _then(decoded(models.Purged), lambda v: v.purged))

    def dlq_list(
        self, queue: str, *, limit: int, after_id: int | None
    ) -> Call[list[models.Message]]:
        return Call("GET", f"/queues/{q(queue)}/dlq",
                    _then(_messages(models.MessageList), lambda v: v.messages),
                    params={"limit": limit, "after_id": after_id})

    def scan(
        self, queue: str, *, source: str, after_id: int | None, max_id: int | None, limit: int,
    ) -> Call[models.ScanPage]:
        return Call("GET", f"/queues/{q(queue)}/messages", _messages(models.ScanPage),
                    params={"source": source, "after_id": after_id, "max_id": max_id,
                            "limit": limit})

    def dlq_requeue(self, queue: str, ids: Iterable[int] | None) -> Call[models.Requeued]:
        body = None if ids is None else {"ids": list(ids)}
        return Call("POST", f"/queues/{q(queue)}/dlq/requeue", decoded(models.Requeued),
                    body=body)

    def dlq_purge(self, queue: str) -> Call[int]:
        return Call("POST", f"/queues/{q(queue)}/dlq/purge",
                    _then(decoded(models.Purged), lambda v: v.purged))

    def compact(self, queue: str) -> Call[int]:
        return Call("POST", f"/queues/{q(queue)}/compact",
                    _then(decoded(models.Removed), lambda v: v.removed))

    def create_key(
        self, scopes: Iterable[str], *, name: str | None, queue: str | None, sqs: bool,
    ) -> Call[models.KeyCreated]:
        return Call("POST", "/keys", decoded(models.KeyCreated),
                    body=key_create(scopes, name, queue, sqs))

    def list_keys(self) -> Call[list[models.ApiKey]]:
        return Call("GET", "/keys", _then(decoded(models.KeyList), lambda v: v.keys))

    def revoke_key(self, id: str) -> Call[None]:
        return Call("DELETE", f"/keys/{quote(key_id(id), safe='')}", _nothing)

    def health(self) -> Call[models.Health]:
        return Call("GET", "/healthz", decoded(models.Health))

    def ready(self) -> Call[models.Readiness]:
        return Call("GET", "/readyz", decoded(models.Readiness))

    def metrics(self) -> Call[str]:
        return Call("GET", "/metrics", _text, headers={"accept": "text/plain"})


CALLS = Calls()


def _without_none(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None}
