"""``sqew.spark``: the PySpark data source ``sqew`` (docs/spark.md), installed with the ``spark``
extra (``pip install 'sqew[spark]'``: pyspark ≥ 4 and pyarrow).

    import sqew.spark
    sqew.spark.register(spark)
    df.write.format("sqew").option("db", "sqew.db").option("queue", "jobs").mode("append").save()
    spark.readStream.format("sqew").option("url", URL).option("api_key", KEY)
        .option("queue", "jobs").load()

The source talks to sqew only through ``sqew.Client`` (docs/architecture.md: client ← spark), so it
works against a database file, a database URL or a server; on a cluster, executors must reach the
same ``db``/``url`` (a file only on one machine: local mode).
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``sqew`` format with a SparkSession (``spark.dataSource.register``).

    Raises:
        ImportError: pyspark (≥ 4, with pyarrow) is not installed: install ``sqew[spark]``.
    """
    try:
        from sqew.spark.source import SqewDataSource
    except ImportError as exc:
        raise ImportError(
            f"sqew.spark needs pyspark>=4 and pyarrow ({exc}): pip install 'sqew[spark]'"
        ) from exc
    spark.dataSource.register(SqewDataSource)
