"""Field types shared by the request models, and their base class.

Each type is an ``Annotated`` with ``Meta`` constraints built from ``sqew.models.limits``: one
``msgspec.convert``/``decode`` checks them whether a request came over HTTP, from the CLI or
from Python, and the OpenAPI document shows them as JSON Schema.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta, Struct

from sqew.models.limits import (
    IDEMPOTENCY_KEY_PATTERN,
    MAX_ID,
    MAX_TTL_MS,
    MAX_VISIBILITY_MS,
    MIN_TTL_MS,
    QUEUE_NAME_PATTERN,
    TRACEPARENT_PATTERN,
    TRACESTATE_MAX,
    TRACESTATE_PATTERN,
)


class Request(Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of request bodies: unknown fields are rejected, never ignored."""


QueueName = Annotated[str, Meta(pattern=QUEUE_NAME_PATTERN)]
Priority = Annotated[int, Meta(ge=-1000, le=1000)]
DelayMs = Annotated[int, Meta(ge=0, le=MAX_TTL_MS)]
TtlMs = Annotated[int, Meta(ge=MIN_TTL_MS, le=MAX_TTL_MS)]
IdempotencyKey = Annotated[
    str, Meta(min_length=1, max_length=128, pattern=IDEMPOTENCY_KEY_PATTERN)
]
AttrKey = Annotated[str, Meta(min_length=1, max_length=64)]
AttrValue = Annotated[str, Meta(max_length=1024)]
Attributes = Annotated[dict[AttrKey, AttrValue], Meta(max_length=10)]
MessageId = Annotated[int, Meta(ge=1, le=MAX_ID)]
Token = Annotated[str, Meta(min_length=1, max_length=128)]
ErrorText = Annotated[str, Meta(max_length=4096)]
LeaseMs = Annotated[int, Meta(ge=0, le=MAX_VISIBILITY_MS)]
Traceparent = Annotated[str, Meta(
    min_length=55, max_length=55, pattern=TRACEPARENT_PATTERN,
    description="The producer's W3C traceparent: a consumer's span links to it")]
Tracestate = Annotated[str, Meta(
    max_length=TRACESTATE_MAX, pattern=TRACESTATE_PATTERN,
    description="The producer's W3C tracestate (only with a traceparent)")]
