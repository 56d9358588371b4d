"""Batch and streaming writes: each task appends its rows through a Producer,
holding the store's writer lock only while it appends, or produces them to a broker."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, DataType, IntegerType, StringType, StructType

from .log import Appender
from .options import _WriteOptions

log = logging.getLogger(__name__)

# Arrow bytes a write task computes before it waits for the writer lock.
_WRITE_BUFFER_BYTES = 64 << 20


@dataclass
class WriteResult(WriterCommitMessage):
    """What one write task appended: rows, and (topic, partition, first, last) runs."""

    rows: int = 0
    ranges: list[tuple[str, int, int, int]] = field(default_factory=list)


def _check_write_schema(schema: StructType, o: _WriteOptions) -> None:
    fields = {f.name: f.dataType for f in schema.fields}

    def need(name: str, ok: tuple[type[DataType], ...], what: str) -> None:
        if name in fields and not isinstance(fields[name], ok):
            raise TypeError(f"seglog sink: column {name!r} must be {what}, got {fields[name].simpleString()}")

    if "value" not in fields:
        raise ValueError("seglog sink: the DataFrame needs a 'value' column (binary or string)")
    if "topic" not in fields and o.topic is None:
        raise ValueError("seglog sink: no 'topic' column and no topic option: set one of them")
    need("value", (BinaryType, StringType), "binary or string")
    need("key", (BinaryType, StringType), "binary or string")
    need("topic", (StringType,), "string")
    need("partition", (IntegerType,), "int")
    if "headers" in fields:
        h = fields["headers"]
        elem = h.elementType if isinstance(h, ArrayType) else None
        ok = (
            isinstance(elem, StructType)
            and [f.name for f in elem.fields] == ["key", "value"]
            and isinstance(elem.fields[0].dataType, StringType)
            and isinstance(elem.fields[1].dataType, BinaryType | StringType)
        )
        if not ok:
            raise TypeError(
                "seglog sink: column 'headers' must be array<struct<key:string,value:binary>>, "
                f"got {h.simpleString()}"
            )


def _runs(n: int, *columns: pa.Array | None) -> list[tuple[int, int]]:
    """[start, end) row runs over which every given column is constant."""
    cuts = {0, n}
    for col in columns:
        if col is not None and n:
            cuts.update(pc.run_end_encode(col).run_ends.to_pylist())
    points = sorted(cuts)
    return list(itertools.pairwise(points))


def _write_batch(appender: Appender, batch: pa.RecordBatch, o: _WriteOptions, result: WriteResult) -> None:
    names = batch.schema.names
    n = batch.num_rows
    if not n:
        return
    value = batch.column(names.index("value"))
    key = batch.column(names.index("key")) if "key" in names else None
    topic_col = batch.column(names.index("topic")) if "topic" in names and o.topic is None else None
    part_col = batch.column(names.index("partition")) if "partition" in names else None
    headers = batch.column(names.index("headers")) if "headers" in names else None
    if headers is not None and (headers.null_count == n or not pc.sum(pc.list_value_length(headers)).as_py()):
        headers = None
    if topic_col is not None and topic_col.null_count:
        raise ValueError(
            "seglog sink: null topic present in the data; use the topic option to set a default topic"
        )
    for s, e in _runs(n, topic_col, part_col):
        topic = o.topic if topic_col is None else topic_col[s].as_py()
        assert topic is not None
        p = None if part_col is None else part_col[s].as_py()
        spans = appender.send(
            topic,
            p,
            value.slice(s, e - s),
            None if key is None else key.slice(s, e - s),
            None if headers is None else headers.slice(s, e - s),
        )
        result.ranges.extend((topic, part, first, last) for part, first, last in spans)
        result.rows += e - s


def _write(o: _WriteOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    result = WriteResult()
    # Compute (up to _WRITE_BUFFER_BYTES of) the task's rows before taking the
    # writer lock, so that tasks waiting for the lock do their share of the work
    # meanwhile and each holds the lock only to append.
    buffered: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        buffered.append(batch)
        size += batch.nbytes
        if size >= _WRITE_BUFFER_BYTES:
            break
    if not any(b.num_rows for b in buffered):
        return result
    # Through a path: acks=1 appends under the store's writer lock, and close()
    # fsyncs everything once, before the task reports success. Through a broker:
    # idempotent produce requests with acks=all.
    appender = o.location.open_appender(o.lock_timeout_ms)
    try:
        for batch in itertools.chain(buffered, batches):
            _write_batch(appender, batch, o, result)
    finally:
        appender.close()
    return result


class _Writer(DataSourceArrowWriter):
    def __init__(self, o: _WriteOptions) -> None:
        self._o = o

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self._o, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # the records are durable once each task returns

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, WriteResult))
        if rows:
            log.warning("seglog sink: job aborted; %d rows its finished tasks appended stay in the log", rows)


class _StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, o: _WriteOptions) -> None:
        self._o = o

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self._o, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # At least once, as Spark's Kafka sink: the tasks' records are already
        # durable; a replayed batch appends its records again. Nothing to do here,
        # so committing a batchId twice is harmless.
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, WriteResult))
        if rows:
            log.warning(
                "seglog sink: batch %d aborted; %d rows its finished tasks appended stay", batchId, rows
            )
