"""Snapshot read: ``spark.read.format("sqew")…load()`` (SPEC §4), without leasing anything.

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

from sqew import models
from sqew.client.base import Client
from sqew.spark.options import SourceOptions

PAGE = 1000  # the scan's largest page (SPEC §2, limit 1 to 1000)
ROWS_PER_PARTITION = 100_000  # ids per partition when numPartitions is not given
MAX_AUTO_PARTITIONS = 64

_encode = msgspec.json.encode


def _scan(client: Client, options: SourceOptions, after_id: int, max_id: int | None,
          limit: int) -> models.ScanPage:
    return client.scan(options.queue, source=options.source, after_id=after_id, max_id=max_id,
                       limit=limit)


def high_water(client: Client, options: SourceOptions) -> tuple[int, int] | None:
    """``(low, high)``: the snapshot reads ids in ``(low, high]``; None: nothing to read.

    One page of one message gives both: its message is the lowest id and its
    ``high_water_id`` the highest as the page was read. A producer enqueueing meanwhile only
    adds ids above ``high``; they are outside the snapshot.
    """
    page = _scan(client, options, 0, None, 1)
    high = page.high_water_id
    if not page.messages or not isinstance(high, int):
        return None
    return page.messages[0].id - 1, high


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
