"""PySpark's automatic discovery of the ``sqew`` data source (pyspark ≥ 4).

When a session first resolves a Python data source, PySpark imports every top-level module
whose name starts with ``pyspark_`` and registers its ``DefaultSource``. This module, shipped in
sqew's wheel, is that hook: with ``sqew[spark]`` installed, ``spark.read.format("sqew")`` works
without calling ``sqew.spark.register(spark)`` first. Nothing else imports it.
"""

from __future__ import annotations

from sqew.spark.source import SqewDataSource as DefaultSource

__all__ = ["DefaultSource"]
