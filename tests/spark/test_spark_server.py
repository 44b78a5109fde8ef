"""The ``sqew`` data source against a server (``url`` + ``api_key``), as a cluster uses it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from auth_support import create_queue, mint
from targets import ServerThread, server_settings

import sqew

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server that requires keys, with queue ``q`` and a produce+consume key."""
    db = tmp_path_factory.mktemp("srv") / "server.db"
    create_queue(db, "q")
    key = mint(db, "produce", "consume").key
    srv = ServerThread(server_settings(db, require_auth=True))
    yield srv.url, key
    srv.stop()


def test_write_then_stream_through_a_server(spark: Any, server: tuple[str, str],
                                            tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    url, key = server
    n = 5000
    spark.range(0, n, numPartitions=2).select(
        F.to_json(F.struct(F.col("id").alias("n"))).alias("payload")
    ).write.format("sqew").option("url", url).option("api_key", key).option("queue", "q") \
        .mode("append").save()
    with sqew.Client(url, api_key=key) as c:
        assert c.stats("q").ready == n

    snapshot = spark.read.format("sqew").option("url", url).option("api_key", key) \
        .option("queue", "q").option("numPartitions", "3").load().collect()
    assert sorted(int(r["payload"][5:-1]) for r in snapshot) == list(range(n))
    assert {r["state"] for r in snapshot} == {"ready"}

    query = (spark.readStream.format("sqew").option("url", url).option("api_key", key)
             .option("queue", "q").option("maxMessagesPerBatch", "2000").load()
             .writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    rows = spark.read.parquet(str(tmp_path / "out")).select("payload").collect()
    assert sorted(int(r["payload"][5:-1]) for r in rows) == list(range(n))
    with sqew.Client(url, api_key=key) as c:
        s = c.stats("q")
        assert (s.ready, s.leased) == (0, 0)


def test_a_wrong_key_fails_the_write_as_unauthorized(spark: Any, server: tuple[str, str]) -> None:
    url, _ = server
    df = spark.createDataFrame([('{"a": 1}',)], "payload STRING")
    with pytest.raises(Exception, match="Unauthorized"):
        df.write.format("sqew").option("url", url).option("api_key", "sqew_wrong") \
            .option("queue", "q").mode("append").save()
