"""Streaming read: the ``sqew`` source consumes a queue into a Parquet sink at least once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

import sqew

pytestmark = pytest.mark.spark

VISIBILITY_MS = 3000


def remaining(db: str) -> int:
    with sqew.Client(db) as c:
        s = c.stats("q")
        return s.ready + s.delayed + s.leased


def start(spark: Any, db: str, out: Path, checkpoint: Path) -> Any:
    df = (spark.readStream.format("sqew").option("db", db).option("queue", "q")
          .option("maxMessagesPerBatch", "400").option("visibilityMs", str(VISIBILITY_MS))
          .load())
    return (df.writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).start())


def wait_for(condition: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_stream_into_parquet_stopped_and_restarted(spark: Any, tmp_path: Path) -> None:
    db, out, checkpoint = str(tmp_path / "s.db"), tmp_path / "out", tmp_path / "ckpt"
    with sqew.Client(db) as c:
        c.create_queue("q", visibility_ms=VISIBILITY_MS, max_attempts=100)
        ids = [r.message_id for r in c.enqueue_batch(
            "q", [{"payload": {"n": i}, "attributes": {"i": str(i)}} for i in range(1000)])]
        ids += [r.message_id for r in c.enqueue_batch(
            "q", [{"payload": {"n": i}} for i in range(1000, 2000)])]

    query = start(spark, db, out, checkpoint)
    # Stop mid-stream: after two micro-batches with rows, before the queue is drained.
    wait_for(lambda: sum(1 for p in query.recentProgress if p["numInputRows"] > 0) >= 2,
             "two micro-batches")
    query.stop()
    assert remaining(db) > 0, "the first run drained the queue: nothing was left mid-stream"

    with sqew.Client(db) as c:  # more arrive while the query is down
        ids += [r.message_id for r in c.enqueue_batch(
            "q", [{"payload": {"n": i}} for i in range(2000, 2500)])]

    query = start(spark, db, out, checkpoint)
    try:
        # Leases the stopped run held come back after VISIBILITY_MS; wait until every message
        # was acked (a batch is acked only once Spark committed it to the sink).
        def drained() -> bool:
            query.processAllAvailable()
            return remaining(db) == 0

        wait_for(drained, "the queue to be consumed")
    finally:
        query.stop()

    rows = spark.read.parquet(str(out)).select("id", "payload", "state", "attributes") \
        .collect()
    got = [r["id"] for r in rows]
    assert len(got) >= len(ids)
    assert set(got) == set(ids)  # at least once ...
    unique = {r["id"]: r for r in rows}
    assert len(unique) == len(ids)  # ... and exactly once by id
    first = unique[ids[0]]
    assert first["payload"] == '{"n":0}' and first["attributes"] == {"i": "0"}
    assert first["state"] == "leased"


def test_stream_of_a_missing_queue_fails_naming_it(spark: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    with sqew.Client(db) as c:
        c.create_queue("other")
    df = spark.readStream.format("sqew").option("db", db).option("queue", "q").load()
    query = df.writeStream.format("parquet").option("path", str(tmp_path / "o")) \
        .option("checkpointLocation", str(tmp_path / "c")).start()
    with pytest.raises(Exception, match="QueueNotFound"):
        query.awaitTermination(120)
    query.stop()


def test_bad_stream_option_names_it(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="option 'maxMessagesPerBatch'"):
        spark.readStream.format("sqew").option("db", str(tmp_path / "x.db")) \
            .option("queue", "q").option("maxMessagesPerBatch", "0").load()


def test_a_slow_batch_of_thousands_keeps_every_lease_from_a_competing_consumer(
    spark: Any, tmp_path: Path
) -> None:
    """The batch holds its 3000 leases of 1.5 s for three leases' length while another
    consumer polls the queue: it gets nothing, and every ack of the batch succeeds."""
    db, n, vis = str(tmp_path / "k.db"), 3000, 1500
    with sqew.Client(db) as c:
        c.create_queue("q", max_attempts=100)
        for first in range(0, n, 1000):
            c.enqueue_batch("q", [{"payload": i} for i in range(first, first + 1000)])
    running, competed = threading.Event(), threading.Event()
    taken: list[int] = []

    def compete() -> None:  # polls for three leases' length while the batch runs
        try:
            if not running.wait(120):
                return
            with sqew.Client(db) as other:
                until = time.monotonic() + 3 * vis / 1000
                while time.monotonic() < until:
                    taken.extend(m.id for m in other.poll("q", batch=100, wait_ms=100))
        finally:
            competed.set()

    def slow_sink(batch: Any, batch_id: int) -> None:
        if batch.count():
            running.set()
            competed.wait(120)

    competitor = threading.Thread(target=compete)
    competitor.start()
    query = (spark.readStream.format("sqew").option("db", db).option("queue", "q")
             .option("maxMessagesPerBatch", str(n)).option("visibilityMs", str(vis)).load()
             .writeStream.foreachBatch(slow_sink).start())
    try:
        wait_for(competed.is_set, "the competing consumer's polls")
        query.processAllAvailable()  # the next batch's read acks this one
        wait_for(lambda: remaining(db) == 0, "the batch's acks")
    finally:
        query.stop()
        running.set()
        competitor.join(120)
    assert taken == []
    with sqew.Client(db) as c:
        s = c.stats("q")
        assert (s.acked_total, s.ready, s.leased) == (n, 0, 0)


def test_leases_that_cannot_be_kept_alive_are_refused(spark: Any, tmp_path: Path) -> None:
    # 100000 leases take 100 keep-alive calls: a lease of 10 s does not leave room for them.
    with pytest.raises(Exception, match=r"option 'visibilityMs': .*maxMessagesPerBatch"):
        spark.readStream.format("sqew").option("db", str(tmp_path / "x.db")) \
            .option("queue", "q").option("maxMessagesPerBatch", "100000") \
            .option("visibilityMs", "10000").load()
