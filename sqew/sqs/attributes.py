"""Queue attributes ↔ sqew's queue settings (docs/sqs.md, "Queue attributes").

| attribute | setting |
|---|---|
| VisibilityTimeout (s) | ``visibility_ms`` |
| MessageRetentionPeriod (s) | ``retention_ms`` |
| MaximumMessageSize (bytes) | ``max_payload_bytes`` |
| RedrivePolicy ``maxReceiveCount`` | ``max_attempts`` |
| RedrivePolicy ``deadLetterTargetArn`` | the queue's dead-letter target (default ``<name>.dlq``) |
| DelaySeconds, ReceiveMessageWaitTimeSeconds | the queue's SQS data (``sqew.core.sqs_data``) |
| Policy (a JSON object; ``""``: none) | the queue's SQS data (``sqew.sqs.permissions``) |
| RedriveAllowPolicy (``""``: none) | the queue's SQS data (``sqew.sqs.redrive``) |
| ContentBasedDeduplication, DeduplicationScope, FifoThroughputLimit | SQS data (``fifo``) |

Read-only: ``QueueArn``, the ``ApproximateNumberOf…`` counters (ready, leased, delayed),
``CreatedTimestamp`` and ``LastModifiedTimestamp`` (epoch seconds). Attribute names outside
the service model's enum are refused before this module sees them (``InvalidAttributeName``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from sqew import models
from sqew.core import rules
from sqew.core.sqs_data import Data
from sqew.sqs import fifo, permissions, redrive
from sqew.sqs.errors import SqsError
from sqew.sqs.urls import Context

RANGES: dict[str, tuple[int, int]] = {
    "VisibilityTimeout": (0, 43_200),
    "MaximumMessageSize": (1_024, 1_048_576),
    "MessageRetentionPeriod": (60, 1_209_600),
    "DelaySeconds": (0, 900),
    "ReceiveMessageWaitTimeSeconds": (0, 20),
}
"""The ranges AWS documents for the integer attributes."""
READ_ONLY = frozenset({
    "All", "QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp",
})
NOT_YET = frozenset({
    "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
})
"""Attributes of AWS's model that sqew does not implement: encryption at rest (docs/sqs.md)."""
IN_DATA = ("DelaySeconds", "ReceiveMessageWaitTimeSeconds")
"""Attributes kept in the queue's SQS data (sqew's settings have no field for them), applied
by SendMessage and ReceiveMessage when a request gives none of its own."""


def read(ctx: Context, queue: models.Queue, names: list[str], data: Data) -> dict[str, str]:
    """The attributes ``names`` (``All``: every one) of ``queue`` (fetched with its stats),
    whose SQS data is ``data``."""
    stats = queue.stats
    assert not isinstance(stats, msgspec.UnsetType)  # (QueueService.get_queue reads them)
    every = {
        "QueueArn": ctx.arn(queue.name),
        "ApproximateNumberOfMessages": str(stats.ready),
        "ApproximateNumberOfMessagesNotVisible": str(stats.leased),
        "ApproximateNumberOfMessagesDelayed": str(stats.delayed),
        "CreatedTimestamp": str(queue.created_at // 1000),
        "LastModifiedTimestamp": str(queue.created_at // 1000),
        "VisibilityTimeout": str(queue.visibility_ms // 1000),
        "MaximumMessageSize": str(queue.max_payload_bytes),
        "MessageRetentionPeriod": str(queue.retention_ms // 1000),
        **{name: str(data.get(name, 0)) for name in IN_DATA},
    }
    if queue.dlq is not None:
        every["RedrivePolicy"] = msgspec.json.encode({
            "deadLetterTargetArn": ctx.arn(target_of(queue)),
            "maxReceiveCount": queue.max_attempts,
        }).decode()
    every.update({k: data[k] for k in ("Policy", "RedriveAllowPolicy") if data.get(k)})
    if fifo.is_fifo(queue.name):
        every.update(fifo.attributes(data))
    if "All" in names:
        return every
    return {name: every[name] for name in names if name in every}


def to_settings(ctx: Context, queue: str, given: dict[str, str]) -> dict[str, Any]:
    """The settings (``models.QueueSettings`` fields) that attributes ``given`` ask of queue
    ``queue``.

    Raises:
        SqsError: ``InvalidAttributeName`` (a read-only attribute), ``InvalidAttributeValue``
            (a value out of its range or malformed), ``UnsupportedOperation`` (an attribute
            sqew does not implement yet).
    """
    fields: dict[str, Any] = {}
    for name, value in given.items():
        if name in READ_ONLY:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {name}.")
        if name == "FifoQueue" or name in fifo.CHOICES:
            continue  # (checked by fifo.check_create and fifo.attribute_data)
        if name in NOT_YET:
            raise SqsError("UnsupportedOperation", f"The attribute {name} is not supported yet.")
        elif name == "RedrivePolicy":
            fields["max_attempts"] = redrive.parse_policy(ctx, queue, value)[0]
        elif name == "Policy":
            permissions.check_policy(value)  # (kept by data_of)
        elif name == "RedriveAllowPolicy":
            redrive.check_allow_policy(ctx, value)  # (kept by data_of)
        else:
            seconds = _integer(name, value)
            if name == "VisibilityTimeout":
                fields["visibility_ms"] = seconds * 1000
            elif name == "MessageRetentionPeriod":
                fields["retention_ms"] = seconds * 1000
            elif name == "MaximumMessageSize":
                fields["max_payload_bytes"] = seconds
            # (IN_DATA: checked here, kept by data_of)
    return fields


def data_of(given: dict[str, str]) -> Data:
    """What of the attributes ``given`` goes into the queue's SQS data (``IN_DATA``)."""
    data: Data = {name: _integer(name, given[name]) for name in IN_DATA if name in given}
    if "Policy" in given:
        data["Policy"] = permissions.check_policy(given["Policy"])  # ("": none)
    if "RedriveAllowPolicy" in given:
        data["RedriveAllowPolicy"] = given["RedriveAllowPolicy"]  # (checked by to_settings)
    return data


def same(ctx: Context, queue: models.Queue, given: dict[str, str], data: Data) -> bool:
    """Whether ``queue`` (SQS data ``data``) has the attributes ``given`` (an existing queue's
    CreateQueue)."""
    current = read(ctx, queue, ["All"], data)
    for name, value in given.items():
        if name == "FifoQueue":
            kept = value.lower() == str(fifo.is_fifo(queue.name)).lower()
        elif name in fifo.CHOICES:
            kept = current.get(name) == value
        elif name in ("Policy", "RedriveAllowPolicy"):
            kept = current.get(name, "") == value
        elif name == "RedrivePolicy":
            kept = not rules.is_dlq(queue.name) and redrive.parse_policy(
                ctx, queue.name, value) == (queue.max_attempts, target_of(queue))
        else:
            kept = current.get(name) == str(_integer(name, value))
        if not kept:
            return False
    return True


def _integer(name: str, value: str) -> int:
    low, high = RANGES[name]
    if not value.strip().lstrip("-").isdigit() or not low <= int(value) <= high:
        raise _bad(name, f"it must be an integer from {low} to {high}")
    return int(value)


def target_of(queue: models.Queue) -> str:
    """The queue ``queue`` (not a DLQ) dead-letters into: its named target or its ``.dlq``."""
    target = queue.dead_letter_target
    return target if isinstance(target, str) else rules.dlq_name(queue.name)


def _bad(name: str, why: str) -> SqsError:
    return SqsError("InvalidAttributeValue", f"Invalid value for the parameter {name}: {why}.")
