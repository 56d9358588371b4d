"""Batch reads: a query's offset ranges, cut into tasks, and the reading of one
range into Arrow batches (in executors, each opening the store read-only or
fetching from the broker)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .._arrow import SCHEMA as _ARROW_SCHEMA
from ..errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from .log import LogAccess
from .offsets import _data_loss, _ending_offsets, _starting_offsets, _topic_partitions
from .options import _ReadOptions
from .schema import _ARROW_NO_HEADERS

# Records per Arrow batch a read task yields (see benches/bench_spark.py).
_READ_BATCH_ROWS = 65_536
# Bytes of log per read step inside Store.read_arrow (per Fetch request through a broker).
_READ_BYTES = 4 << 20


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One read task: offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int


def _split(ranges: list[OffsetRange], o: _ReadOptions) -> list[OffsetRange]:
    """Kafka's KafkaOffsetRangeCalculator: one task per topic-partition, ranges
    cut into pieces of at most maxRecordsPerPartition, then big ranges cut so
    that about minPartitions tasks run."""

    def cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
        size = r.end - r.start
        return [
            OffsetRange(r.topic, r.partition, r.start + size * i // parts, r.start + size * (i + 1) // parts)
            for i in range(parts)
        ]

    ranges = [r for r in ranges if r.end > r.start]
    if o.max_records_per_partition is not None:
        m = o.max_records_per_partition
        ranges = [piece for r in ranges for piece in cut(r, -(-(r.end - r.start) // m))]
    if o.min_partitions is not None and o.min_partitions > len(ranges):
        total = sum(r.end - r.start for r in ranges)
        ranges = [
            piece
            for r in ranges
            for piece in cut(r, max(1, round((r.end - r.start) / total * o.min_partitions)))
        ]
    return ranges


def _null_when_no_headers(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A record without headers has null in the headers column, as in Spark's Kafka
    source (``includeHeaders``), not an empty list."""
    headers = batch.column(7)
    empty = pc.fill_null(pc.equal(pc.list_value_length(headers), 0), True)
    if not pc.any(empty).as_py():
        return batch
    offsets = headers.offsets  # of a slice: made to start at 0, as a null bitmap needs
    first, last = offsets[0].as_py(), offsets[len(offsets) - 1].as_py()
    offsets = pc.subtract(offsets, pa.scalar(first, offsets.type))
    values = headers.values.slice(first, last - first)
    nulled = pa.ListArray.from_arrays(offsets, values, type=headers.type, mask=empty)
    return batch.set_column(7, batch.schema.field(7), nulled)


def _read_range(o: _ReadOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    log = o.location.open_reader(_READ_BYTES)
    try:
        yield from _read_log_range(log, o, r)
    finally:
        log.close()


def _read_log_range(log: LogAccess, o: _ReadOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    schema = _ARROW_SCHEMA if o.include_headers else _ARROW_NO_HEADERS
    width = len(schema)
    where = f"{r.topic}-{r.partition}"
    pos = r.start
    while pos < r.end:
        try:
            batch, nxt = log.read_arrow(r.topic, r.partition, pos, min(r.end - pos, _READ_BATCH_ROWS))
        except OffsetOutOfRangeError:
            log_start, log_end = log.offsets(r.topic, r.partition)
            if pos < log_start:
                _data_loss(
                    o,
                    f"offsets {pos}..{min(log_start, r.end) - 1} of {where} were removed "
                    "before they were read",
                )
                pos = log_start
                continue
            _data_loss(
                o, f"{where} now ends at offset {log_end}, before offset {r.end} the query planned to read"
            )
            return
        except UnknownTopicOrPartitionError:
            _data_loss(o, f"{where} no longer exists (offsets {pos}..{r.end - 1} unread)")
            return
        n = batch.num_rows
        if nxt is None:
            log_end = log.offsets(r.topic, r.partition)[1]
            _data_loss(
                o, f"{where} now ends at offset {log_end}, before offset {r.end} the query planned to read"
            )
            return
        if n:
            offsets = batch.column(4)
            if offsets[n - 1].as_py() >= r.end:  # past the planned end (a gap in a compacted log)
                batch = batch.slice(0, pc.sum(pc.less(offsets, r.end)).as_py() or 0)
            if batch.num_rows:
                yield (
                    _null_when_no_headers(batch)
                    if width == 8
                    else pa.RecordBatch.from_arrays(batch.columns[:width], schema=schema)
                )
        pos = nxt


class _Reader(DataSourceReader):
    def __init__(self, o: _ReadOptions) -> None:
        self._o = o

    def partitions(self) -> Sequence[InputPartition]:
        o = self._o
        log = o.location.open_reader(_READ_BYTES)
        try:
            tps = _topic_partitions(log, o)
            starts = _starting_offsets(log, tps, o)
            ends = _ending_offsets(log, tps, o)
        finally:
            log.close()
        ranges = []
        for tp in tps:
            if starts[tp] > ends[tp]:
                raise ValueError(
                    f"seglog source: {tp[0]}-{tp[1]} starts at offset {starts[tp]}, "
                    f"after its end offset {ends[tp]}"
                )
            ranges.append(OffsetRange(tp[0], tp[1], starts[tp], ends[tp]))
        return _split(ranges, o)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark runs one task with a placeholder partition when partitions() is empty.
        return _read_range(self._o, partition) if isinstance(partition, OffsetRange) else iter(())
