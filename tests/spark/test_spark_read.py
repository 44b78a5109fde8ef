"""Snapshot read (``spark.read.format("sqew")``): every message of a source, nothing leased."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqew

pytestmark = pytest.mark.spark


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "read.db")
    with sqew.Client(path) as c:
        c.create_queue("q", archive=True)
    yield path


def snapshot(spark: Any, db: str, **options: str) -> Any:
    return spark.read.format("sqew").option("db", db).option("queue", "q") \
        .options(**options).load()


def test_schema_and_states_of_a_queue(spark: Any, db: str) -> None:
    with sqew.Client(db) as c:
        c.enqueue("q", {"n": 1}, priority=3, attributes={"k": "v"}, ttl_ms=600_000)
        c.enqueue("q", [1, "two"], delay_ms=600_000)
        c.enqueue("q", "leased")
        leased = c.poll("q", visibility_ms=600_000)  # leased throughout, however slow Spark is
        assert leased and leased[0].payload == {"n": 1}  # priority 3 first
    df = snapshot(spark, db)
    assert df.columns == ["id", "queue", "state", "payload", "priority", "attributes",
                          "attempts", "enqueued_at", "available_at", "expires_at", "last_error"]
    rows = {r["payload"]: r for r in df.collect()}
    first = rows['{"n":1}']
    assert (first["state"], first["priority"], first["attributes"], first["attempts"]) == \
        ("leased", 3, {"k": "v"}, 1)
    assert first["expires_at"] - first["enqueued_at"] == 600_000
    assert rows['"leased"']["state"] == "ready"
    assert rows['[1,"two"]']["state"] == "delayed"
    states = sorted(r["state"] for r in df.collect())
    assert states == ["delayed", "leased", "ready"]
    with sqew.Client(db) as c:  # reading leased nothing and changed nothing
        s = c.stats("q")
        assert (s.ready, s.delayed, s.leased) == (1, 1, 1)


def test_an_empty_queue_reads_no_rows(spark: Any, db: str) -> None:
    assert snapshot(spark, db).count() == 0
    assert snapshot(spark, db, source="dlq").count() == 0


def test_dlq_and_archive_sources(spark: Any, db: str) -> None:
    with sqew.Client(db) as c:
        c.update_queue("q", max_attempts=1)
        c.enqueue_batch("q", [{"payload": {"i": i}} for i in range(6)])
        got = c.poll("q", batch=6)
        c.ack_batch("q", [(m.id, m.token) for m in got[:2]])  # two archived
        for m in got[2:]:
            c.nack("q", m.id, m.token, error="boom")  # four dead-lettered
    dead = snapshot(spark, db, source="dlq").collect()
    assert sorted(json.loads(r["payload"])["i"] for r in dead) == [2, 3, 4, 5]
    assert {(r["state"], r["queue"], r["last_error"]) for r in dead} == \
        {("dead", "q.dlq", "boom")}
    archived = snapshot(spark, db, source="archive").collect()
    assert sorted(json.loads(r["payload"])["i"] for r in archived) == [0, 1]
    assert {r["state"] for r in archived} == {"archived"}
    assert snapshot(spark, db).count() == 0


def test_partitions_cover_the_ids_once(spark: Any, db: str) -> None:
    with sqew.Client(db) as c:
        ids = [r.message_id for start in range(0, 3000, 1000)
               for r in c.enqueue_batch("q", [{"payload": i} for i in range(start, start + 1000)])]
        for i in ids[::7]:  # holes in the id range
            c.remove_message("q", i)
    want = sorted(set(ids) - set(ids[::7]))
    for parts in ("1", "3", "16"):
        df = snapshot(spark, db, numPartitions=parts)
        assert df.rdd.getNumPartitions() == int(parts)
        assert sorted(r["id"] for r in df.select("id").collect()) == want


def test_a_snapshot_ignores_messages_enqueued_while_it_reads(spark: Any, db: str) -> None:
    """A producer keeps enqueueing throughout: the snapshot has every message up to its
    high-water id, none after, whatever the partitions' timing."""
    with sqew.Client(db) as c:
        for start in range(0, 20_000, 1000):
            c.enqueue_batch("q", [{"payload": {"i": i}} for i in range(start, start + 1000)])
    stop = threading.Event()
    produced = [0]
    started = threading.Event()

    def produce() -> None:
        with sqew.Client(db) as c:
            while not stop.is_set():
                c.enqueue_batch("q", [{"payload": {"p": 1}} for _ in range(50)])
                produced[0] += 50
                started.set()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        assert started.wait(30)
        before = produced[0]
        rows = snapshot(spark, db, numPartitions="4").select("id").collect()
        during = produced[0] - before
    finally:
        stop.set()
        producer.join(30)
    got = sorted(r["id"] for r in rows)
    high = got[-1]
    with sqew.Client(db) as c:
        everything = [m.id for m in c.export("q")]
    assert during > 0  # the producer really ran while Spark read
    assert len(got) == len(set(got))
    assert got == [i for i in everything if i <= high]  # nothing missing up to the snapshot
    assert len(got) >= 20_000 and len(everything) > len(got)


@pytest.mark.parametrize(("options", "named"), [
    ({"numPartitions": "0"}, "option 'numPartitions'"),
    ({"source": "nowhere"}, "option 'source'"),
])
def test_bad_read_options_name_the_option(spark: Any, db: str, options: dict[str, str],
                                          named: str) -> None:
    with pytest.raises(Exception, match=named):
        snapshot(spark, db, **options).collect()


def test_missing_queue_is_queue_not_found(spark: Any, db: str) -> None:
    with pytest.raises(Exception, match="QueueNotFound"):
        spark.read.format("sqew").option("db", db).option("queue", "nope").load().collect()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_database_url_works_like_a_path(
    spark: Any, db: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"sqlite:///{db}"
    if backend == "postgres":  # a database on the tests' PostgreSQL server (tests/targets.py)
        import targets

        store = targets.postgres(tmp_path)
        request.addfinalizer(store.drop)
        url = store.url
        with sqew.Client(url) as c:
            c.create_queue("q", archive=True)
    spark.range(300).selectExpr("to_json(named_struct('n', id)) AS payload") \
        .write.format("sqew").option("db", url).option("queue", "q").mode("append").save()
    rows = spark.read.format("sqew").option("db", url).option("queue", "q").load().collect()
    assert sorted(json.loads(r["payload"])["n"] for r in rows) == list(range(300))
