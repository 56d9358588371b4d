"""A quiet local SparkSession, as seglog's examples, tests and benchmarks use it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def local_session(
    app_name: str = "seglog",
    *,
    driver_memory: str = "1g",
    fast_start: bool = False,
    jars: Sequence[str] = (),
) -> Any:
    """A quiet local SparkSession (``local[2]``, UTC, no UI) whose Python workers
    run this interpreter, as seglog's examples, tests and benchmarks use it.
    ``fast_start`` trades JIT quality and throughput for start-up time (tests):
    C1 only and the serial collector. Otherwise the JVM keeps its default
    collector (G1), as a Spark deployment does; the serial one's full
    collections of a 2 GB heap cost on-heap readers such as Parquet's a
    hundred milliseconds every other query, which skews comparisons. ``jars``
    (paths) go on the driver's classpath (``spark.jars``): Spark's own Kafka
    connector, for instance, for ``format("kafka")``."""
    import os
    import sys
    import tempfile

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    fd, conf = tempfile.mkstemp(prefix="seglog-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_QUIET_LOG4J)
    java = f"-Dlog4j2.configurationFile=file:{conf}"
    if fast_start:
        java += " -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    builder = SparkSession.builder
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = (
        builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", java)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
