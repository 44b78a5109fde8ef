"""Snapshot read: ``spark.read.format("sqew")…load()`` (docs/spark.md), without leasing anything.

The driver fixes the snapshot's high-water id, then splits ``(low, high]`` into id ranges, one
per partition, that the executors page through in parallel (``after_id`` … ``max_id``). Rows
enqueued after the snapshot started have larger ids (SQLite hands out increasing ids) and never
appear; rows removed meanwhile may.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from sqew import models, payloads
from sqew.client.base import Client
from sqew.spark.options import SourceOptions
from sqew.spark.schema import ARROW_ATTRIBUTES, ARROW_SCHEMA

PAGE = 1000  # the scan's largest page (docs/rest.md: limit 1 to 1000)
ROWS_PER_PARTITION = 100_000  # ids per partition when numPartitions is not given
MAX_AUTO_PARTITIONS = 64


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


def message_batch(messages: Sequence[models.ScannedMessage]) -> pa.RecordBatch:
    """A page of scanned messages as one Arrow batch of ``schema.MESSAGE_SCHEMA``: Spark
    takes it column by column, with no conversion per row (several times the rows per second
    of tuples)."""
    return pa.RecordBatch.from_arrays([
        pa.array([m.id for m in messages], pa.int64()),
        pa.array([m.queue for m in messages], pa.string()),
        pa.array([m.state for m in messages], pa.string()),
        pa.array([payloads.text_of(m) for m in messages], pa.string()),
        pa.array([m.priority for m in messages], pa.int32()),
        pa.array([None if m.attributes is None else list(m.attributes.items())
                  for m in messages], ARROW_ATTRIBUTES),
        pa.array([m.attempts for m in messages], pa.int32()),
        pa.array([m.enqueued_at for m in messages], pa.int64()),
        pa.array([m.available_at for m in messages], pa.int64()),
        pa.array([m.expires_at for m in messages], pa.int64()),
        pa.array([m.last_error for m in messages], pa.string()),
    ], schema=ARROW_SCHEMA)


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

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Page through one id range, a page per Arrow batch."""
        assert isinstance(partition, IdRange)
        if partition.max_id <= partition.after_id:
            return
        with self.options.client() as client:
            after: int | None = partition.after_id
            while after is not None:
                page = _scan(client, self.options, after, partition.max_id, PAGE)
                if page.messages:
                    yield message_batch(page.messages)
                after = page.next_after_id
