"""AWS's JSON 1.0 protocol for SQS: a request's action and input, an answer's bytes; and the
entry of the Query protocol (``sqew.sqs.query``), which runs the same actions.

A request is a ``POST`` (to ``/`` or to a queue's URL) with ``X-Amz-Target:
AmazonSQS.<Action>`` and a JSON object of the action's input. The answer is the action's output
as JSON (``application/x-amz-json-1.0``), or an error: status 4xx/5xx, the body
``{"__type": "com.amazonaws.sqs#<Code>", "message": …}`` and the header
``x-amzn-query-error: <LegacyCode>;Sender`` (``sqew.sqs.errors``). Every request gets an
``x-amzn-RequestId``; an unexpected failure is logged under it and answered
``InternalFailure``, never with its details.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import msgspec

from sqew import jsonlimits
from sqew.sqs import actions, query, service
from sqew.sqs.errors import SqsError
from sqew.sqs.urls import Context

CONTENT_TYPE = "application/x-amz-json-1.0"
ERROR_TYPE_PREFIX = "com.amazonaws.sqs#"
MAX_DEPTH = 8
"""The deepest request body taken: SQS's inputs nest at most five deep (a batch entry's
attribute's list values); deeper JSON is refused before a decoder recurses into it."""
log = logging.getLogger("sqew.sqs")

Headers = list[tuple[bytes, bytes]]


class Answer(msgspec.Struct, frozen=True):
    """An HTTP answer: status, headers (without the body's length) and body."""

    status: int
    headers: Headers
    body: bytes


async def answer(ctx: Context, target: str | None, body: bytes) -> Answer:
    """The answer to an SQS request (``X-Amz-Target`` value ``target``, ``body``)."""
    request_id = str(uuid.uuid4())
    try:
        action, params = action_of(target), decode(body)
        if ctx.authorize is not None:
            ctx.authorize(action, params)
        output = await actions.run(ctx, action, params)
    except Exception as exc:
        return error(_sqs_error(exc, request_id), request_id)
    return Answer(200, _headers(request_id), msgspec.json.encode(output))


async def answer_query(ctx: Context, form: query.Form,
                       path_queue_url: str | None = None) -> Answer:
    """The answer to an SQS request of the Query protocol (its parameters ``form``; made to
    the queue URL ``path_queue_url``, if so): XML, errors included."""
    request_id = str(uuid.uuid4())
    try:
        action, params = query.decode(form, path_queue_url)
        if ctx.authorize is not None:
            ctx.authorize(action, params)
        output = await actions.run(ctx, action, params)
    except Exception as exc:
        return query_error(_sqs_error(exc, request_id), request_id)
    return Answer(200, _xml_headers(request_id), query.encode(action, output, request_id))


def _sqs_error(exc: Exception, request_id: str) -> SqsError:
    """``exc`` as an answer; an unexpected failure is logged, its details kept from the
    client."""
    if isinstance(exc, SqsError):
        return exc
    log.error("SQS request %s failed", request_id, exc_info=exc)
    return SqsError("InternalFailure", "The request processing has failed because of an "
                    "unknown error, exception or failure.", sender=False)


def action_of(target: str | None) -> str:
    """The action named by an ``X-Amz-Target`` header.

    Raises:
        SqsError: ``InvalidAction``: none, or not one of SQS's.
    """
    if target is None:
        raise SqsError("InvalidAction", "The request has no X-Amz-Target header "
                       "(AmazonSQS.<Action>).")
    action = target.removeprefix(service.TARGET_PREFIX)
    if action == target or action not in service.operations():
        raise SqsError("InvalidAction",
                       f"The action or operation requested is invalid: {target[:100]}")
    return action


def decode(body: bytes) -> Any:
    """The request's JSON input (an empty body is no input).

    Raises:
        SqsError: ``SerializationException``: not JSON.
    """
    if not body.strip():
        return {}
    if jsonlimits.depth(body) > MAX_DEPTH:
        raise SqsError("SerializationException", "The request body is nested too deep.")
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise SqsError("SerializationException", "The request body is not valid JSON.") \
            from None


def waits(body: bytes) -> bool:
    """Whether a ReceiveMessage body asks to wait (``WaitTimeSeconds`` > 0): a long poll, which
    a server counts and bounds. (A malformed body is answered by ``answer``.)"""
    try:
        params = decode(body)
    except SqsError:
        return False
    wait = params.get("WaitTimeSeconds") if isinstance(params, dict) else None
    return isinstance(wait, int) and wait > 0


def error(exc: SqsError, request_id: str | None = None) -> Answer:
    """The answer for ``exc``."""
    body = msgspec.json.encode({"__type": ERROR_TYPE_PREFIX + exc.code, "message": exc.message})
    headers = [*_headers(request_id or str(uuid.uuid4())),
               (b"x-amzn-query-error", f"{exc.legacy_code};{exc.fault}".encode())]
    return Answer(exc.status, headers, body)


def query_error(exc: SqsError, request_id: str | None = None) -> Answer:
    """The Query protocol's answer for ``exc`` (XML)."""
    request_id = request_id or str(uuid.uuid4())
    return Answer(exc.status, _xml_headers(request_id), query.error(exc, request_id))


def _xml_headers(request_id: str) -> Headers:
    return [(b"content-type", query.CONTENT_TYPE.encode()),
            (b"x-amzn-requestid", request_id.encode())]


def _headers(request_id: str) -> Headers:
    return [(b"content-type", CONTENT_TYPE.encode()),
            (b"x-amzn-requestid", request_id.encode())]
