"""Batch write: ``df.write.format("sqew")…save()`` enqueues one message per row (docs/spark.md).

Columns: ``payload`` (required: a JSON string, or any struct/array/map/primitive column,
serialized to JSON), and optional ``priority``, ``delay_ms``, ``ttl_ms``, ``idempotency_key``,
``attributes`` (map<string,string>). Any other column is refused by name on the driver before
a task runs.

Each task enqueues its partition through ``Client.enqueue_many``, in batches (``batchSize``,
at most 1000) with its retry policy (a refusal that says "try again", a rate limit or a full
queue, is waited out within its bounds). A row the client or the queue refuses fails the task,
naming the row; the batches before it stay enqueued. A retried task (or a speculative copy)
must not enqueue its rows twice: a row without an ``idempotency_key`` gets one derived from
the write's id, the partition and the row's index in it (``spark:<writeId>:<partition>:<row>``),
so the queue's de-duplication answers a second enqueue of the same row with the first
message's id. This holds while the rerun falls
within the queue's ``dedup_window_ms`` (default 5 minutes) and when the partition's rows come
in the same order on every attempt (any deterministic plan; not e.g. an unordered shuffle of a
non-deterministic source). A row with its own ``idempotency_key`` is de-duplicated by that key.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
)

from sqew import errors
from sqew.spark.options import SourceOptions, option_error

if TYPE_CHECKING:
    import pyarrow

log = logging.getLogger("sqew.spark")

PAYLOAD = "payload"
INTEGER_COLUMNS = ("priority", "delay_ms", "ttl_ms")
COLUMNS = (PAYLOAD, *INTEGER_COLUMNS, "idempotency_key", "attributes")
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_MESSAGE_INDEX = re.compile(r"^message (?P<index>\d+): (?P<reason>.*)$", re.DOTALL)
_NOT_JSON = "payload is not valid JSON: "


@dataclasses.dataclass
class SqewCommitMessage(WriterCommitMessage):
    """What one task wrote (a Spark commit message, returned to the driver).

    Attributes:
        partition: the Spark partition id.
        attempt: the task's attempt number (0 for the first).
        rows: rows read from the partition.
        enqueued: messages newly enqueued.
        duplicates: rows answered as duplicates (written by an earlier attempt, or a repeated
            ``idempotency_key``).
    """

    partition: int
    attempt: int
    rows: int
    enqueued: int
    duplicates: int


def check_schema(schema: StructType) -> None:
    """Refuse a DataFrame the writer cannot enqueue, naming the column.

    Raises:
        sqew.errors.ValidationError: no ``payload`` column, an unknown column, or a column of
            the wrong type.
    """
    names = [f.name for f in schema.fields]
    unknown = [n for n in names if n not in COLUMNS]
    if unknown:
        raise errors.ValidationError(
            f"unknown column(s) {', '.join(repr(n) for n in unknown)}: the sqew writer takes "
            f"{', '.join(COLUMNS)} (select or rename columns first; put extra values in "
            "the payload or in attributes)",
            details=[{"field": n, "message": "unknown column"} for n in unknown])
    if PAYLOAD not in names:
        raise errors.ValidationError(
            "the sqew writer needs a 'payload' column (a JSON string or any struct, array, map "
            "or primitive column)", details=[{"field": PAYLOAD, "message": "required"}])
    for field in schema.fields:
        _check_type(field.name, field.dataType)


def _check_type(name: str, type_: DataType) -> None:
    ok = True
    if name in INTEGER_COLUMNS:
        ok = isinstance(type_, _INTEGRAL)
        wanted = "an integer"
    elif name == "idempotency_key":
        ok = isinstance(type_, StringType)
        wanted = "a string"
    elif name == "attributes":
        ok = (isinstance(type_, MapType) and isinstance(type_.keyType, StringType)
              and isinstance(type_.valueType, StringType))
        wanted = "a map<string,string>"
    if not ok:
        raise errors.ValidationError(
            f"column '{name}' must be {wanted}, not {type_.simpleString()}",
            details=[{"field": name, "message": f"must be {wanted}"}])


_json_encode = msgspec.json.Encoder(decimal_format="number").encode


Convert = Callable[[Any], Any]


def _to_json_value(type_: DataType) -> Convert:
    """How a value of Spark type ``type_``, as Arrow's ``to_pylist`` gives it, becomes plain
    JSON-ready Python: structs as objects, maps (Arrow: a list of key/value pairs) as objects
    with string keys, arrays as lists, NaN and infinities (JSON has none) as null."""
    if isinstance(type_, StructType):
        fields = [(f.name, _to_json_value(f.dataType)) for f in type_.fields]
        return lambda v: None if v is None else {n: c(v.get(n)) for n, c in fields}
    if isinstance(type_, MapType):
        key, value = _to_json_value(type_.keyType), _to_json_value(type_.valueType)
        return lambda v: None if v is None else {str(key(k)): value(x) for k, x in v}
    if isinstance(type_, ArrayType):
        element = _to_json_value(type_.elementType)
        return lambda v: None if v is None else [element(x) for x in v]
    if isinstance(type_, FloatType | DoubleType):
        return lambda v: None if v is None or v != v or v in (_INF, -_INF) else v
    return lambda v: v


_INF = float("inf")


class SqewWriter(DataSourceArrowWriter):
    """The writer of one ``save()``: created on the driver, pickled to every task.

    Tasks receive their partition as Arrow record batches (``DataSourceArrowWriter``): the
    columns are converted to Python a whole batch at a time, not a Spark ``Row`` per message.
    """

    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_schema(schema)
        self.options = options
        self.payload_type = schema[PAYLOAD].dataType
        # One id per save(), fixed here on the driver: every attempt of a task derives the same
        # keys from it. A user-given writeId makes a rerun of the whole job idempotent too.
        self.write_id = options.write_id or uuid.uuid4().hex

    def write(self, iterator: Iterator[pyarrow.RecordBatch]) -> SqewCommitMessage:
        """Enqueue this task's rows (``Client.enqueue_many``: its batches and retry policy);
        returns the counts."""
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        attempt = context.attemptNumber() if context is not None else 0
        prefix = f"spark:{self.write_id}:{partition}:"
        rows = [0]

        def messages() -> Iterator[dict[str, Any]]:
            for record_batch in iterator:
                for message in self._messages(record_batch, prefix, rows[0]):
                    rows[0] += 1
                    yield message

        with self.options.client() as client:
            try:
                summary = client.enqueue_many(self.options.queue, messages(),
                                              batch_size=self.options.batch_size)
            except (errors.ValidationError, errors.PayloadTooLarge) as exc:
                raise self._row_error(exc, partition) from None
        return SqewCommitMessage(partition, attempt, rows[0], summary.enqueued,
                                 summary.duplicates)

    def _row_error(self, exc: errors.SqewError, partition: int) -> errors.SqewError:
        """``exc`` (``message <i>: …``) naming the row of this partition instead."""
        found = _MESSAGE_INDEX.match(exc.message)
        if found is None:
            return exc
        row, reason = found["index"], found["reason"]
        if (isinstance(self.payload_type, StringType) and reason.startswith(_NOT_JSON)):
            return errors.ValidationError(
                f"row {row} of this partition: column 'payload' is not JSON "
                f"({reason.removeprefix(_NOT_JSON)}); a string column is read as JSON text: "
                "to send plain text as a JSON string, serialize it first "
                "(e.g. to_json(struct(...)))", details=exc.details)
        return type(exc)(f"row {row} of partition {partition}: {reason}", details=exc.details)

    def _messages(
        self, record_batch: pyarrow.RecordBatch, prefix: str, first: int
    ) -> Iterator[dict[str, Any]]:
        """The messages of one Arrow batch whose first row is row ``first`` of the partition."""
        columns = dict(zip(record_batch.schema.names, record_batch.columns, strict=True))
        payloads = columns[PAYLOAD].to_pylist()
        optional = {name: columns[name].to_pylist() for name in COLUMNS[1:] if name in columns}
        encode = self._payload_encoder()
        for offset, payload in enumerate(payloads):
            index = first + offset
            message: dict[str, Any] = {PAYLOAD: encode(payload, index)}
            for name, values in optional.items():
                value = values[offset]
                if value is not None:
                    message[name] = dict(value) if name == "attributes" else value
            if "idempotency_key" not in message:
                message["idempotency_key"] = f"{prefix}{index}"
            yield message

    def _payload_encoder(self) -> Callable[[Any, int], msgspec.Raw]:
        """A payload value (and its row index) → the JSON text to send (a string column is
        JSON text already: the client checks it, as every payload)."""
        if isinstance(self.payload_type, StringType):
            return lambda payload, _index: (
                msgspec.Raw(b"null") if payload is None else msgspec.Raw(payload.encode()))
        plain = _to_json_value(self.payload_type)
        return lambda payload, _index: msgspec.Raw(_json_encode(plain(payload)))

    def commit(self, messages: list[SqewCommitMessage | None]) -> None:  # type: ignore[override]
        """All tasks succeeded: log the totals (enqueued, duplicates) of the write."""
        done = [m for m in messages if m is not None]
        log.info(
            "sqew write %s to %s queue %s: %d rows, %d enqueued, %d duplicates, %d partitions",
            self.write_id, self.options.target, self.options.queue,
            sum(m.rows for m in done), sum(m.enqueued for m in done),
            sum(m.duplicates for m in done), len(done))

    def abort(self, messages: list[SqewCommitMessage | None]) -> None:  # type: ignore[override]
        """A task failed for good: say what the finished tasks enqueued (it stays queued;
        a queue has no transaction across tasks). Rerunning with the same ``writeId`` within
        the dedup window enqueues only the rest."""
        done = [m for m in messages if m is not None]
        log.warning(
            "sqew write %s to %s queue %s aborted: %d messages enqueued by %d finished "
            "partition(s) stay queued; rerun with .option('writeId', '%s') within the queue's "
            "dedup window to enqueue only the rest",
            self.write_id, self.options.target, self.options.queue,
            sum(m.enqueued for m in done), len(done), self.write_id)


def overwrite_error() -> errors.ValidationError:
    """``mode("overwrite")``: a queue is appended to, never replaced."""
    return option_error("mode", "the sqew data source only appends (mode 'append'): "
                        "to replace a queue's messages, purge it first")
