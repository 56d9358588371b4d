"""Arrow record batches from the column buffers the native reader fills."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

#: Spark's Kafka source schema (headers included), as Arrow types.
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", HEADER_TYPE),
    ]
)


def _binary(kind: pa.DataType, n: int, col: tuple[Any, Any, Any, int]) -> pa.Array:
    validity, offsets, data, nulls = col
    if not len(offsets):
        offsets = b"\0\0\0\0"
    return pa.Array.from_buffers(
        kind,
        n,
        [pa.py_buffer(validity) if nulls else None, pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls,
    )


def _fixed(kind: pa.DataType, n: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(data)])


def columns_to_batch(cols: dict[str, Any]) -> pa.RecordBatch:
    n = cols["rows"]
    header_key = cols["header_key"]
    nh = len(header_key[1]) // 4 - 1 if len(header_key[1]) else 0
    children = pa.StructArray.from_arrays(
        [_binary(pa.string(), nh, header_key), _binary(pa.binary(), nh, cols["header_value"])],
        fields=list(HEADER_TYPE.value_type),
    )
    headers = pa.ListArray.from_buffers(
        HEADER_TYPE,
        n,
        [None, pa.py_buffer(cols["header_offsets"] if len(cols["header_offsets"]) else b"\0\0\0\0")],
        children=[children],
    )
    arrays = [
        _binary(pa.binary(), n, cols["key"]),
        _binary(pa.binary(), n, cols["value"]),
        _binary(pa.string(), n, cols["topic"]),
        _fixed(pa.int32(), n, cols["partition"]),
        _fixed(pa.int64(), n, cols["offset"]),
        _fixed(pa.timestamp("us", tz="UTC"), n, cols["timestamp"]),
        _fixed(pa.int32(), n, cols["timestampType"]),
        headers,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
