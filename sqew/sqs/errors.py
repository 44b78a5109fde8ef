"""SQS errors as AWS answers them (docs/sqs.md): the error class and sqew's errors mapped to it.

An answer carries three names: the shape name in ``__type`` (``com.amazonaws.sqs#<Code>``),
which AWS SDKs look up among the service model's modelled exceptions (boto3's
``QueueDoesNotExist``…), and the legacy code of SQS's older Query protocol in the
``x-amzn-query-error: <LegacyCode>;Sender`` header, which SDKs show as the error's code.

The modelled names come from botocore's service model (``sqew.sqs.service``): ``SqsError``
refuses a code that is neither one of them nor one of AWS's common errors, so a typo cannot
reach a client. The legacy codes are not in the JSON service model at all (AWS's Query
protocol documentation names them), hence the one table here.
"""

from __future__ import annotations

from sqew import errors
from sqew.sqs import service

LEGACY_CODES: dict[str, str] = {
    "QueueDoesNotExist": "AWS.SimpleQueueService.NonExistentQueue",
    "QueueNameExists": "QueueAlreadyExists",
    "QueueDeletedRecently": "AWS.SimpleQueueService.QueueDeletedRecently",
    "BatchEntryIdsNotDistinct": "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
    "BatchRequestTooLong": "AWS.SimpleQueueService.BatchRequestTooLong",
    "EmptyBatchRequest": "AWS.SimpleQueueService.EmptyBatchRequest",
    "InvalidBatchEntryId": "AWS.SimpleQueueService.InvalidBatchEntryId",
    "TooManyEntriesInBatchRequest": "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
    "MessageNotInflight": "AWS.SimpleQueueService.MessageNotInflight",
    "PurgeQueueInProgress": "AWS.SimpleQueueService.PurgeQueueInProgress",
    "UnsupportedOperation": "AWS.SimpleQueueService.UnsupportedOperation",
}
"""Modelled error → its legacy (Query protocol) code, where the two differ."""

COMMON: dict[str, int] = {
    "AccessDenied": 403,
    "InvalidAction": 400,
    "InvalidParameterValue": 400,
    "MissingParameter": 400,
    "SerializationException": 400,
    "InvalidQueryParameter": 400,
    "InternalFailure": 500,
    "ServiceUnavailable": 503,
    "RequestThrottled": 400,
    "OverLimit": 403,
    "IncompleteSignature": 400,
    "InvalidClientTokenId": 403,
    "MissingAuthenticationToken": 403,
    "RequestExpired": 400,
    "SignatureDoesNotMatch": 403,
}
"""AWS's common errors (shared by every service, so absent from SQS's model) with their
statuses; ``RequestThrottled`` and ``OverLimit`` are also modelled and listed for the status."""


class SqsError(Exception):
    """An SQS error answer: ``code`` (the shape name), ``message``, HTTP ``status``.

    Raises:
        ValueError: ``code`` is neither a modelled exception of the service model nor one of
            AWS's common errors.
    """

    def __init__(self, code: str, message: str, *, status: int | None = None,
                 sender: bool = True) -> None:
        if code not in COMMON and code not in service.exceptions():
            raise ValueError(f"{code} is not an SQS error")
        self.code = code
        self.message = message
        self.status = status or COMMON.get(code, 400)
        self.sender = sender
        super().__init__(f"{code}: {message}")

    @property
    def legacy_code(self) -> str:
        """The Query protocol's code (the ``x-amzn-query-error`` header's first part)."""
        return LEGACY_CODES.get(self.code, self.code)

    @property
    def fault(self) -> str:
        """``Sender`` (the request was wrong) or ``Receiver`` (the server failed)."""
        return "Sender" if self.sender else "Receiver"


def invalid(message: str) -> SqsError:
    """``InvalidParameterValue`` with ``message``."""
    return SqsError("InvalidParameterValue", message)


def no_queue() -> SqsError:
    """``QueueDoesNotExist``, worded as AWS words it."""
    return SqsError("QueueDoesNotExist", "The specified queue does not exist.")


def from_sqew(exc: errors.SqewError) -> SqsError:
    """The SQS answer to one of sqew's own errors (the one mapping of this transport)."""
    if isinstance(exc, errors.QueueNotFound):
        return no_queue()
    if isinstance(exc, errors.QueueExists):
        return SqsError("QueueNameExists", exc.message)
    if isinstance(exc, errors.PayloadTooLarge):
        return invalid(f"One or more parameters are invalid. Reason: {exc.message}")
    if isinstance(exc, errors.ValidationError | errors.InvalidRequest):
        return invalid(exc.message)
    if isinstance(exc, errors.Unauthorized | errors.InvalidSignature | errors.Forbidden):
        return SqsError("AccessDenied", exc.message)
    if isinstance(exc, errors.QueueFull):
        return SqsError("OverLimit", exc.message)
    if isinstance(exc, errors.RateLimited):
        return SqsError("RequestThrottled", exc.message)
    if isinstance(exc, errors.Overloaded | errors.Unavailable):
        return SqsError("ServiceUnavailable", exc.message, status=503, sender=False)
    if isinstance(exc, errors.LeaseLost | errors.MessageNotFound | errors.NotFound):
        return invalid(exc.message)
    return SqsError("InternalFailure", "The request processing has failed because of an "
                    "unknown error, exception or failure.", sender=False)
