"""Batch write through the ``sqew`` data source, read back with ``sqew.Client``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import SparkContexts

import sqew
from sqew import models

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(spark_contexts: SparkContexts) -> Any:
    # On the shared context (a failed task is retried once, small buffers: conftest.py).
    # Small Arrow batches, so a task's rows reach the writer while later rows are computed.
    return spark_contexts.session(**{"spark.sql.execution.arrow.maxRecordsPerBatch": "500"})


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "spark.db")
    with sqew.Client(path) as c:
        c.create_queue("q", dedup_window_ms=600_000)
    yield path


def drain(db: str, queue: str = "q") -> list[models.ScannedMessage]:
    """Every message of the queue, by id (an export: nothing leased)."""
    with sqew.Client(db) as c:
        return list(c.export(queue))


def test_write_100k_rows_read_back_exactly(spark: Any, db: str) -> None:
    from pyspark.sql import functions as F

    n = 100_000
    df = spark.range(0, n, numPartitions=4).select(
        F.struct(F.col("id").alias("n"), F.lit("x" * 20).alias("pad")).alias("payload"),
        (F.col("id") % 7 - 3).cast("int").alias("priority"),
        F.create_map(F.lit("row"), F.col("id").cast("string")).alias("attributes"),
    )
    df.write.format("sqew").option("db", db).option("queue", "q").mode("append").save()

    # Read back with the snapshot reader, and check it against the Client's export.
    rows = spark.read.format("sqew").option("db", db).option("queue", "q").load().collect()
    exported = drain(db)
    assert len(rows) == len(exported) == n
    assert [r["id"] for r in sorted(rows, key=lambda r: r["id"])] == [m.id for m in exported]
    by_row = {int(r["attributes"]["row"]): r for r in rows}
    assert sorted(by_row) == list(range(n))
    for row, r in by_row.items():
        assert json.loads(r["payload"]) == {"n": row, "pad": "x" * 20}
        assert r["priority"] == row % 7 - 3
        assert r["attributes"] == {"row": str(row)}
        assert r["state"] == "ready"


def test_json_string_payload_and_optional_columns(spark: Any, db: str) -> None:
    rows = [('{"a": [1, 2.5, null]}', 5, 0, 120_000, "k-1", {"t": "1"}),
            ('"text"', None, None, None, None, None),
            ("42", 0, 0, None, "k-1", None)]  # same key as row 0: a duplicate
    df = spark.createDataFrame(
        rows, "payload STRING, priority INT, delay_ms LONG, ttl_ms LONG, "
              "idempotency_key STRING, attributes MAP<STRING,STRING>")
    df.coalesce(1).write.format("sqew").option("db", db).option("queue", "q") \
        .mode("append").save()
    got = sorted(drain(db), key=lambda m: m.id)
    assert [m.payload for m in got] == [{"a": [1, 2.5, None]}, "text"]
    assert got[0].priority == 5 and got[0].attributes == {"t": "1"}
    assert got[0].expires_at - got[0].enqueued_at == 120_000


@pytest.mark.parametrize(("spark_type", "value", "expected"), [
    ("ARRAY<INT>", [1, None, 3], [1, None, 3]),
    ("MAP<STRING,DOUBLE>", {"a": 1.5, "nan": float("nan")}, {"a": 1.5, "nan": None}),
    ("MAP<INT,STRING>", {7: "seven"}, {"7": "seven"}),
    ("STRUCT<n: BIGINT, tags: ARRAY<STRUCT<k: STRING, v: FLOAT>>, m: MAP<STRING,INT>>",
     {"n": 2**40, "tags": [{"k": "x", "v": float("inf")}], "m": {"z": 1}},
     {"n": 2**40, "tags": [{"k": "x", "v": None}], "m": {"z": 1}}),
    ("BOOLEAN", True, True),
    ("DOUBLE", 2.25, 2.25),
    ("STRING", None, None),  # a null payload is JSON null
])
def test_any_payload_column_is_serialized_to_json(
    spark: Any, db: str, spark_type: str, value: Any, expected: Any
) -> None:
    df = spark.createDataFrame([(value,)], f"payload {spark_type}")
    df.write.format("sqew").option("db", db).option("queue", "q").mode("append").save()
    assert [m.payload for m in drain(db)] == [expected]


def test_unknown_column_is_refused_by_name(spark: Any, db: str) -> None:
    df = spark.createDataFrame([('{"a": 1}', "x")], "payload STRING, colour STRING")
    with pytest.raises(Exception, match=r"unknown column.*'colour'"):
        df.write.format("sqew").option("db", db).option("queue", "q").mode("append").save()
    assert drain(db) == []


@pytest.mark.parametrize(("options", "named"), [
    ({"db": "X"}, "option 'queue'"),
    ({"queue": "q"}, "option 'db'"),
    ({"queue": "q", "db": "X", "url": "http://127.0.0.1:1"}, "option 'url'"),
    ({"queue": "q", "db": "X", "api_key": "k"}, "option 'api_key'"),
    ({"queue": "q", "db": "X", "batchSize": "5000"}, "option 'batchSize'"),
    ({"queue": "q", "db": "X", "colour": "red"}, "option 'colour'"),
])
def test_bad_options_name_the_option(spark: Any, db: str, options: dict[str, str],
                                     named: str) -> None:
    df = spark.createDataFrame([('{"a": 1}',)], "payload STRING")
    with pytest.raises(Exception, match=named):
        df.write.format("sqew").options(**options).mode("append").save()


def test_a_fifo_queue_and_its_dlq_are_written_and_read_like_any(
        spark: Any, tmp_path: Path) -> None:
    """A name ending in '.fifo' (an SQS FIFO queue) is a queue name here as everywhere."""
    path = str(tmp_path / "fifo.db")
    with sqew.Client(path) as c:
        c.create_queue("orders.fifo")
    df = spark.createDataFrame([('{"n": 1}',), ('{"n": 2}',)], "payload STRING")
    df.coalesce(1).write.format("sqew").option("db", path).option("queue", "orders.fifo") \
        .mode("append").save()
    assert [m.payload for m in drain(path, "orders.fifo")] == [{"n": 1}, {"n": 2}]
    for queue, count in (("orders.fifo", 2), ("orders.fifo.dlq", 0)):
        read = spark.read.format("sqew").option("db", path).option("queue", queue).load()
        assert read.count() == count
    with pytest.raises(Exception, match=r"option 'queue': 'orders\.fifo\.fifo' is not a queue"):
        df.write.format("sqew").option("db", path).option("queue", "orders.fifo.fifo") \
            .mode("append").save()


def test_missing_queue_is_queue_not_found(spark: Any, db: str) -> None:
    df = spark.createDataFrame([('{"a": 1}',)], "payload STRING")
    with pytest.raises(Exception, match="QueueNotFound"):
        df.write.format("sqew").option("db", db).option("queue", "nope").mode("append").save()


def test_a_retried_task_does_not_duplicate(spark: Any, db: str, tmp_path: Path) -> None:
    """Partition 1's first attempt fails after some of its rows were enqueued; Spark retries
    it; every row is in the queue exactly once."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    marker = tmp_path / "failed.json"
    n, fail_at = 20_000, 16_000  # partition 1 holds ids 10000..19999

    def boom(i: int) -> int:
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 1 and ctx.attemptNumber() == 0 \
                and i == fail_at:
            # Fail only once this attempt's rows are in the queue (priority 1 marks them),
            # so the retry really meets rows it wrote before.
            seen = False
            with sqew.Client(db) as c:
                deadline = time.monotonic() + 20
                while not seen and time.monotonic() < deadline:
                    seen = any(m.priority == 1 for m in c.peek("q", limit=1))
                    if not seen:
                        time.sleep(0.05)
                depth = c.stats("q").ready
            marker.write_text(json.dumps({"seen": seen, "depth": depth}))
            raise RuntimeError("first attempt of partition 1 fails")
        return i

    boom_udf = F.udf(boom, LongType(), useArrow=False)  # Arrow UDFs need pandas
    df = spark.range(0, n, numPartitions=2).select(
        F.to_json(F.struct(boom_udf("id").alias("n"))).alias("payload"),
        F.when(F.col("id") >= n // 2, 1).otherwise(0).cast("int").alias("priority"),
    )
    df.write.format("sqew").option("db", db).option("queue", "q").option("batchSize", "100") \
        .mode("append").save()

    failed = json.loads(marker.read_text())
    assert failed["seen"], f"the first attempt failed before enqueueing anything: {failed}"
    assert failed["depth"] > 0
    got = drain(db)
    assert sorted(m.payload["n"] for m in got) == list(range(n))


def test_overwrite_mode_is_refused(spark: Any, db: str) -> None:
    df = spark.createDataFrame([('{"a": 1}',)], "payload STRING")
    with pytest.raises(Exception, match="only appends"):
        df.write.format("sqew").option("db", db).option("queue", "q").mode("overwrite").save()


def test_invalid_message_fails_the_write_naming_the_rows(spark: Any, db: str) -> None:
    df = spark.createDataFrame([('{"a": 1}', 5000)], "payload STRING, priority INT")
    with pytest.raises(Exception, match=r"ValidationError: row 0 of partition 0: .*priority"):
        df.coalesce(1).write.format("sqew").option("db", db).option("queue", "q") \
            .mode("append").save()
    assert drain(db) == []


def test_payload_string_that_is_not_json_is_refused(spark: Any, db: str) -> None:
    df = spark.createDataFrame([("hello",)], "payload STRING")
    with pytest.raises(Exception, match=r"row 0 of this partition: column 'payload' is not JSON"):
        df.coalesce(1).write.format("sqew").option("db", db).option("queue", "q") \
            .mode("append").save()
