"""A Client call's Python arguments turned into the wire models (validated the same way for
every client, so a bad argument fails alike locally and over HTTP), and the leased messages'
payloads as sent. This is where a message's fields and payload are checked for every client
and for what is built on them (``Client.enqueue_many``, the CLI, Spark).

A message enqueued inside a span carries that span's trace context (``traceparent``,
``tracestate``) unless it gives its own (docs/rest.md, "Trace context"; ``sqew.telemetry``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import msgspec

from sqew import errors, jsonlimits, models, telemetry
from sqew.client.validation import SETTINGS_MODELS, every_problem, validation_error


def message_in(
    payload: Any, *, max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH, **fields: Any
) -> models.MessageIn:
    """Validate one message given as Python values (payload any JSON-serialisable value).

    A ``msgspec.Raw`` payload is JSON text, kept as it is.

    Args:
        payload: the payload.
        max_json_depth: the deepest payload accepted.
        fields: the message's other fields (``priority``, ``attributes``, …).

    Raises:
        sqew.errors.ValidationError: a field out of range, a payload that is not JSON, nested
            deeper than ``max_json_depth``, or holding a number no client could decode back.
    """
    body = {k: v for k, v in fields.items() if v is not None}
    body["payload"] = payload_text(payload, max_json_depth)
    _with_context(body, telemetry.current_fields())
    result: models.MessageIn = convert(body, models.MessageIn)
    return result


def payload_text(payload: Any, max_json_depth: int) -> msgspec.Raw:
    """A payload as checked JSON text (see ``message_in``)."""
    try:
        text = _encode(payload)
    except RecursionError:  # nested far deeper than any limit: the encoder ran out of stack
        raise jsonlimits.depth_error(max_json_depth) from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise errors.ValidationError(
            f"payload is not JSON-serialisable: {exc}",
            details=[{"field": "payload", "message": str(exc)}],
        ) from None
    if not (isinstance(payload, msgspec.Raw) and max_json_depth >= jsonlimits.MAX_DEPTH):
        # JSON text on its way to a server is left to the server's own max_json_depth (its
        # scanner reads any depth), so the answer is the same as the server gives everyone.
        jsonlimits.check_depth(text, max_json_depth)
    if isinstance(payload, msgspec.Raw):
        # Encoded Python values are always one valid JSON value that decodes back (floats are
        # written with repr, too-long integers refused by the encoder); text given as is may
        # be neither.
        text = json_text(text, max_json_depth)
        jsonlimits.check_numbers(text)
    return msgspec.Raw(text)


def json_text(text: bytes, max_json_depth: int) -> bytes:
    """``text`` as one JSON value in UTF-8, without the whitespace around it.

    Raises:
        sqew.errors.ValidationError: not UTF-8, not JSON, or more than one value.
    """
    try:
        text.decode()
    except UnicodeDecodeError as exc:
        raise errors.ValidationError(
            f"payload is not valid UTF-8 (byte {exc.start + 1})",
            details=[{"field": "payload", "message": "not valid UTF-8"}]) from None
    try:
        value: msgspec.Raw = _raw(text)
    except RecursionError:  # deeper than the decoder goes: far past any limit
        if max_json_depth >= jsonlimits.MAX_DEPTH:
            return text  # on its way to a server: refused there with the server's own limit
        raise jsonlimits.depth_error(max_json_depth) from None
    except msgspec.DecodeError as exc:
        raise errors.ValidationError(
            f"payload is not valid JSON: {exc}",
            details=[{"field": "payload", "message": f"not valid JSON: {exc}"}]) from None
    return bytes(value)


def _with_context(body: dict[str, Any], context: dict[str, str]) -> None:
    """Give a message ``body`` the current trace ``context`` unless it has a traceparent."""
    if context and body.get("traceparent") is None:
        body.update(context)


def message_from_mapping(
    item: Mapping[str, Any], *, max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH,
    context: dict[str, str] | None = None,
) -> models.MessageIn:
    """A message given as a mapping with ``payload`` and optional fields (``context``: the
    trace context it gets unless it has one; default the current span's)."""
    if not isinstance(item, Mapping) or "payload" not in item:
        raise errors.ValidationError(
            "each message needs a payload", details=[{"field": "payload", "message": "required"}]
        )
    fields = {k: v for k, v in item.items() if v is not None}
    fields["payload"] = payload_text(item["payload"], max_json_depth)
    _with_context(fields, telemetry.current_fields() if context is None else context)
    result: models.MessageIn = convert(fields, models.MessageIn)
    return result


def key_create(
    scopes: Iterable[str], name: str | None = None, queue: str | None = None, sqs: bool = False
) -> models.KeyCreate:
    """Validate a new key's request given as Python values (see ``Client.create_key``)."""
    if isinstance(scopes, str):  # one scope as a string (else: a list of its letters)
        scopes = [scopes]
    # Anything else that is not a list is left for the model to refuse, naming `scopes`.
    listed = list(scopes) if isinstance(scopes, Iterable) else scopes
    body = {"name": name, "queue": queue, "scopes": listed, "sqs": sqs or None}
    result: models.KeyCreate = convert(
        {k: v for k, v in body.items() if v is not None}, models.KeyCreate)
    return result


KEY_ID_MAX = 32
"""The longest key id looked up (the REST path's limit; a key's id is 16 hex digits)."""
KEY_PREFIX = "sqew_"
"""What every key starts with (docs/rest.md; ``sqew.core.keys.PREFIX``, not imported: an
``HttpClient`` has no use for the key store's argon2)."""


def key_id(id: str) -> str:
    """``id`` as the id of a key to look up; one no key can have is ``NotFound`` at once.

    Such an id could not travel as one URL path segment (``/``, ``.``, ``..``, empty) or is
    longer than any id. Above all, a whole key pasted where its id belongs is never sent in a
    URL (servers and proxies log paths) nor repeated in the error.
    """
    if 0 < len(id) <= KEY_ID_MAX and "/" not in id and id not in (".", ".."):
        return id
    if id.startswith(KEY_PREFIX):
        raise errors.NotFound("that is an API key, not its id: give the id that "
                              "`sqew keys list` shows")
    if len(id) > KEY_ID_MAX:
        raise errors.NotFound(f"no API key has an id of {len(id)} characters "
                              "(ids are 16 hex digits, as `sqew keys list` shows)")
    raise errors.NotFound(f"no API key with id '{id}'")


_MESSAGE_LIST = list[models.MessageIn]


def messages_in(
    items: Iterable[Mapping[str, Any]], *, max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH
) -> list[models.MessageIn]:
    """Validate a batch of messages given as mappings, in one pass.

    Errors name the message: ``message <i>: <reason>`` (the first that fails).
    """
    batch = list(items)
    context = telemetry.current_fields()
    converted = _all_at_once(batch, context, max_json_depth)
    if converted is not None:
        return converted
    checked = _one_by_one(batch, context, max_json_depth)
    for i, m in enumerate(checked):
        if isinstance(m, errors.ValidationError):
            raise errors.ValidationError(f"message {i}: {m.message}", details=m.details)
    return cast(list[models.MessageIn], checked)  # (no error in it)


def each_message_in(
    items: Iterable[Mapping[str, Any]], *, max_json_depth: int = jsonlimits.DEFAULT_MAX_DEPTH
) -> list[models.MessageIn | errors.ValidationError]:
    """Validate many messages given as mappings: each one's ``MessageIn``, or why it is not
    valid (``message_from_mapping``'s error).

    The whole list is converted at once while nothing looks wrong; otherwise each message is
    checked on its own, precisely.
    """
    batch = list(items)
    context = telemetry.current_fields()
    converted = _all_at_once(batch, context, max_json_depth)
    if converted is not None:
        return list[models.MessageIn | errors.ValidationError](converted)
    return _one_by_one(batch, context, max_json_depth)


def _all_at_once(
    batch: list[Mapping[str, Any]], context: dict[str, str], max_json_depth: int
) -> list[models.MessageIn] | None:
    """Every message of ``batch`` converted in one call, or None when one may not be valid
    (then ``_one_by_one`` says which and why)."""
    bodies: list[dict[str, Any]] = []
    try:
        for item in batch:
            payload = item["payload"]
            text = _encode(payload)
            if text.count(b"[") + text.count(b"{") > max_json_depth or (
                isinstance(payload, msgspec.Raw) and not _plain_json(text)
            ):
                return None  # too deep, or text to check precisely
            raw = msgspec.Raw(text)
            if len(item) == 1:  # the common case: nothing but the payload
                body = {"payload": raw, **context}
            else:
                body = {k: v for k, v in item.items() if v is not None}
                body["payload"] = raw
                _with_context(body, context)
            bodies.append(body)
        result: list[models.MessageIn] = msgspec.convert(bodies, _MESSAGE_LIST)
        return result
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError, KeyError,
            AttributeError, RecursionError):
        return None


def _one_by_one(
    batch: list[Mapping[str, Any]], context: dict[str, str], max_json_depth: int
) -> list[models.MessageIn | errors.ValidationError]:
    """Each message of ``batch`` checked on its own: its ``MessageIn`` or its error."""
    out: list[models.MessageIn | errors.ValidationError] = []
    for item in batch:
        try:
            out.append(message_from_mapping(item, max_json_depth=max_json_depth,
                                            context=context))
        except errors.ValidationError as exc:
            out.append(exc)
    return out


def _plain_json(text: bytes) -> bool:
    """Whether JSON text given as is can be sent as it is: UTF-8, one JSON value with no
    whitespace around it, no number that may not decode back (else ``payload_text`` checks
    it precisely)."""
    try:
        text.decode()
        return bytes(_raw(text)) == text and not jsonlimits.may_overflow(text)
    except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
        return False


def convert(obj: Any, type_: type[Any]) -> Any:
    """``msgspec.convert`` raising sqew's ValidationError with the offending path (for a
    queue's settings, every offending field at once)."""
    try:
        return msgspec.convert(obj, type_)
    except msgspec.ValidationError as exc:
        if type_ in SETTINGS_MODELS:
            raise every_problem(obj, type_, exc) from None
        raise validation_error(exc, source=obj, model=type_) from None


_encode = msgspec.json.Encoder().encode
_raw = msgspec.json.Decoder(msgspec.Raw).decode
