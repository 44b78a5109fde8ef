"""Request and response bodies on the wire: reading, checking, decoding, sending.

The hot endpoints (enqueue, poll, ack) read and write their bodies with ``read_body`` and
``JsonResponse`` instead of ``Request.body()`` and a returned model. Litestar builds the
request's header map and an async generator to read a body, and a Response, then an
ASGIResponse, to send one: together about a fifth of an enqueue's cost on the event loop
(docs/benchmarks.md). The bytes on the wire are the same; the handlers declare their response
model in ``opt["returns"]`` for the OpenAPI document.

Every body is checked for depth before msgspec decodes it (a decoder recurses per level, and
~1000 levels are a ``RecursionError``), and payloads for numbers no client can decode back
(``sqew.jsonlimits``): both are a 400 ``ValidationError``, never a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar, cast

import msgspec
from litestar import Request
from litestar.exceptions import ClientException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.params import PathParameter
from litestar.types import Empty, Receive, Scope, Send
from litestar.utils.scope.state import ScopeState

from sqew import errors, jsonlimits, models
from sqew.client.validation import SETTINGS_MODELS, every_problem, validation_error
from sqew.payloads import RawPayload, RawPayloads
from sqew.server.protocols import CLIENT_GONE
from sqew.settings import Settings

T = TypeVar("T")

QueuePath = Annotated[str, PathParameter(description="queue name")]
"""The ``{q}`` path parameter of every queue route."""

NAMES_A_DLQ = ("ValidationError: the operation acts on a queue's dead-letter queue, and q "
               "names a dead-letter queue (`<queue>.dlq`): name its queue")
"""The refusal (``opt["refusals"]``, see ``sqew.server.openapi``) of the routes that act on
the DLQ of the queue they name."""

_encode = msgspec.json.Encoder().encode


def client_gone(request: Request[Any, Any, Any]) -> Callable[[], bool] | None:
    """Whether the request's client has gone, asked of the connection without waiting (sqew's
    HTTP protocol puts it in the scope, ``protocols.CLIENT_GONE``); None under another server.

    A client gone shows as soon as the server has read its FIN or RST, even when the app has
    not read the request's ``http.disconnect`` yet (nobody awaits ``receive`` in a poll that
    does not wait).
    """
    return cast("Callable[[], bool] | None", request.scope.get(CLIENT_GONE))


async def unless_disconnected(request: Request[Any, Any, Any], call: Awaitable[T]) -> T | None:
    """Await ``call``, or cancel it and return None if the client disconnects first (a long
    poll then leases nothing: nobody would receive it)."""
    task = asyncio.ensure_future(call)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


async def _disconnected(request: Request[Any, Any, Any]) -> None:
    """Return when the client disconnects (the ASGI server's ``http.disconnect``)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The request body, refused while streaming once it exceeds ``limit`` bytes.

    Shares Litestar's cache of the body, so ``Request.body()`` before or after still works.

    Raises:
        RequestEntityTooLarge: over the limit (by ``Content-Length`` or as read), the same
            refusal as Litestar's own body reading.
        ClientException: the client went away before the body ended.
    """
    state = ScopeState.from_scope(request.scope)
    if state.body is not Empty:
        return state.body
    for name, value in request.scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise RequestEntityTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await request.receive()
        if message["type"] != "http.request":
            raise ClientException("the client disconnected before the body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise RequestEntityTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            state.body = body
            return body


class JsonResponse:
    """A model sent as JSON: what Litestar sends for a returned model, as two ASGI messages.

    Litestar's own ``ASGIResponse`` builds a header map per response (cookies, HEAD, background
    tasks): none of which these POST answers have, and a third of an enqueue's handler time.
    """

    __slots__ = ("body", "status")

    def __init__(self, model: msgspec.Struct, status: int = 200) -> None:
        self.body = _encode(model)
        self.status = status

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(self.body)).encode())]})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


def batch_key(key: bytes) -> re.Pattern[bytes]:
    """A pattern telling a batch body (``{"<key>": [...]}``) from a single item, by its start.

    A valid batch body has exactly one key, so looking at the first one decides; anything else
    is decoded as a single item, whose decoder rejects unknown fields.
    """
    return re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"' + re.escape(key) + rb'"[ \t\r\n]*:')


async def read_json(request: Request[Any, Any, Any], type_: type[T], settings: Settings) -> T:
    """Read and decode a body that carries no payload (see ``read_body`` and ``decode``)."""
    body = await read_body(request, settings.max_body_bytes)
    return decode(body, type_, settings.max_json_depth)


def decode(body: bytes, type_: type[T], max_depth: int) -> T:
    """Decode a JSON body that carries no payload (acks, nacks, queue settings, …).

    Args:
        body: the body.
        type_: the request model.
        max_depth: the server's ``max_json_depth``; such bodies may nest
            ``jsonlimits.BATCH_LEVELS`` deeper (their own shapes are that deep).

    Raises:
        sqew.errors.InvalidRequest: empty, not UTF-8 or not JSON.
        sqew.errors.ValidationError: JSON of the wrong shape (with ``details``), or nested too
            deep.
    """
    _check_text(body)
    jsonlimits.check_depth(body, max_depth, levels=jsonlimits.BATCH_LEVELS,
                           what="the request body", field="$")
    return _decode(body, type_)


def decode_message(body: bytes, max_depth: int) -> models.MessageIn:
    """Decode the body of a single-message enqueue, refusing payloads clients cannot read.

    Raises:
        sqew.errors.InvalidRequest: empty, not UTF-8 or not JSON.
        sqew.errors.ValidationError: not a valid message, the payload nested deeper than
            ``max_depth``, or holding a number out of every decoder's range.
    """
    _check_text(body)
    numbers = jsonlimits.check_payload_depth(body, max_depth, levels=jsonlimits.MESSAGE_LEVELS)
    message = _decode(body, models.MessageIn)
    if numbers:
        jsonlimits.check_numbers(bytes(message.payload))
    return message


def decode_batch(body: bytes, max_depth: int) -> models.MessageBatchIn:
    """Decode the body of a batch enqueue (see ``decode_message``); errors name the message."""
    _check_text(body)
    try:
        numbers = jsonlimits.check_payload_depth(body, max_depth,
                                                 levels=jsonlimits.BATCH_LEVELS)
    except errors.ValidationError as exc:
        i = jsonlimits.too_deep_item(body, max_depth + jsonlimits.BATCH_LEVELS, 3)
        if i is None:
            raise
        details = [{**d, "field": f"messages[{i}].payload"} for d in exc.details or []]
        raise errors.ValidationError(f"message {i}: {exc.message}", details=details) from None
    batch = _decode(body, models.MessageBatchIn)
    if numbers:  # the whole body may hold one: look at each payload
        for i, message in enumerate(batch.messages):
            try:
                jsonlimits.check_numbers(bytes(message.payload))
            except errors.ValidationError as exc:
                details = [{**d, "field": f"messages[{i}].payload"} for d in exc.details or []]
                raise errors.ValidationError(f"message {i}: {exc.message}",
                                             details=details) from None
    return batch


def _check_text(body: bytes) -> None:
    if not body.strip():
        raise errors.InvalidRequest("the request needs a JSON body")
    try:
        # Raw payloads are kept as sent and not checked by the decoder: check the encoding here.
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidRequest(f"the body is not UTF-8 (byte {exc.start})") from None


def _decode(body: bytes, type_: type[T], *, rewritten: bool = False) -> T:
    try:
        return msgspec.json.decode(body, type=type_)
    except msgspec.ValidationError as exc:
        if not rewritten and _FLOAT_FOR_INT.search(str(exc)):
            whole = _integral_floats_as_ints(body)
            if whole is not None:
                return _decode(whole, type_, rewritten=True)
        if type_ in SETTINGS_MODELS:  # a queue's settings: every problem at once
            raise every_problem(msgspec.json.decode(body), type_, exc) from None
        raise validation_error(exc, source=body, model=type_) from None
    except msgspec.DecodeError as exc:
        raise errors.InvalidRequest(f"malformed JSON: {exc}") from None


# An integer field takes any JSON number without a fraction, as JSON Schema's "integer" does
# (the OpenAPI document's word): 5, 5.0 and 5e0 are one number, and a generated client (or
# JavaScript's JSON.stringify, or Python's json.dumps of a float) may write it either way.
# msgspec reads 5.0 as a float and refuses it for an int: only then is the body rewritten, with
# every whole float outside the payloads as an integer, and decoded again. Payloads keep their
# exact text (``msgspec.Raw``), so nothing the producer sent changes.
_FLOAT_FOR_INT = re.compile(r"Expected `(int|int \| [^`]*)`, got `float`")


def _integral_floats_as_ints(body: bytes) -> bytes | None:
    """``body`` with every integral float outside payloads written as an integer; None when it
    cannot be read so (the original error then stands)."""
    try:
        value = msgspec.json.decode(body)
        if isinstance(value, dict) and "payload" in value:
            value["payload"] = msgspec.json.decode(body, type=RawPayload).payload
        elif isinstance(value, dict) and isinstance(value.get("messages"), list):
            raw = msgspec.json.decode(body, type=RawPayloads).messages
            for item, kept in zip(value["messages"], raw, strict=True):
                if isinstance(item, dict) and "payload" in item:
                    item["payload"] = kept.payload
        return msgspec.json.encode(_whole(value))
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None


def _whole(value: Any) -> Any:
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value  # str, int, bool, None, or a payload's Raw text
