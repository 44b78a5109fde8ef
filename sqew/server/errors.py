"""The server's one error path: every failure becomes the error envelope (docs/rest.md) with
the right status.

``{"error": {"code", "message", "details"?}}`` for sqew's own errors, for what Litestar raises
(unknown path, wrong method, bad query parameter, body over the limit) and for anything
unexpected, which is logged in full (event ``error``, with its traceback) under the request's
id (``sqew.server.access``) and answered with that id only.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from sqew import errors
from sqew.core import rules
from sqew.server.access import new_request_id, request_id_of
from sqew.server.auth import CHALLENGE, REJECTED_BY_AUTH
from sqew.server.metrics import Reason

log = logging.getLogger("sqew.server")
_encode = msgspec.json.Encoder().encode
JSON = "application/json"
REASONS: dict[type[errors.SqewError], Reason] = {
    errors.QueueFull: "quota",
    errors.RateLimited: "rate_limit",
    errors.ValidationError: "validation",
    errors.InvalidRequest: "validation",
    errors.PayloadTooLarge: "validation",
    errors.Unauthorized: "auth",
    errors.Forbidden: "auth",
    errors.InvalidSignature: "signature",
    errors.Overloaded: "overload",
}
"""The rejection reason (metric ``sqew_rejected_total``) of each error that refuses a request."""


def handle(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """Litestar exception handler for every exception type."""
    err, headers = to_sqew_error(request, exc)
    _count(request, err)
    if err.retry_after is not None:
        headers["retry-after"] = str(max(0, math.ceil(err.retry_after)))
    if isinstance(err, errors.Unauthorized):
        headers["www-authenticate"] = CHALLENGE
    return Response(
        content=_encode(err.to_dict()), status_code=err.status, media_type=JSON, headers=headers
    )


def _count(request: Request[Any, Any, Any], err: errors.SqewError) -> None:
    """Count the refusal, and the request where the metrics middleware could not."""
    scope = request.scope
    metrics = request.app.state.runtime.metrics
    reason = "auth" if scope["state"].get(REJECTED_BY_AUTH) else REASONS.get(type(err))
    if reason is not None:
        metrics.rejected(scope.get("path_params", {}).get("q"), reason)
    metrics.error_answered(scope, err.status)


def to_sqew_error(
    request: Request[Any, Any, Any], exc: Exception
) -> tuple[errors.SqewError, dict[str, str]]:
    """The SqewError answering ``exc``, and extra response headers."""
    if isinstance(exc, errors.SqewError):
        if isinstance(exc, errors.InternalError):  # raised by the core for a failure it hid
            return _internal(request, exc)
        return exc, {}
    if isinstance(exc, HTTPException):
        return _from_http(request, exc)
    return _internal(request, exc)


def _from_http(
    request: Request[Any, Any, Any], exc: HTTPException
) -> tuple[errors.SqewError, dict[str, str]]:
    where = f"{request.method} {request.url.path}"
    if isinstance(exc, NotFoundException):
        return errors.NotFound(f"no such endpoint: {where}"), {}
    if isinstance(exc, MethodNotAllowedException):
        allow = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow", "")
        message = f"method {request.method} is not allowed on {request.url.path}"
        return errors.MethodNotAllowed(message + (f" (allowed: {allow})" if allow else "")), (
            {"allow": allow} if allow else {}
        )
    if isinstance(exc, RequestEntityTooLarge):
        limit = request.route_handler.resolve_request_max_body_size()
        # The rest of the body is still on its way: closing the connection stops the upload,
        # where keeping it open would mean reading (and dropping) all of it first.
        return errors.PayloadTooLarge(f"the request body exceeds {limit} bytes"), {
            "connection": "close"
        }
    if isinstance(exc, ValidationException):
        return _validation(request, exc), {}
    if exc.status_code < 500:
        return errors.by_status(exc.status_code)(str(exc.detail)), {}
    return _internal(request, exc)


def _validation(request: Request[Any, Any, Any], exc: ValidationException) -> errors.SqewError:
    """Litestar's parameter validation (query, path, header) as a ValidationError.

    An integer parameter out of its range (or not an integer) is worded as the service words
    its own range checks ("batch must be an integer between 1 and 100"), so the error is the
    same whether a client talks to a server or to a database file.
    """
    bounds = _integer_bounds(request)
    sentences: list[str] = []
    details: list[dict[str, Any]] = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if not isinstance(item, dict):
            continue
        field = str(item.get("key", "$"))
        where = {"in": item["source"]} if "source" in item else {}
        if field in bounds:
            error = rules.range_error(field, *bounds[field])
            sentences.append(error.message)
            details.extend({**d, **where} for d in error.details or [])
        else:
            message = str(item.get("message", ""))
            sentences.append(f"{field}: {message}")
            details.append({"field": field, "message": message, **where})
    text = "; ".join(sentences) or str(exc.detail)
    return errors.ValidationError(text, details=details or None)


def _integer_bounds(request: Request[Any, Any, Any]) -> dict[str, tuple[int, int | None]]:
    """``{parameter: (ge, le)}`` of the integer parameters of the request's route handler."""
    handler = request.scope.get("route_handler")
    if handler is None:
        return {}
    out: dict[str, tuple[int, int | None]] = {}
    for name, field in handler.parsed_fn_signature.parameters.items():
        kwarg = field.kwarg_definition
        low, high = getattr(kwarg, "ge", None), getattr(kwarg, "le", None)
        if isinstance(low, int) and (high is None or isinstance(high, int)) and (
            field.is_subclass_of(int) or field.has_inner_subclass_of(int)
        ):
            out[name] = (low, high)
    return out


def _internal(
    request: Request[Any, Any, Any], exc: Exception
) -> tuple[errors.SqewError, dict[str, str]]:
    request_id = request_id_of(request.scope)
    headers = {}
    if request_id is None:  # an app without its request ids (``access.install``)
        request_id = new_request_id()
        headers["x-request-id"] = request_id
    route = request.scope.get("path_template") or None
    log.error("unhandled %s in %s %s", type(exc).__name__, request.method, route or "-",
              exc_info=exc, extra={
                  "event": "error", "method": request.method, "route": route,
                  "queue": (request.scope.get("path_params") or {}).get("q"),
                  "request_id": request_id})
    return errors.InternalError(f"internal error (request id {request_id})"), headers
