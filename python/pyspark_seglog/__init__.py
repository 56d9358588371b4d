"""Auto-registration of seglog's PySpark data source.

PySpark registers the ``DefaultSource`` of every importable top-level module named
``pyspark_*`` when a session first looks up a Python data source, so with seglog
installed ``spark.read.format("seglog")`` works without a
``spark.dataSource.register`` call. The data source itself is :mod:`seglog.spark`.
"""

from seglog.spark import SeglogDataSource as DefaultSource

__all__ = ["DefaultSource"]
