"""Snapshot read: ``spark.read.format("sqew")…load()`` (SPEC §4), without leasing anything.

GUARDED: this is written against ``Client.scan(queue, source=, after_id=, max_id=, limit=)``
(issue #12 item 1, a page with ``.messages`` and ``.next_after_id``; ``max_id`` inclusive),
which is not on main yet. Until it is, ``load()`` raises a clear error (``scan_supported``);
nothing here is tested. Check the stand-ins below against the merged API.

The driver fixes the snapshot's high-water id, then splits ``(low, high]`` into id ranges, one
per partition, that the executors page through in parallel (``after_id`` … ``max_id``). Rows
enqueued after the snapshot started have larger ids (SQLite hands out increasing ids) and never
appear; rows removed meanwhile may.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
from pyspark.sql.datasource import DataSourceReader, InputPartition

from sqew import errors
from sqew.client.base import Client
from sqew.spark.options import SourceOptions

PAGE = 1000  # the scan's largest page (SPEC §2, limit 1 to 1000)
ROWS_PER_PARTITION = 100_000  # ids per partition when numPartitions is not given
MAX_AUTO_PARTITIONS = 64

_encode = msgspec.json.encode


def scan_supported(client: Client) -> bool:
    """Whether this client has ``scan`` (issue #12 item 1)."""
    return callable(getattr(client, "scan", None))


def _scan(client: Client, options: SourceOptions, after_id: int, max_id: int | None,
          limit: int) -> Any:
    scan = getattr(client, "scan", None)
    if scan is None:
        raise errors.InvalidRequest(
            "the snapshot read needs Client.scan (issue #12 item 1), which this sqew does not "
            "have yet; the writer and the streaming reader work")
    return scan(options.queue, source=options.source, after_id=after_id, max_id=max_id,
                limit=limit)


def _exists_after(client: Client, options: SourceOptions, after_id: int) -> int | None:
    page = _scan(client, options, after_id, None, 1)
    return int(page.messages[0].id) if page.messages else None


def high_water(client: Client, options: SourceOptions) -> tuple[int, int] | None:
    """``(low, high)``: the snapshot reads ids in ``(low, high]``; None: nothing to read.

    The scan has no "last id" query, so ``high`` is found by an exponential then binary
    search with pages of one message (about 2·log2(ids) index lookups). A producer enqueueing
    meanwhile only moves ids above ``high``; they are outside the snapshot.
    """
    first = _exists_after(client, options, 0)
    if first is None:
        return None
    known, step = first, 1  # known: an id that exists
    while (found := _exists_after(client, options, known + step - 1)) is not None:
        known, step = found, step * 2  # found ≥ known + step: double the stride
    lo, hi = known, known + step - 1  # no id ≥ known + step was there at the last probe
    while lo < hi:  # the largest id in [lo, hi]
        mid = (lo + hi + 1) // 2
        found = _exists_after(client, options, mid - 1)  # the smallest id ≥ mid
        if found is None:
            hi = mid - 1
        else:  # capped: ids a producer adds above hi meanwhile are after the snapshot
            lo = min(found, hi)
    return first - 1, lo


class IdRange(InputPartition):
    """One partition of a snapshot: ids in ``(after_id, max_id]``."""

    def __init__(self, after_id: int, max_id: int) -> None:
        super().__init__((after_id, max_id))
        self.after_id = after_id
        self.max_id = max_id


def split(low: int, high: int, parts: int) -> list[IdRange]:
    """``(low, high]`` in ``parts`` contiguous ranges (fewer when there are fewer ids)."""
    span = high - low
    parts = max(1, min(parts, span))
    edges = [low + span * i // parts for i in range(parts + 1)]
    return [IdRange(a, b) for a, b in itertools.pairwise(edges) if b > a]


def message_row(m: Any) -> tuple[Any, ...]:
    """A scanned message as a row of ``schema.MESSAGE_SCHEMA``."""
    return (m.id, m.queue, m.state, _encode(m.payload).decode(), m.priority, m.attributes,
            m.attempts, m.enqueued_at, m.available_at, m.expires_at, m.last_error)


class SqewSnapshotReader(DataSourceReader):
    """Partitions on the driver (the high-water id), pages of ``scan`` on the executors."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """Fix the snapshot and split it by id range."""
        with self.options.client() as client:
            client.get_queue(self.options.queue)  # QueueNotFound by name, before any task
            bounds = high_water(client, self.options)
        if bounds is None:
            return [IdRange(0, 0)]
        low, high = bounds
        parts = self.options.num_partitions or min(
            MAX_AUTO_PARTITIONS, 1 + (high - low) // ROWS_PER_PARTITION)
        return split(low, high, parts)

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Page through one id range."""
        assert isinstance(partition, IdRange)
        if partition.max_id <= partition.after_id:
            return
        with self.options.client() as client:
            after: int | None = partition.after_id
            while after is not None:
                page = _scan(client, self.options, after, partition.max_id, PAGE)
                for m in page.messages:
                    yield message_row(m)
                after = page.next_after_id
