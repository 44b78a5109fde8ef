"""HttpClient: the Client API over a sqew server's REST API (docs/rest.md), on httpx.

Same methods, models and errors as ``LocalClient``: JSON answers decode into ``sqew.models``
(payloads into Python values), error envelopes raise the SqewError class named by their code,
and a server that cannot be reached raises ``Unavailable``. The ``httpx.Client`` is injectable,
so tests can pass Litestar's ``TestClient`` (an ``httpx.Client``) to drive an app in-process.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from sqew import __version__, errors, jsonlimits, models, payloads, telemetry
from sqew.client import tls
from sqew.client.arguments import convert, key_create, key_id, message_in, messages_in
from sqew.client.base import Client
from sqew.client.sse import open_sse
from sqew.client.streams import MessageStream, check_arguments
from sqew.core import signing

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 30.0
_encode = msgspec.json.Encoder().encode
_ENVELOPE = msgspec.json.Decoder(dict[str, Any])


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

    # The server refuses payloads deeper than its own max_json_depth; checking here only keeps
    # what no server accepts from being sent (and from overflowing the encoder's stack).
    max_json_depth = jsonlimits.MAX_DEPTH

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
        self._hmac_secret = hmac_secret or None
        self.timeout = timeout
        headers = {"user-agent": f"sqew/{__version__}", "accept": "application/json"}
        if api_key and api_key.strip():
            headers["authorization"] = f"Bearer {_header_safe(api_key)}"
        self._owned = http is None
        self._http = http or httpx.Client(
            base_url=self.base_url, timeout=timeout,
            verify=tls.default_context() if ca_cert is None else tls.private_ca(os.fspath(ca_cert)),
        )
        self._headers = headers

    # --- transport ------------------------------------------------------------------------------
    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        signed: bool = False,
    ) -> httpx.Response:
        content = None if body is None else _encode(body)
        all_headers = dict(self._headers)
        if content is not None:
            all_headers["content-type"] = "application/json"
            if signed and self._hmac_secret is not None:  # over the very bytes sent
                all_headers[signing.HEADER] = signing.header(self._hmac_secret, content)
        all_headers.update(headers or {})
        telemetry.inject_headers(all_headers)  # the server's span continues the caller's trace
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self._http.request(
                method, self._url(path), content=content, params=query, headers=all_headers,
                timeout=timeout if timeout is not None else self.timeout,
            )
        except httpx.TimeoutException as exc:
            raise errors.Unavailable(
                f"the server at {self.base_url} did not answer in time ({type(exc).__name__})"
            ) from exc
        except httpx.LocalProtocolError:  # its text (and a chained traceback) quotes the
            # offending header, which may hold a key: neither is passed on
            raise errors.ValidationError(
                "the request cannot be sent: it is not valid HTTP (a header value with a "
                "control character or surrounding whitespace, say)"
            ) from None
        except httpx.TransportError as exc:
            if tls.certificate_error(exc):
                raise errors.Unavailable(
                    f"cannot verify the TLS certificate of {self.base_url}: {exc} (for a "
                    "server with a private CA, give its CA certificate: ca_cert, --ca-cert)"
                ) from exc
            raise errors.Unavailable(f"cannot reach server at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _url(self, path: str) -> str:
        # An injected httpx.Client may carry its own base URL (Litestar's TestClient does).
        return path if str(self._http.base_url) else self.base_url + path

    def _call(self, type_: type[T], method: str, path: str, **kwargs: Any) -> T:
        return self._decode(type_, self._request(method, path, **kwargs), path)

    def _decode(self, type_: type[T], response: httpx.Response, path: str) -> T:
        try:
            return msgspec.json.decode(response.content, type=type_)
        except msgspec.MsgspecError as exc:
            raise errors.InternalError(
                f"unexpected response from {self.base_url}{path}: {exc}"
            ) from exc

    def _messages(self, type_: type[T], response: httpx.Response, path: str) -> T:
        """An answer of messages (one message, or a list under ``messages``) decoded, each
        message keeping its payload's text as sent (``sqew.payloads``), which decoding loses:
        the answer is read a second time for it."""
        value = self._decode(type_, response, path)
        if isinstance(value, models.Message):
            messages: list[Any] = [value]
            raws = [self._decode(payloads.RawPayload, response, path)]
        else:
            messages = value.messages  # type: ignore[attr-defined]
            raws = list(self._decode(payloads.RawPayloads, response, path).messages)
        for m, raw in zip(messages, raws, strict=True):
            payloads.keep_text(m, bytes(raw.payload).decode())
        return value

    @staticmethod
    def _q(name: str) -> str:
        """``name`` as one segment of a URL path.

        Percent-encoding keeps any name one segment, except that servers decode ``%2F`` before
        routing and HTTP clients resolve ``.``/``..`` segments: such a name would reach another
        endpoint. None of them can name a queue, so they get the answer a local client gives.
        """
        if "/" in name or name in ("", ".", ".."):
            raise errors.queue_not_found(name)
        return quote(name, safe="")

    # --- queues ---------------------------------------------------------------------------------
    def create_queue(self, name: str, **settings: Any) -> models.Queue:
        spec = convert({"name": name, **settings}, models.QueueCreate)
        return self._call(models.Queue, "POST", "/queues", body=spec)

    def list_queues(self) -> list[models.Queue]:
        return self._call(models.QueueList, "GET", "/queues").queues

    def get_queue(self, name: str) -> models.Queue:
        return self._call(models.Queue, "GET", f"/queues/{self._q(name)}")

    def update_queue(self, name: str, **settings: Any) -> models.Queue:
        body = convert(settings, models.QueueSettings)
        return self._call(models.Queue, "PATCH", f"/queues/{self._q(name)}", body=body)

    def pause_queue(self, name: str) -> models.Queue:
        return self._call(models.Queue, "POST", f"/queues/{self._q(name)}/pause")

    def resume_queue(self, name: str) -> models.Queue:
        return self._call(models.Queue, "POST", f"/queues/{self._q(name)}/resume")

    def delete_queue(self, name: str) -> None:
        self._request("DELETE", f"/queues/{self._q(name)}")

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
            max_json_depth=self.max_json_depth,
        )
        return self._call(models.EnqueueResult, "POST", f"/queues/{self._q(queue)}/messages",
                          body=msg, signed=True)

    def enqueue_batch(
        self, queue: str, messages: Iterable[Mapping[str, Any]]
    ) -> list[models.EnqueueResult]:
        return self._enqueue_checked(
            queue, messages_in(messages, max_json_depth=self.max_json_depth))

    def _enqueue_checked(
        self, queue: str, messages: list[models.MessageIn]
    ) -> list[models.EnqueueResult]:
        result = self._call(models.EnqueueBatchResult, "POST",
                            f"/queues/{self._q(queue)}/messages",
                            body=models.MessageBatchIn(messages), signed=True)
        return result.messages

    def poll(
        self, queue: str, *, batch: int = 1, wait_ms: int = 0, visibility_ms: int | None = None,
        order: str = "priority",
    ) -> list[models.LeasedMessage]:
        params = {"batch": batch, "wait_ms": wait_ms, "visibility_ms": visibility_ms,
                  "order": None if order == "priority" else order}
        waited = max(0, wait_ms) / 1000 if isinstance(wait_ms, int) else 0
        path = f"/queues/{self._q(queue)}/poll"
        response = self._request("POST", path, params=params, timeout=self.timeout + waited)
        return self._messages(models.LeasedMessageList, response, path).messages

    def stream(
        self, queue: str, *, max_in_flight: int = models.DEFAULT_STREAM_IN_FLIGHT,
        visibility_ms: int | None = None,
    ) -> MessageStream:
        check_arguments(max_in_flight, visibility_ms)
        return open_sse(self, f"/queues/{self._q(queue)}/stream", queue, max_in_flight,
                        visibility_ms)

    def ack(self, queue: str, id: int, token: str) -> models.ItemResult:
        body = {"id": id, "token": token}
        return self._call(models.ResultList, "POST", f"/queues/{self._q(queue)}/ack",
                          body=body).results[0]

    def ack_batch(self, queue: str, acks: Iterable[tuple[int, str]]) -> list[models.ItemResult]:
        body = {"acks": [{"id": i, "token": t} for i, t in acks]}
        return self._call(models.ResultList, "POST", f"/queues/{self._q(queue)}/ack",
                          body=body).results

    def nack(
        self, queue: str, id: int, token: str, *, delay_ms: int | None = None,
        error: str | None = None, dead_letter: bool = False,
    ) -> models.ItemResult:
        body = _without_none({"id": id, "token": token, "delay_ms": delay_ms, "error": error,
                              "dead_letter": dead_letter or None})
        return self._call(models.ResultList, "POST", f"/queues/{self._q(queue)}/nack",
                          body=body).results[0]

    def nack_batch(
        self, queue: str, nacks: Iterable[Mapping[str, Any]]
    ) -> list[models.ItemResult]:
        body = {"nacks": [_without_none(n) for n in nacks]}
        return self._call(models.ResultList, "POST", f"/queues/{self._q(queue)}/nack",
                          body=body).results

    def extend_lease(self, queue: str, id: int, token: str, ms: int) -> models.LeaseExtended:
        body = {"id": id, "token": token, "ms": ms}
        return self._call(models.LeaseExtended, "POST",
                          f"/queues/{self._q(queue)}/extend-lease", body=body)

    def extend_leases(
        self, queue: str, extends: Iterable[tuple[int, str, int]]
    ) -> list[models.ItemResult]:
        body = {"extends": [{"id": i, "token": t, "ms": ms} for i, t, ms in extends]}
        return self._call(models.ResultList, "POST", f"/queues/{self._q(queue)}/extend-lease",
                          body=body).results

    def stats(self, queue: str) -> models.Stats:
        return self._call(models.Stats, "GET", f"/queues/{self._q(queue)}/stats")

    def peek(self, queue: str, *, limit: int = 10) -> list[models.Message]:
        path = f"/queues/{self._q(queue)}/peek"
        response = self._request("GET", path, params={"limit": limit})
        return self._messages(models.MessageList, response, path).messages

    def get_message(self, queue: str, id: int) -> models.Message:
        path = f"/queues/{self._q(queue)}/messages/{id}"
        return self._messages(models.Message, self._request("GET", path), path)

    def remove_message(self, queue: str, id: int) -> None:
        self._request("DELETE", f"/queues/{self._q(queue)}/messages/{id}")

    def purge(self, queue: str) -> int:
        return self._call(models.Purged, "POST", f"/queues/{self._q(queue)}/purge").purged

    def dlq_list(
        self, queue: str, *, limit: int = 100, after_id: int | None = None
    ) -> list[models.Message]:
        path = f"/queues/{self._q(queue)}/dlq"
        response = self._request("GET", path, params={"limit": limit, "after_id": after_id})
        return self._messages(models.MessageList, response, path).messages

    def scan(
        self, queue: str, *, source: str = "queue", after_id: int | None = None,
        max_id: int | None = None, limit: int = 100,
    ) -> models.ScanPage:
        path = f"/queues/{self._q(queue)}/messages"
        response = self._request("GET", path, params={
            "source": source, "after_id": after_id, "max_id": max_id, "limit": limit})
        return self._messages(models.ScanPage, response, path)

    def dlq_requeue(
        self, queue: str, ids: Iterable[int] | None = None
    ) -> models.Requeued:
        body = None if ids is None else {"ids": list(ids)}
        return self._call(models.Requeued, "POST", f"/queues/{self._q(queue)}/dlq/requeue",
                          body=body)

    def dlq_purge(self, queue: str) -> int:
        return self._call(models.Purged, "POST", f"/queues/{self._q(queue)}/dlq/purge").purged

    def compact(self, queue: str) -> int:
        return self._call(models.Removed, "POST", f"/queues/{self._q(queue)}/compact").removed

    # --- API keys -------------------------------------------------------------------------------
    def create_key(
        self, scopes: Iterable[str], *, name: str | None = None, queue: str | None = None,
        sqs: bool = False,
    ) -> models.KeyCreated:
        return self._call(models.KeyCreated, "POST", "/keys",
                          body=key_create(scopes, name, queue, sqs))

    def list_keys(self) -> list[models.ApiKey]:
        return self._call(models.KeyList, "GET", "/keys").keys

    def revoke_key(self, id: str) -> None:
        self._request("DELETE", f"/keys/{quote(key_id(id), safe='')}")

    # --- operations -----------------------------------------------------------------------------
    def health(self) -> models.Health:
        return self._call(models.Health, "GET", "/healthz")

    def ready(self) -> models.Readiness:
        """``/readyz``: raises ``Unavailable`` unless the database answers at the newest schema;
        says whether the server process that answered is overloaded (backpressure)."""
        return self._call(models.Readiness, "GET", "/readyz")

    def metrics(self) -> str:
        """The server's ``/metrics`` in the Prometheus text format."""
        return self._request("GET", "/metrics", headers={"accept": "text/plain"}).text

    def close(self) -> None:
        if self._owned:
            self._http.close()


def _header_safe(api_key: str) -> str:
    """``api_key`` without surrounding whitespace, checked to be visible ASCII (what a header
    carries as is); the error never quotes it."""
    key = api_key.strip()
    if not all("!" <= c <= "~" for c in key):
        raise errors.ValidationError(
            "the API key holds a character an HTTP header cannot carry (a space, a control "
            "character or a non-ASCII one); a key is sqew_<id>_<secret>"
        )
    return key


def _without_none(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if v is not None}


def _error(response: httpx.Response) -> errors.SqewError:
    """The SqewError an error response stands for (its envelope, or its status)."""
    retry_after = _retry_after(response.headers.get("retry-after"))
    try:
        body = _ENVELOPE.decode(response.content)["error"]
        code, message = str(body["code"]), str(body["message"])
        details = body.get("details")
    except (msgspec.MsgspecError, KeyError, TypeError):
        cls = errors.by_status(response.status_code)
        text = response.text.strip()[:200] or response.reason_phrase
        return cls(f"HTTP {response.status_code} from the server: {text}",
                   retry_after=retry_after)
    return errors.by_code(code)(
        message, details=details if isinstance(details, list) else None, retry_after=retry_after
    )


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None

