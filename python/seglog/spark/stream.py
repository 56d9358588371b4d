"""Streaming reads: micro-batches of offset ranges, with Kafka's offset JSON as
Spark's offsets, rate limits and Trigger.AvailableNow."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .log import LogAccess
from .offsets import _data_loss, _from_json, _starting_offsets, _to_json, _topic_partitions
from .options import Offsets, _ReadOptions
from .reader import OffsetRange, _read_range, _split


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of offset ranges; the offset is Kafka's JSON, {"topic":{"0":23}}."""

    def __init__(self, o: _ReadOptions) -> None:
        self._o = o
        self._target: Offsets | None = None
        self._log: LogAccess | None = None

    def __getstate__(self) -> dict[str, Any]:
        # read() runs on a pickled copy in an executor, which opens its own log.
        return {"_o": self._o, "_target": None, "_log": None}

    def _handle(self) -> LogAccess:
        # Kept open across the calls of one query run (one long-lived process).
        if self._log is None:
            self._log = self._o.location.open_reader()
        return self._log

    def _log_ends(self) -> Offsets:
        log = self._handle()
        return {tp: log.offsets(*tp)[1] for tp in _topic_partitions(log, self._o)}

    def initialOffset(self) -> dict[str, Any]:
        log = self._handle()
        return _to_json(_starting_offsets(log, _topic_partitions(log, self._o), self._o))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._log_ends()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self._o.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return _to_json(self._log_ends())

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        o = self._o
        begin = _from_json(start or {})
        log_ends = self._log_ends()
        out: Offsets = {}
        for tp, b in begin.items():
            if tp in log_ends:
                out[tp] = b
            else:
                _data_loss(o, f"{tp[0]}-{tp[1]} was deleted (offset {b} and after unread)")
        ends = log_ends
        if self._target is not None:  # availableNow: nothing past what was there at the start
            ends = {tp: min(e, self._target[tp]) for tp, e in log_ends.items() if tp in self._target}
        # A partition seen for the first time starts at offset 0, as Kafka's new ones at earliest.
        firsts = {tp: begin.get(tp, 0) for tp in ends}
        for tp, e in ends.items():
            if e < firsts[tp]:
                _data_loss(
                    o, f"{tp[0]}-{tp[1]} was truncated to offset {e}, before offset {firsts[tp]} it reached"
                )
                firsts[tp] = e
        if isinstance(limit, ReadMaxRows):
            # Kafka's rate limit: the budget split over the partitions by their backlog.
            sizes = {tp: ends[tp] - firsts[tp] for tp in ends}
            total = sum(sizes.values())
            if total > limit.max_rows:
                for tp, size in sizes.items():
                    share = limit.max_rows * size / total
                    ends[tp] = firsts[tp] + (math.ceil(share) if share < 1 else math.floor(share))
        out.update(ends)
        return _to_json(out)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin = _from_json(start)
        ranges = [OffsetRange(t, p, begin.get((t, p), 0), e) for (t, p), e in _from_json(end).items()]
        return _split(ranges, self._o)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark runs one task with a placeholder partition when partitions() is empty.
        return _read_range(self._o, partition) if isinstance(partition, OffsetRange) else iter(())

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing to release: the query's checkpoint is its only consumer position.
        pass
