"""A real local Spark session per test module (``local[2]``), with sqew's data source.

Skipped when pyspark is not installed (it comes with the ``spark`` extra:
``SQEW_EXTRAS=test,spark``), unless ``SQEW_REQUIRE_SPARK`` is set, as ``./scripts/test`` sets it
when it installs that extra: then a missing pyspark is an error.
Every module here sets ``pytestmark = pytest.mark.spark`` (select
with ``-m spark``, leave out with ``-m "not spark"``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("SQEW_REQUIRE_SPARK"):  # ./scripts/test: a broken install fails, never skips
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
else:
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("pyarrow", reason="the spark extra is not installed")


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""The JVM of a test's Spark runs short jobs on a busy 2-core box: compiled by C1 alone (C2's
optimising compiler costs more CPU than these jobs live long enough to win back) and collected
by one thread. Together about a quarter less CPU for the Spark tests, the same results."""


def make_session(tmp: Path, master: str = "local[2]", *, register: bool = True,
                 **conf: str) -> Any:
    """A SparkSession for one module; its Python workers run this interpreter (sqew in it).

    ``register=False`` leaves the ``sqew`` format to PySpark's own discovery (``pyspark_sqew``).
    """
    from pyspark.sql import SparkSession

    import sqew.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName("sqew-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={tmp} {TEST_JVM_OPTIONS}")
        .config("spark.local.dir", str(tmp / "local"))
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if register:
        sqew.spark.register(spark)
    return spark


@pytest.fixture(scope="module")
def spark_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark")


@pytest.fixture(scope="module")
def spark(spark_tmp: Path) -> Iterator[Any]:
    """The module's session (``local[2]``); a module needing other settings overrides it."""
    session = make_session(spark_tmp)
    yield session
    session.stop()
