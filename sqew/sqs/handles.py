"""Receipt handles: a leased message's id and lease token, with its queue, made opaque.

A handle is URL-safe base64 of ``<queue>/<id>/<token>``: what an ack or an extend-lease needs,
and the queue it was received from, so that a handle given to another queue is refused as
SQS refuses it. Garbage is ``ReceiptHandleIsInvalid``; a well-formed handle whose lease has
moved on is the action's business (docs/sqs.md).
"""

from __future__ import annotations

import base64
import binascii
from typing import NamedTuple

from sqew import models
from sqew.sqs.errors import SqsError

MAX_HANDLE = 1024


class Handle(NamedTuple):
    """What a receipt handle holds."""

    queue: str
    id: int
    token: str


def make(queue: str, msg_id: int, token: str) -> str:
    """The receipt handle of a message leased from ``queue``."""
    return base64.urlsafe_b64encode(f"{queue}/{msg_id}/{token}".encode()).decode()


def read(handle: str, queue: str) -> Handle:
    """The id and token of ``handle``, a handle of a message of ``queue``.

    Raises:
        SqsError: ``ReceiptHandleIsInvalid``: not a handle, or one of another queue.
    """
    try:
        if len(handle) > MAX_HANDLE:
            raise ValueError
        text = base64.urlsafe_b64decode(handle.encode("ascii")).decode()
        name, msg_id, token = text.split("/", 2)
        number = int(msg_id)
        if (not msg_id.isdigit() or not 1 <= number <= models.MAX_ID or not token
                or len(token) > 128 or name != queue):
            raise ValueError
    except (ValueError, UnicodeError, binascii.Error):
        raise SqsError("ReceiptHandleIsInvalid",
                       f'The input receipt handle "{handle[:100]}" is not a valid receipt '
                       "handle.") from None
    return Handle(name, number, token)
