"""PySpark finds the ``sqew`` format by itself: no ``sqew.spark.register(spark)`` call.

PySpark 4 imports the top-level modules named ``pyspark_*`` and registers their
``DefaultSource`` the first time a session resolves a Python data source; sqew ships
``pyspark_sqew`` for it (in the wheel, see tests/packaging/test_wheel.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import sqew
from tests.spark.conftest import SparkContexts

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark(spark_contexts: SparkContexts) -> Any:
    """A session on which nobody called ``sqew.spark.register`` (registrations belong to the
    session that made them: the other modules' sessions share none with this one)."""
    return spark_contexts.session(register=False)


def test_the_format_is_found_without_registering(spark: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "found.db")
    with sqew.Client(db) as c:
        c.create_queue("found")
    rows = [(json.dumps({"n": i}),) for i in range(20)]
    spark.createDataFrame(rows, "payload string").write.format("sqew").option("db", db) \
        .option("queue", "found").mode("append").save()
    read = spark.read.format("sqew").option("db", db).option("queue", "found").load()
    got = sorted(json.loads(r.payload)["n"] for r in read.select("payload").collect())
    assert got == list(range(20))
