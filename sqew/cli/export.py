"""``queue export``: a queue's messages (or its DLQ's, or its archive's) as NDJSON envelopes.

Each line is a message object that ``sqew message enqueue --file F --envelope`` reads back
(``sqew.cli.bulk.parse_envelope``): payload, priority, attributes, the idempotency key while the
queue remembers it (a replay key of its own for a DLQ's or an archive's message: ``envelope``),
the producer's trace context (``traceparent``, ``tracestate``) when it sent
one, and the time the message has left — ``ttl_ms`` from its ``expires_at``, and
``delay_ms`` for one not yet due — measured when its page is written. An archived message was
acked: its ``expires_at`` is the archive's retention, not its own, so it is exported without a
``ttl_ms`` (a replay gets the target queue's retention). Export → import round-trips.

The export is a snapshot (``Client.export``): messages enqueued after it started are left out.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

import msgspec

from sqew import models, payloads
from sqew.client.base import Client

_encode = msgspec.json.Encoder().encode


REPLAY_KEY = "sqew-replay:{id}:{enqueued_at}"
"""The idempotency key of a DLQ's or an archive's message in an export: its own, for the
replay (a message's id and first enqueue time name it across databases)."""


def envelope(m: models.ScannedMessage, now: int, source: str = "queue") -> dict[str, Any]:
    """The ``--envelope`` message object that re-enqueues ``m`` (of ``source``) as it is at
    ``now``.

    A queue's message keeps its idempotency key (a replay elsewhere still finds its producer's
    retries). A DLQ's or an archive's message was failed or done with: its replay must deliver
    it again, which its original key (still in the queue's dedup window) would refuse as a
    duplicate; it gets a key of its own instead (``REPLAY_KEY``), so that replaying the same
    export twice still delivers it once.
    """
    out: dict[str, Any] = {"payload": msgspec.Raw(payloads.text_of(m).encode()),
                           "priority": m.priority}
    if m.attributes:
        out["attributes"] = m.attributes
    if source != "queue":
        out["idempotency_key"] = REPLAY_KEY.format(id=m.id, enqueued_at=m.enqueued_at)
    elif isinstance(m.idempotency_key, str):
        out["idempotency_key"] = m.idempotency_key
    if isinstance(m.traceparent, str):  # a replay still links to the original producer
        out["traceparent"] = m.traceparent
        if isinstance(m.tracestate, str):
            out["tracestate"] = m.tracestate
    if m.state == "archived":
        return out
    # Bounds of an enqueue's ttl_ms; a message about to expire keeps the shortest TTL allowed.
    ttl = min(max(m.expires_at - now, models.MIN_TTL_MS), models.MAX_TTL_MS)
    out["ttl_ms"] = ttl
    delay = m.available_at - now
    if m.state == "delayed" and 0 < delay < ttl:
        out["delay_ms"] = delay
    return out


def write(
    client: Client,
    queue: str,
    source: str,
    out: IO[bytes],
    advance: Callable[[int], None] | None = None,
    clock: Callable[[], int] = lambda: int(time.time() * 1000),
) -> int:
    """Write every message of ``source`` to ``out`` as NDJSON envelopes; how many."""
    count = 0
    for m in client.export(queue, source=source):
        out.write(_encode(envelope(m, clock(), source)) + b"\n")
        count += 1
        if advance is not None:
            advance(1)
    out.flush()
    return count


@contextlib.contextmanager
def progress(queue: str) -> Iterator[Callable[[int], None] | None]:
    """A Rich progress counter on stderr, only when stderr is a terminal (the total is not
    known in advance: a count and a rate)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = [SpinnerColumn(), TextColumn(f"exporting {queue}"), MofNCompleteColumn(),
               TimeElapsedColumn()]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("export", total=None)
        yield lambda n: bar.advance(task, n)
