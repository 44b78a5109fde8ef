"""FIFO queues (docs/sqs.md, "FIFO queues"): names, attributes, what a send must give.

A queue is FIFO when its name ends in ``.fifo``; so is its dead-letter queue
(``orders.fifo.dlq``): AWS requires a FIFO queue's dead-letter queue to be FIFO. Its messages
go to the core with their ``MessageGroupId`` as their ordered group (``QueueService.enqueue``:
one message of a group out at a time, in order) and their deduplication id as an idempotency
key, whose window is the queue's ``dedup_window_ms`` (5 minutes, as set by CreateQueue). A
message's sequence number is its id, which only grows, as a 20-digit decimal.

The attributes ``ContentBasedDeduplication``, ``DeduplicationScope`` and
``FifoThroughputLimit`` are kept in the queue's SQS data; only a FIFO queue has them.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from sqew.core import rules
from sqew.core.sqs_data import Data
from sqew.sqs.errors import SqsError, invalid

SUFFIX = ".fifo"
MAX_NAME = 80
"""The longest queue name, ``.fifo`` included."""
DEDUP_WINDOW_MS = 300_000
"""AWS's deduplication interval: 5 minutes."""
SEQUENCE_BASE = 10**19
"""Added to a message's id to make its sequence number: 20 digits while ids fit 63 bits."""
DEFAULTS = {
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}
"""The FIFO attributes and their values on a queue that was given none."""
CHOICES = {
    "ContentBasedDeduplication": ("true", "false"),
    "DeduplicationScope": ("messageGroup", "queue"),
    "FifoThroughputLimit": ("perQueue", "perMessageGroupId"),
}
_TOKEN = re.compile(r"[A-Za-z0-9!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}")
"""A ``MessageGroupId`` or ``MessageDeduplicationId``: 1-128 alphanumeric or punctuation
characters."""


def is_fifo(name: str) -> bool:
    """Whether queue ``name`` is FIFO: its name ends in ``.fifo``, or it is the DLQ of one."""
    return rules.queue_of(name).endswith(SUFFIX)


def check_create(name: str, given: dict[str, str]) -> bool:
    """Whether CreateQueue of ``name`` with attributes ``given`` makes a FIFO queue.

    Raises:
        SqsError: ``InvalidAttributeValue`` (``FifoQueue`` neither true nor false),
            ``InvalidParameterValue`` (``FifoQueue`` true on a name without ``.fifo``).
    """
    value = given.get("FifoQueue", "false")
    if value.lower() not in ("true", "false"):
        raise bad("FifoQueue", value)
    fifo = value.lower() == "true"
    if fifo and not name.endswith(SUFFIX):
        raise invalid("The name of a FIFO queue can only include alphanumeric characters, "
                      "hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in "
                      "length.")
    return fifo


def attribute_data(fifo: bool, given: dict[str, str], current: Data) -> Data:
    """The FIFO attributes of ``given`` checked, as SQS data (on top of the ``current``).

    Raises:
        SqsError: ``InvalidAttributeName`` (a FIFO attribute on a standard queue),
            ``InvalidAttributeValue`` (a value outside its choices, or a high-throughput
            limit without a per-group deduplication scope).
    """
    data: Data = {}
    for name, value in given.items():
        if name not in CHOICES:
            continue
        if not fifo:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
        if value not in CHOICES[name]:
            raise bad(name, value)
        data[name] = value
    merged = {**DEFAULTS, **current, **data}
    if (merged["FifoThroughputLimit"] == "perMessageGroupId"
            and merged["DeduplicationScope"] != "messageGroup"):
        raise bad("FifoThroughputLimit", "perMessageGroupId",
                  "perMessageGroupId is allowed only when DeduplicationScope is messageGroup")
    return data


def attributes(data: Data) -> dict[str, str]:
    """A FIFO queue's FIFO attributes (``FifoQueue`` too) as GetQueueAttributes shows them."""
    return {"FifoQueue": "true", **{k: str(data.get(k, v)) for k, v in DEFAULTS.items()}}


def check_send(fifo: bool, p: dict[str, Any], data: Data) -> tuple[str | None, str | None]:
    """The ordered group and the deduplication id of a send (a SendMessage or a batch entry)
    to a queue with SQS data ``data``; both None on a standard queue.

    Raises:
        SqsError: ``MissingParameter`` (no ``MessageGroupId`` on a FIFO queue),
            ``InvalidParameterValue`` (a per-message ``DelaySeconds`` on a FIFO queue, a
            ``MessageDeduplicationId`` on a standard one, no deduplication id where the queue
            has no content-based deduplication, a malformed id).
    """
    dedup = p.get("MessageDeduplicationId")
    if not fifo:
        if dedup is not None:
            raise invalid("The request include parameter that is not valid for this queue "
                          "type: MessageDeduplicationId applies to FIFO queues.")
        return None, None
    group = p.get("MessageGroupId")
    if group is None:
        raise SqsError("MissingParameter",
                       "The request must contain the parameter MessageGroupId.")
    if "DelaySeconds" in p:
        raise invalid(f"Value {p['DelaySeconds']} for parameter DelaySeconds is invalid. "
                      "Reason: The request include parameter that is not valid for this "
                      "queue type.")
    _check_token("MessageGroupId", group)
    if dedup is None:
        if data.get("ContentBasedDeduplication") != "true":
            raise invalid("The queue should either have ContentBasedDeduplication enabled or "
                          "MessageDeduplicationId provided explicitly")
        dedup = hashlib.sha256(p["MessageBody"].encode()).hexdigest()
    _check_token("MessageDeduplicationId", dedup)
    return group, dedup


def idempotency_key(group: str, dedup: str, data: Data) -> str:
    """The core's idempotency key of a deduplication id: within the queue, or within the
    group where ``DeduplicationScope`` is ``messageGroup`` (a digest: an id and a group are
    up to 128 characters each, a key too)."""
    scope = group if data.get("DeduplicationScope") == "messageGroup" else ""
    return "sqs-fifo:" + hashlib.sha256(f"{scope}\n{dedup}".encode()).hexdigest()


def sequence_number(message_id: int) -> str:
    """A message's ``SequenceNumber``: its id (which only grows) as 20 decimal digits."""
    return str(SEQUENCE_BASE + message_id)


def _check_token(name: str, value: str) -> None:
    if not _TOKEN.fullmatch(value):
        raise invalid(f"Value {value[:128]} for parameter {name} is invalid. Reason: {name} "
                      "can only include alphanumeric and punctuation characters. 1 to 128 in "
                      "length.")


def bad(name: str, value: str, why: str = "") -> SqsError:
    """``InvalidAttributeValue`` for attribute ``name``'s ``value``."""
    return SqsError("InvalidAttributeValue",
                    f"Invalid value for the parameter {name}: {value}" + (f" ({why})." if why
                                                                          else "."))
