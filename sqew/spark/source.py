"""The ``sqew`` PySpark data source (docs/spark.md): options checked once, then a reader or
writer."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.types import StructType

from sqew.spark import options as _options
from sqew.spark.schema import MESSAGE_SCHEMA


class SqewDataSource(DataSource):
    """``format("sqew")``: batch write, snapshot read, streaming read of one queue.

    Options (names case-insensitive): ``db`` (a database file or URL) or ``url`` (a sqew
    server) with ``api_key``; ``queue``; ``source`` (queue, dlq, archive: snapshot reads);
    ``maxMessagesPerBatch`` and ``visibilityMs`` (streaming); ``numPartitions`` (snapshot);
    ``batchSize`` and ``writeId`` (writes). Every error names the option.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        # Checked here, on the driver, before any task: a bad option fails the query at once.
        self.parsed = _options.parse(options)

    @classmethod
    def name(cls) -> str:
        """The format name: ``sqew``."""
        return "sqew"

    def schema(self) -> str:
        """The schema of what a read returns (``sqew.spark.schema.MESSAGE_SCHEMA``)."""
        return MESSAGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """The snapshot reader (needs ``Client.scan``; see ``sqew.spark.reader``)."""
        from sqew.spark.reader import SqewSnapshotReader

        return SqewSnapshotReader(self.parsed)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """The batch writer; refuses ``mode("overwrite")`` and unknown columns."""
        from sqew.spark.writer import SqewWriter, overwrite_error

        if overwrite:
            raise overwrite_error()
        return SqewWriter(self.parsed, schema)

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        """The streaming reader (leases on the driver, acks on commit)."""
        from sqew.spark.stream import SqewStreamReader

        return SqewStreamReader(self.parsed)
