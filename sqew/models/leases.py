"""Ack, nack and extend-lease on the wire: one item or a batch, and the per-item results."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, Struct, UnsetType

from sqew.models.fields import DelayMs, ErrorText, LeaseMs, MessageId, Request, Token
from sqew.models.limits import MAX_BATCH_ENQUEUE


class AckIn(Request):
    """One ack."""

    id: MessageId
    token: Token


class AckBatchIn(Request):
    """A batch of acks."""

    acks: Annotated[list[AckIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


class NackIn(Request, kw_only=True):
    """One nack; ``error`` is kept as ``last_error``; ``dead_letter``: to the DLQ at once."""

    # ``delay_ms`` overrides the backoff; ``dead_letter`` is a permanent failure: the message
    # moves to its DLQ whatever attempts it has left (``delay_ms`` is then moot).

    id: MessageId
    token: Token
    delay_ms: DelayMs | None = None
    error: ErrorText | None = None
    dead_letter: bool = False


class NackBatchIn(Request):
    """A batch of nacks."""

    nacks: Annotated[list[NackIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


AckStatus = Literal["acked", "lease_lost", "not_found"]
NackStatus = Literal["requeued", "dead_lettered", "lease_lost", "not_found"]


class ItemResult(Struct, omit_defaults=True):
    """Per-item outcome of an ack, nack or extend-lease (``extended``: with lease_expires_at)."""

    id: int
    status: str
    lease_expires_at: int | UnsetType = UNSET


class ResultList(Struct):
    """Body of an ack, nack or batch extend-lease response."""

    results: list[ItemResult]


class ExtendLeaseIn(Request):
    """Body of ``extend-lease``."""

    id: MessageId
    token: Token
    ms: LeaseMs


class ExtendLeaseBatchIn(Request):
    """A batch of extend-leases (a keep-alive of many held messages)."""

    extends: Annotated[list[ExtendLeaseIn], Meta(min_length=1, max_length=MAX_BATCH_ENQUEUE)]


class LeaseExtended(Struct):
    """Result of ``extend-lease``."""

    id: int
    lease_expires_at: int
