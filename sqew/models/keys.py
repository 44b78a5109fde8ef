"""API keys on the wire: what ``POST /keys`` takes, and a key as listed or just made."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

from sqew.models.fields import QueueName, Request
from sqew.models.limits import KEY_NAME_PATTERN

Scope = Literal["produce", "consume", "admin"]


class KeyCreate(Request, kw_only=True):
    """Body of ``POST /keys``: what the new key may do (``queue``: bind it to one queue)."""

    name: Annotated[str, Meta(pattern=KEY_NAME_PATTERN)] | None = None
    queue: QueueName | None = None
    scopes: Annotated[list[Scope], Meta(min_length=1, max_length=3,
                                        extra_json_schema={"uniqueItems": True})]
    sqs: bool = False
    """An SQS access key (an AWS-style access key id and secret, for SigV4: docs/sqs.md)
    instead of a bearer key."""

    def __post_init__(self) -> None:
        if len(set(self.scopes)) != len(self.scopes):
            raise ValueError("scopes must not repeat a scope")


class ApiKey(Struct, kw_only=True, omit_defaults=True):
    """An API key as listed: never the key or its hash."""

    id: str
    name: str | None
    queue: str | None
    scopes: list[str]
    created_at: int
    last_used_at: int | None
    sqs: bool = False
    """An SQS access key: ``id`` is its access key id."""


class KeyCreated(ApiKey, kw_only=True):
    """Body of ``POST /keys``'s answer: the key itself, shown this once (of an SQS key, its
    secret access key)."""

    key: str


class KeyList(Struct):
    """Body of ``GET /keys``."""

    keys: list[ApiKey]
