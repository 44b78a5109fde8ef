"""Small answers: counts of a purge, a DLQ requeue or a compaction, and the health probes."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta, Struct

from sqew.models.fields import MessageId, Request


class Purged(Struct):
    """Result of a purge."""

    purged: int


class Requeued(Struct):
    """Result of a DLQ requeue."""

    requeued: Annotated[int, Meta(description="messages moved back to the queue")]
    left: Annotated[int, Meta(description=(
        "messages that would have moved but stay in the DLQ: the queue holds its max_depth"
    ))] = 0


class Removed(Struct):
    """Result of a compaction."""

    removed: int


class RequeueIn(Request):
    """Optional body of ``dlq/requeue``: which ids (default all)."""

    ids: Annotated[list[MessageId], Meta(max_length=10000)] | None = None


class Health(Struct):
    """Body of ``/healthz``."""

    status: str


class Readiness(Struct):
    """Body of ``/readyz`` when ready (200: the database answers at the newest schema).

    ``overloaded``: the server process that answered refuses enqueues now (backpressure,
    ``overload_reasons`` names the measures past their threshold: ``pending_writes``,
    ``wal_bytes``, ``commit_ms``) while it still serves polls, acks, nacks and extends, so it
    stays ready. ``reaper_leader``: that process runs the reaper for the database.
    """

    status: str
    overloaded: bool = False
    overload_reasons: list[str] = msgspec.field(default_factory=list)
    reaper_leader: bool = False
