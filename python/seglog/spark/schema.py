"""The columns of a read, as Spark's Kafka source has them: as Spark DDL text, a
Spark ``StructType`` and an Arrow schema."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from .._arrow import SCHEMA as _ARROW_SCHEMA

#: The columns of a read, as Spark's Kafka source has them.
SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
SCHEMA_WITH_HEADERS = SCHEMA + ", headers array<struct<key:string, value:binary>>"

_ARROW_NO_HEADERS = pa.schema(list(_ARROW_SCHEMA)[:7])

_HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


def _spark_schema(include_headers: bool) -> StructType:
    s = (
        StructType()
        .add("key", BinaryType())
        .add("value", BinaryType())
        .add("topic", StringType())
        .add("partition", IntegerType())
        .add("offset", LongType())
        .add("timestamp", TimestampType())
        .add("timestampType", IntegerType())
    )
    return s.add("headers", _HEADERS_TYPE) if include_headers else s
