"""A PySpark data source for seglog stores, modelled on Spark's Kafka connector.

``spark.read.format("seglog")`` / ``readStream`` / ``write`` / ``writeStream`` take
the options of Spark's Kafka source and sink, with either ``path`` (the store
directory) or ``kafka.bootstrap.servers`` (a seglog broker serving it), and give or
take the same columns::

    from seglog.spark import SeglogDataSource
    spark.dataSource.register(SeglogDataSource)     # or rely on pyspark_seglog's auto-registration
    df = spark.read.format("seglog").option("subscribe", "events").load("/data/store")

Everything here runs in Spark's Python worker processes: the options are the
only state shipped to them, and each worker opens the store itself (read-only
to read; for writing, one task at a time, under the store's writer lock) or
talks to the broker (fetch, idempotent produce); see ``log.py``.
Data moves as Arrow record batches in both directions. See docs/spark.md.
"""

from .offsets import DataLossError
from .schema import SCHEMA, SCHEMA_WITH_HEADERS
from .session import local_session
from .source import SeglogDataSource

__all__ = ["SeglogDataSource", "DataLossError", "SCHEMA", "SCHEMA_WITH_HEADERS", "local_session"]
