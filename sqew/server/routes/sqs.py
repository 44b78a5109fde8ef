"""The AWS SQS endpoint on the REST server's port (docs/sqs.md): ``POST /`` and ``POST`` to a
queue's URL (``/<account>/<name>``), the JSON 1.0 protocol.

Thin: it reads the body and hands it to ``sqew.sqs.protocol``, which answers in AWS's shapes,
errors included. The routes are open to the REST API's key check (its ``Bearer`` keys and its
error envelope mean nothing to an AWS SDK) and check AWS signatures themselves while API keys
are enforced (``sqew.server.sqs_auth``): the body is read first, as its hash is signed. They
are not part of the REST API's OpenAPI document.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from litestar import Request, post, route
from litestar.enums import HttpMethod
from litestar.exceptions import NotFoundException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.params import PathParameter
from litestar.types import ASGIApp, Receive, Scope, Send

from sqew.server import sqs_auth, wire
from sqew.server.auth import PRINCIPAL
from sqew.server.runtime import Runtime, runtime
from sqew.sqs import protocol
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


@post("/", include_in_schema=False, opt=_OPT, status_code=200)
async def sqs_root(request: Req) -> ASGIApp:
    """An SQS request posted to the endpoint."""
    return await _serve(request)


@route("/{account:str}/{name:str}", http_method=_METHODS, include_in_schema=False, opt=_OPT,
       status_code=200)
async def sqs_queue(request: Req, account: _Part, name: _Part) -> ASGIApp:
    """An SQS request posted to a queue's URL (its ``QueueUrl`` names the queue).

    The path has the shape of any two-part path, so anything else on it (another method, a
    POST that is no SQS request) is answered as an unknown path is: 404 ``NotFound``. A
    form-encoded POST is an SQS request of the Query protocol, answered in AWS's shape.
    """
    headers = request.scope["headers"]
    if request.method != "POST" or not any(
            k == _TARGET or (k == b"content-type" and v.startswith(_FORM)) for k, v in headers):
        raise NotFoundException
    return await _serve(request)


async def _serve(request: Req) -> ASGIApp:
    rt = runtime(request)
    try:
        body = await wire.read_body(request, rt.settings.max_body_bytes)
    except RequestEntityTooLarge:
        return _refused(request, SqsError(
            "InvalidParameterValue", f"The request body is over the server's limit of "
            f"{rt.settings.max_body_bytes} bytes.", status=413))
    principal = None
    if await rt.auth.enforced():
        try:
            principal = await sqs_auth.principal_of(rt.auth, request, body,
                                                    rt.settings.sqs_region)
        except SqsError as exc:
            rt.metrics.rejected(None, "auth")
            return _refused(request, exc)
        request.scope["state"][PRINCIPAL] = principal  # the access log names the key
    headers = dict(request.scope["headers"])
    target = headers[_TARGET].decode("latin-1") if _TARGET in headers else None
    ctx = _context(request, rt, headers)
    if principal is not None:
        ctx = replace(ctx, authorize=sqs_auth.authorizer(principal), reaches=principal.reaches)
    call = protocol.answer(ctx, target, body)
    if target != _LONG_POLL or not protocol.waits(body):
        return _Sent(await call)
    # A receive that may wait: counted and bounded with the REST API's long polls
    # (max_waiting_polls), and ended when its client disconnects.
    if rt.waiting_polls >= rt.settings.max_waiting_polls:
        call.close()
        return _refused(request, SqsError(
            "ServiceUnavailable", f"{rt.waiting_polls} long polls are waiting in this server "
            "process, the most it allows (max_waiting_polls): retry later", sender=False))
    rt.waiting_polls += 1
    rt.metrics.long_poll_started()
    try:
        answer = await wire.unless_disconnected(request, call)
    finally:
        rt.waiting_polls -= 1
        rt.metrics.long_poll_ended()
    return _Sent(answer) if answer else _refused(request, SqsError(
        "ServiceUnavailable", "The client disconnected.", sender=False))


def _refused(request: Req, exc: SqsError) -> ASGIApp:
    """The error answer of a request refused before its action ran, in its protocol's shape.

    Every refusal goes through here: JSON 1.0's today. The Query protocol's requests (a
    form-encoded body) are to be answered with its XML error shape here, once that protocol
    is served."""
    return _Sent(protocol.error(exc))


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
