"""The AWS SQS endpoint on the REST server's port (docs/sqs.md): ``POST /`` and ``POST`` to a
queue's URL (``/<account>/<name>``): the JSON 1.0 protocol (``X-Amz-Target``) and the Query
protocol (a form body, or a GET's query string, with ``Action=…``).

Thin: it reads the request and hands it to ``sqew.sqs.protocol``, which answers in AWS's
shapes, errors included. The routes are open to the REST API's key check (its ``Bearer`` keys
and its error envelope mean nothing to an AWS SDK) and check AWS signatures themselves while API
keys are enforced (``sqew.server.sqs_auth``): the body is read first, as its hash is signed.
They are not part of the REST API's OpenAPI document.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import parse_qsl

from litestar import Request, route
from litestar.enums import HttpMethod
from litestar.exceptions import NotFoundException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.params import PathParameter
from litestar.types import ASGIApp, Receive, Scope, Send

from sqew.server import sqs_auth, wire
from sqew.server.auth import PRINCIPAL
from sqew.server.runtime import Runtime, runtime
from sqew.sqs import protocol, query
from sqew.sqs.errors import SqsError
from sqew.sqs.urls import Context

Req = Request[Any, Any, Any]
_TARGET = b"x-amz-target"
_HOST = b"host"
_LONG_POLL = "AmazonSQS.ReceiveMessage"
_OPT = {"access": "open"}
_METHODS = [HttpMethod.GET, HttpMethod.POST, HttpMethod.PUT, HttpMethod.PATCH, HttpMethod.DELETE]
_FORM = b"application/x-www-form-urlencoded"
_Part = Annotated[str, PathParameter()]


@route("/", http_method=[HttpMethod.GET, HttpMethod.POST], include_in_schema=False, opt=_OPT,
       status_code=200)
async def sqs_root(request: Req) -> ASGIApp:
    """An SQS request to the endpoint: posted, or a GET with ``Action`` in its query string
    (any other GET is an unknown path's 404)."""
    if request.method == "GET" and not _query_action(request):
        raise NotFoundException
    return await _serve(request)


@route("/{account:str}/{name:str}", http_method=_METHODS, include_in_schema=False, opt=_OPT,
       status_code=200)
async def sqs_queue(request: Req, account: _Part, name: _Part) -> ASGIApp:
    """An SQS request posted to a queue's URL (its ``QueueUrl`` names the queue).

    The path has the shape of any two-part path, so anything else on it (another method, a
    POST that is no SQS request) is answered as an unknown path is: 404 ``NotFound``. A
    form-encoded POST, or a GET with ``Action`` in its query string, is an SQS request of the
    Query protocol, which may leave ``QueueUrl`` out (the path names the queue).
    """
    headers = request.scope["headers"]
    if request.method == "GET" and _query_action(request):
        return await _serve(request, f"/{account}/{name}")
    if request.method != "POST" or not any(
            k == _TARGET or (k == b"content-type" and v.startswith(_FORM)) for k, v in headers):
        raise NotFoundException
    return await _serve(request, f"/{account}/{name}")


def _query_action(request: Req) -> bool:
    return any(k == "Action" for k, _ in parse_qsl(request.scope["query_string"].decode(
        "latin-1")))


async def _serve(request: Req, queue_url: str | None = None) -> ASGIApp:
    rt = runtime(request)
    headers = dict(request.scope["headers"])
    is_query = _TARGET not in headers and (
        request.method == "GET" or headers.get(b"content-type", b"").startswith(_FORM))
    fail = protocol.query_error if is_query else protocol.error
    try:
        body = await wire.read_body(request, rt.settings.max_body_bytes)
    except RequestEntityTooLarge:
        return _Sent(fail(SqsError(
            "InvalidParameterValue", f"The request body is over the server's limit of "
            f"{rt.settings.max_body_bytes} bytes.", status=413)))
    principal = None
    if await rt.auth.enforced():
        try:
            principal = await sqs_auth.principal_of(rt.auth, request, body,
                                                    rt.settings.sqs_region)
        except SqsError as exc:
            rt.metrics.rejected(None, "auth")
            return _Sent(fail(exc))
        request.scope["state"][PRINCIPAL] = principal  # the access log names the key
    ctx = _context(request, rt, headers)
    if principal is not None:
        ctx = replace(ctx, authorize=sqs_auth.authorizer(principal), reaches=principal.reaches)
    if is_query:
        try:
            form = dict(parse_qsl(request.scope["query_string"].decode("latin-1"),
                                  keep_blank_values=True, errors="strict"))
            form.update(parse_qsl(body.decode(), keep_blank_values=True, errors="strict"))
        except UnicodeDecodeError:
            return _Sent(fail(SqsError("InvalidParameterValue", "The request's parameters "
                                       "are not form-encoded UTF-8 text.")))
        call = protocol.answer_query(ctx, form, queue_url)
        long_poll = query.waits(form)
    else:
        target = headers[_TARGET].decode("latin-1") if _TARGET in headers else None
        call = protocol.answer(ctx, target, body)
        long_poll = target == _LONG_POLL and protocol.waits(body)
    if not long_poll:
        return _Sent(await call)
    # A receive that may wait: counted and bounded with the REST API's long polls
    # (max_waiting_polls), and ended when its client disconnects.
    if rt.waiting_polls >= rt.settings.max_waiting_polls:
        call.close()
        return _Sent(fail(SqsError(
            "ServiceUnavailable", f"{rt.waiting_polls} long polls are waiting in this server "
            "process, the most it allows (max_waiting_polls): retry later", sender=False)))
    rt.waiting_polls += 1
    rt.metrics.long_poll_started()
    try:
        answer = await wire.unless_disconnected(request, call)
    finally:
        rt.waiting_polls -= 1
        rt.metrics.long_poll_ended()
    return _Sent(answer or fail(SqsError(
        "ServiceUnavailable", "The client disconnected.", sender=False)))


def _context(request: Req, rt: Runtime, headers: dict[bytes, bytes]) -> Context:
    s = rt.settings
    host = headers.get(_HOST, b"").decode("latin-1")
    if not host:  # (HTTP/1.0 may send none) the address the request reached
        address, port = request.scope.get("server") or ("127.0.0.1", 0)
        host = f"{address}:{port}"
    return Context(service=rt.service, base_url=f"{request.scope['scheme']}://{host}",
                   account=s.sqs_account_id, region=s.sqs_region,
                   gone=wire.client_gone(request), max_json_depth=s.max_json_depth)


class _Sent:
    """An ASGI answer of ``protocol.Answer``."""

    __slots__ = ("answer",)

    def __init__(self, answer: protocol.Answer) -> None:
        self.answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        a = self.answer
        await send({"type": "http.response.start", "status": a.status,
                    "headers": [*a.headers, (b"content-length", str(len(a.body)).encode())]})
        await send({"type": "http.response.body", "body": a.body, "more_body": False})


HANDLERS = [sqs_root, sqs_queue]
