"""Small helpers shared by the contract tests (plain functions over the Client API)."""

from __future__ import annotations

from typing import Any

import sqew
from sqew import models

SETTINGS = (
    "visibility_ms",
    "max_attempts",
    "backoff_base_ms",
    "backoff_max_ms",
    "retention_ms",
    "dedup_window_ms",
    "max_payload_bytes",
    "max_depth",
    "rate_limit_per_s",
    "order",
    "archive",
)
"""Settings a queue object shows (``hmac_secret`` is write-only)."""

DEFAULTS: dict[str, Any] = {
    "visibility_ms": 30_000,
    "max_attempts": 5,
    "backoff_base_ms": 1000,
    "backoff_max_ms": 900_000,
    "retention_ms": 345_600_000,
    "dedup_window_ms": 300_000,
    "max_payload_bytes": 262_144,
    "max_depth": 0,
    "rate_limit_per_s": 0,
    "order": "fifo",
    "archive": False,
}
"""The documented defaults (docs/rest.md, "Queue settings"), written out here rather than
imported, so the test can disagree."""


def settings_of(queue: models.Queue) -> dict[str, Any]:
    """The settings a queue object shows."""
    return {name: getattr(queue, name) for name in SETTINGS}


def lease_one(client: sqew.Client, queue: str, **kwargs: Any) -> models.LeasedMessage:
    """Poll exactly one message (fails the test if there is none or more)."""
    got = client.poll(queue, **kwargs)
    assert len(got) == 1, got
    return got[0]


def ids(messages: list[Any]) -> list[int]:
    """The ids of messages, in order."""
    return [m.id for m in messages]


def enqueue_many(client: sqew.Client, queue: str, payloads: list[Any], **fields: Any) -> list[int]:
    """Enqueue payloads one by one with the same fields; their ids in order."""
    return [client.enqueue(queue, p, **fields).message_id for p in payloads]
