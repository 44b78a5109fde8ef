"""The SqewError tree: one class per error code of docs/rest.md.

Each class carries its ``code`` and HTTP ``status``; its docstring is the default message.
Local and remote clients raise the same classes, so callers catch ``sqew.errors.QueueNotFound``
whether they talk to a file or to a server.
"""

from __future__ import annotations

from typing import Any, ClassVar


class SqewError(Exception):
    """An error in sqew."""

    code: ClassVar[str] = "InternalError"
    status: ClassVar[int] = 500

    def __init__(
        self,
        message: str | None = None,
        *,
        details: list[Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message or (type(self).__doc__ or self.code).strip()
        self.details = details
        self.retry_after = retry_after
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        """The error envelope for this error."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            body["details"] = self.details
        return {"error": body}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidRequest(SqewError):
    """The request is malformed."""

    code = "InvalidRequest"
    status = 400


class ValidationError(SqewError):
    """The request is not valid."""

    code = "ValidationError"
    status = 400


class Unauthorized(SqewError):
    """A valid API key is required."""

    code = "Unauthorized"
    status = 401


class InvalidSignature(SqewError):
    """The request signature is missing, stale or wrong."""

    code = "InvalidSignature"
    status = 401


class Forbidden(SqewError):
    """This key may not do that."""

    code = "Forbidden"
    status = 403


class QueueNotFound(SqewError):
    """No such queue."""

    code = "QueueNotFound"
    status = 404


def queue_not_found(name: str) -> QueueNotFound:
    """The error for a queue ``name`` that does not exist, in the one wording every layer uses."""
    return QueueNotFound(f"queue '{name}' does not exist")


class MessageNotFound(SqewError):
    """No such message."""

    code = "MessageNotFound"
    status = 404


class NotFound(SqewError):
    """Not found."""

    code = "NotFound"
    status = 404


class MethodNotAllowed(SqewError):
    """Method not allowed."""

    code = "MethodNotAllowed"
    status = 405


class QueueExists(SqewError):
    """A queue with that name exists."""

    code = "QueueExists"
    status = 409


class LeaseLost(SqewError):
    """The lease token is no longer current: the message was leased again since."""

    code = "LeaseLost"
    status = 409


class PayloadTooLarge(SqewError):
    """The payload or request body is too large."""

    code = "PayloadTooLarge"
    status = 413


class QueueFull(SqewError):
    """The queue is at its max_depth quota."""

    code = "QueueFull"
    status = 429


class RateLimited(SqewError):
    """The queue's enqueue rate limit is exceeded."""

    code = "RateLimited"
    status = 429


class Overloaded(SqewError):
    """The server is overloaded; retry later."""

    code = "Overloaded"
    status = 503


class InternalError(SqewError):
    """An internal error occurred."""

    code = "InternalError"
    status = 500


class Unavailable(SqewError):
    """The service or its database is unavailable."""

    code = "Unavailable"
    status = 503


_BY_CODE: dict[str, type[SqewError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        ValidationError,
        Unauthorized,
        InvalidSignature,
        Forbidden,
        QueueNotFound,
        MessageNotFound,
        NotFound,
        MethodNotAllowed,
        QueueExists,
        LeaseLost,
        PayloadTooLarge,
        QueueFull,
        RateLimited,
        Overloaded,
        InternalError,
        Unavailable,
    )
}


def by_code(code: str) -> type[SqewError]:
    """The SqewError subclass for an error code (``SqewError`` itself if unknown)."""
    return _BY_CODE.get(code, SqewError)


# An HTTP status without sqew's envelope (a proxy's answer, or what the web framework raises
# before sqew's code runs) stands for the error of this table.
_BY_STATUS: dict[int, type[SqewError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
    429: Overloaded,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def by_status(status: int) -> type[SqewError]:
    """The SqewError subclass an HTTP error status stands for when nothing more is known.

    Statuses not in the table: ``InvalidRequest`` for a 4xx (the request was refused),
    ``InternalError`` otherwise.
    """
    found = _BY_STATUS.get(status)
    if found is not None:
        return found
    return InvalidRequest if 400 <= status < 500 else InternalError


ITEM_ERRORS: dict[str, type[SqewError]] = {
    "lease_lost": LeaseLost,
    "not_found": MessageNotFound,
}
"""The per-item statuses of an ack or nack that are failures, and the error each stands for."""

_ITEM_MESSAGES = {
    "lease_lost": "message {id} was leased again since; the token is stale",
    "not_found": "message {id} does not exist in this queue",
}


def for_item(status: str, msg_id: int, message: str | None = None) -> SqewError:
    """The error of an ack/nack item that failed with ``status`` (see ``ITEM_ERRORS``).

    A single ack or nack raises it; the CLI raises it for a batch with a ``message`` of its own.
    An unknown status counts as ``not_found``.
    """
    known = status if status in ITEM_ERRORS else "not_found"
    return ITEM_ERRORS[known](message or _ITEM_MESSAGES[known].format(id=msg_id))
