"""A PySpark data source for seglog stores, modelled on Spark's Kafka connector.

``spark.read.format("seglog")`` / ``readStream`` / ``write`` / ``writeStream`` take
the options of Spark's Kafka source and sink, with ``path`` (the store directory)
in place of ``kafka.bootstrap.servers``, and give or take the same columns::

    from seglog.spark import SeglogDataSource
    spark.dataSource.register(SeglogDataSource)     # or rely on pyspark_seglog's auto-registration
    df = spark.read.format("seglog").option("subscribe", "events").load("/data/store")

Everything here runs in Spark's Python worker processes: the options are the
only state shipped to them, and each worker opens the store itself (read-only
to read; for writing, one task at a time, under the store's writer lock).
Data moves as Arrow record batches in both directions. See docs/spark.md.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from . import _groups
from ._arrow import SCHEMA as _ARROW_SCHEMA
from ._producer import Producer
from ._store import Store
from ._store import open as open_store
from .errors import OffsetOutOfRangeError, SeglogError, StoreLockedError, UnknownTopicOrPartitionError

__all__ = ["SeglogDataSource", "DataLossError", "SCHEMA", "SCHEMA_WITH_HEADERS", "local_session"]

log = logging.getLogger(__name__)

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


# Records per Arrow batch a read task yields (see benches/bench_spark.py).
_READ_BATCH_ROWS = 65_536
# Bytes of log per read step inside Store.read_arrow.
_READ_BYTES = 4 << 20
# Arrow bytes a write task computes before it waits for the writer lock.
_WRITE_BUFFER_BYTES = 64 << 20

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


class DataLossError(SeglogError):
    """Records a query planned to read are gone (removed from the log start,
    truncated, or the topic deleted) and ``failOnDataLoss`` is true."""


# -- options -------------------------------------------------------------------------

# Options of Spark's Kafka connector that configure its Kafka clients; they mean
# nothing for an embedded store and are accepted and ignored, so that a Kafka
# pipeline moves over by changing the format name and adding `path`.
_IGNORED_PREFIXES = ("kafka.", "fetchoffset.")
_IGNORED = {"groupidprefix", "kafkaconsumer.polltimeoutms", "checkpointlocation"}  # the last: Spark's own

_READ_KEYS = {
    "path",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "failondataloss",
    "maxoffsetspertrigger",
    "minpartitions",
    "maxrecordsperpartition",
    "includeheaders",
}
_WRITE_KEYS = {"path", "topic", "includeheaders", "writelocktimeoutms"}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_keys(opts: Mapping[str, str], known: set[str], what: str) -> None:
    for key in opts:
        if key in known or key in _IGNORED or key.startswith(_IGNORED_PREFIXES):
            continue
        raise ValueError(
            f"seglog {what}: unknown option {key!r} (options: {', '.join(sorted(known))}; "
            "Kafka-client options kafka.* are accepted and ignored)"
        )


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ValueError(f"seglog option {name} must be true or false, got {raw!r}")


def _int(opts: Mapping[str, str], key: str, name: str, minimum: int) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        v = int(raw.strip())
    except ValueError:
        raise ValueError(f"seglog option {name} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise ValueError(f"seglog option {name} must be >= {minimum}, got {raw!r}")
    return v


def _path(opts: Mapping[str, str]) -> str:
    path = opts.get("path")
    if not path:
        hint = (
            " (kafka.bootstrap.servers does not apply: seglog is a store directory, not a broker)"
            if "kafka.bootstrap.servers" in opts
            else ""
        )
        raise ValueError(
            f"seglog: option path (the store directory) is required, e.g. .load('/data/store'){hint}"
        )
    return path


def _json_object(raw: str, name: str, example: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"seglog option {name}: not valid JSON ({e}); expected e.g. {example}") from None
    if not isinstance(obj, dict) or not obj:
        raise ValueError(
            f"seglog option {name}: expected a non-empty JSON object like {example}, got {raw!r}"
        )
    return obj


def _offsets_json(raw: str, name: str) -> Offsets:
    """Kafka's ``{"topic": {"0": 23, "1": -1}}``."""
    example = '{"topic":{"0":23,"1":-2}}'
    out: Offsets = {}
    for topic, parts in _json_object(raw, name, example).items():
        if not isinstance(parts, dict):
            raise ValueError(
                f"seglog option {name}: topic {topic!r} must map to {{partition: offset}}: {raw}"
            )
        for p, off in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise ValueError(
                    f"seglog option {name}: partition {p!r} of {topic!r} is not a number"
                ) from None
            if not isinstance(off, int) or isinstance(off, bool) or off < -2:
                raise ValueError(
                    f"seglog option {name}: offset of {topic}-{p} must be an integer >= -2 "
                    f"(-2 earliest, -1 latest), got {off!r}"
                )
            out[(topic, partition)] = off
    return out


@dataclass(frozen=True)
class _ReadOptions:
    path: str
    subscribe: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: str | Offsets = "earliest"
    ending: str | Offsets = "latest"
    starting_timestamp: int | None = None
    starting_by_timestamp: Offsets | None = None
    timestamp_strategy: str = "error"
    ending_timestamp: int | None = None
    ending_by_timestamp: Offsets | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False


def _read_options(options: Mapping[str, str], streaming: bool | None) -> _ReadOptions:
    """Parses and validates the options of a read; ``streaming`` None checks only
    what a batch and a streaming read share."""
    o = _lower(options)
    _check_keys(o, _READ_KEYS, "source")
    path = _path(o)
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in o]
    if len(given) != 1:
        raise ValueError(
            "seglog source: exactly one of the options subscribe, subscribePattern or assign is required"
            + (f"; got {len(given)}" if given else "")
        )
    subscribe = pattern = assign = None
    if "subscribe" in o:
        subscribe = tuple(t.strip() for t in o["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise ValueError("seglog option subscribe: no topic given (comma-separated topic names)")
    elif "subscribepattern" in o:
        pattern = o["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(
                f"seglog option subscribePattern: invalid regular expression {pattern!r}: {e}"
            ) from None
    else:
        example = '{"topicA":[0,1],"topicB":[0]}'
        tps: list[TopicPartition] = []
        for topic, parts in _json_object(o["assign"], "assign", example).items():
            if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
            ):
                raise ValueError(
                    f"seglog option assign: topic {topic!r} must map to a list of partition numbers, "
                    f"e.g. {example}"
                )
            tps.extend((topic, p) for p in parts)
        assign = tuple(dict.fromkeys(tps))

    def offsets_option(key: str, name: str) -> str | Offsets | None:
        raw = o.get(key)
        if raw is None:
            return None
        v = raw.strip()
        if v.lower() in ("earliest", "latest"):
            return v.lower()
        if not v.startswith("{"):
            raise ValueError(
                f"seglog option {name} must be earliest, latest or JSON like "
                f'{{"topic":{{"0":23}}}}, got {raw!r}'
            )
        return _offsets_json(v, name)

    starting = offsets_option("startingoffsets", "startingOffsets")
    ending = offsets_option("endingoffsets", "endingOffsets")
    strategy = o.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(
            f"seglog option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}"
        )
    starting_ts = _int(o, "startingtimestamp", "startingTimestamp", 0)
    ending_ts = _int(o, "endingtimestamp", "endingTimestamp", 0)
    by_ts = ending_by_ts = None
    if "startingoffsetsbytimestamp" in o:
        by_ts = _offsets_json(o["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
    if "endingoffsetsbytimestamp" in o:
        ending_by_ts = _offsets_json(o["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp")
    for name, spec in (("startingOffsetsByTimestamp", by_ts), ("endingOffsetsByTimestamp", ending_by_ts)):
        if spec and min(spec.values()) < 0:
            raise ValueError(f"seglog option {name}: timestamps must be >= 0 (ms since the epoch)")
    max_per_trigger = _int(o, "maxoffsetspertrigger", "maxOffsetsPerTrigger", 1)
    if streaming is True:
        for key, name in (
            ("endingoffsets", "endingOffsets"),
            ("endingtimestamp", "endingTimestamp"),
            ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp"),
        ):
            if key in o:
                raise ValueError(f"seglog source: option {name} is for batch queries; a stream has no end")
    if streaming is False:
        if starting == "latest" or (isinstance(starting, dict) and -1 in starting.values()):
            raise ValueError("seglog source: startingOffsets latest (-1) is not allowed in a batch query")
        if ending == "earliest" or (isinstance(ending, dict) and -2 in ending.values()):
            raise ValueError("seglog source: endingOffsets earliest (-2) is not allowed in a batch query")
        if max_per_trigger is not None:
            raise ValueError("seglog source: option maxOffsetsPerTrigger is for streaming queries")
    default_start = "latest" if streaming else "earliest"
    return _ReadOptions(
        path=path,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting if starting is not None else default_start,
        ending=ending if ending is not None else "latest",
        starting_timestamp=starting_ts,
        starting_by_timestamp=by_ts,
        timestamp_strategy=strategy,
        ending_timestamp=ending_ts,
        ending_by_timestamp=ending_by_ts,
        fail_on_data_loss=_bool(o, "failondataloss", "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_int(o, "minpartitions", "minPartitions", 1),
        max_records_per_partition=_int(o, "maxrecordsperpartition", "maxRecordsPerPartition", 1),
        include_headers=_bool(o, "includeheaders", "includeHeaders", False),
    )


@dataclass(frozen=True)
class _WriteOptions:
    path: str
    topic: str | None
    lock_timeout_ms: int


def _write_options(options: Mapping[str, str]) -> _WriteOptions:
    o = _lower(options)
    _check_keys(o, _WRITE_KEYS, "sink")
    timeout = _int(o, "writelocktimeoutms", "writeLockTimeoutMs", 0)
    topic = o.get("topic")
    if topic is not None and not topic.strip():
        raise ValueError("seglog option topic must not be empty")
    return _WriteOptions(_path(o), topic, 60_000 if timeout is None else timeout)


# -- planning (runs in Spark's planning workers and the streaming source runner) ------


def _open_read_only(path: str) -> Store:
    try:
        return open_store(path, read_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"seglog: no store at path {path!r}") from None


def _data_loss(o: _ReadOptions, message: str) -> None:
    if o.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer in the store (removed by "
            "retention, truncated, or the topic was deleted). If you want the query to go on and skip it, "
            'set the source option "failOnDataLoss" to "false".'
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


def _topic_partitions(store: Store, o: _ReadOptions) -> list[TopicPartition]:
    if o.assign is not None:
        for t, p in o.assign:
            try:
                count = store.partition_count(t)
            except UnknownTopicOrPartitionError:
                raise UnknownTopicOrPartitionError(
                    f"seglog option assign: topic {t!r} does not exist"
                ) from None
            if p >= count:
                raise UnknownTopicOrPartitionError(
                    f"seglog option assign: topic {t!r} has {count} partition(s), no partition {p}"
                )
        return sorted(o.assign)
    topics = store.topics()
    if o.subscribe is not None:
        wanted = [t for t in topics if t in o.subscribe]
    else:
        rx = re.compile(o.pattern or "")
        wanted = [t for t in topics if t != _groups.OFFSETS_TOPIC and rx.fullmatch(t)]
    out: list[TopicPartition] = []
    for t in wanted:
        try:
            out.extend((t, p) for p in range(store.partition_count(t)))
        except UnknownTopicOrPartitionError:  # deleted meanwhile
            continue
    return out


def _check_named(spec: Offsets, tps: Sequence[TopicPartition], name: str) -> None:
    unknown = sorted(set(spec) - set(tps))
    if unknown:
        names = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise ValueError(f"seglog option {name} names partitions the query does not read: {names}")


def _by_time(store: Store, tp: TopicPartition, ts: int, o: _ReadOptions, name: str) -> int:
    r = store.offset_for_time(tp[0], tp[1], ts)
    if r is not None:
        return r[0]
    if o.timestamp_strategy == "latest" or name.startswith("ending"):
        return store.offsets(*tp)[1]
    raise ValueError(
        f"seglog option {name}: no record in {tp[0]}-{tp[1]} has a timestamp >= {ts}; "
        "set startingOffsetsByTimestampStrategy=latest to start at the end instead"
    )


def _starting_offsets(store: Store, tps: Sequence[TopicPartition], o: _ReadOptions) -> Offsets:
    out: Offsets = {}
    if o.starting_by_timestamp is not None and o.starting_timestamp is None:
        _check_named(o.starting_by_timestamp, tps, "startingOffsetsByTimestamp")
    if isinstance(o.starting, dict) and o.starting_timestamp is None and o.starting_by_timestamp is None:
        _check_named(o.starting, tps, "startingOffsets")
    for tp in tps:
        log_start, log_end = store.offsets(*tp)
        if o.starting_timestamp is not None:
            out[tp] = _by_time(store, tp, o.starting_timestamp, o, "startingTimestamp")
            continue
        if o.starting_by_timestamp is not None and tp in o.starting_by_timestamp:
            out[tp] = _by_time(store, tp, o.starting_by_timestamp[tp], o, "startingOffsetsByTimestamp")
            continue
        spec = o.starting
        off = spec.get(tp, -2) if isinstance(spec, dict) else (-1 if spec == "latest" else -2)
        if off == -2:
            off = log_start
        elif off == -1:
            off = log_end
        elif off > log_end:
            raise ValueError(
                f"seglog option startingOffsets: offset {off} of {tp[0]}-{tp[1]} "
                f"is past its log end {log_end}"
            )
        elif off < log_start:
            _data_loss(
                o, f"startingOffsets {off} of {tp[0]}-{tp[1]} is before its log start offset {log_start}"
            )
            off = log_start
        out[tp] = off
    return out


def _ending_offsets(store: Store, tps: Sequence[TopicPartition], o: _ReadOptions) -> Offsets:
    out: Offsets = {}
    if o.ending_by_timestamp is not None and o.ending_timestamp is None:
        _check_named(o.ending_by_timestamp, tps, "endingOffsetsByTimestamp")
    if isinstance(o.ending, dict) and o.ending_timestamp is None and o.ending_by_timestamp is None:
        _check_named(o.ending, tps, "endingOffsets")
    for tp in tps:
        log_end = store.offsets(*tp)[1]
        if o.ending_timestamp is not None:
            out[tp] = _by_time(store, tp, o.ending_timestamp, o, "endingTimestamp")
        elif o.ending_by_timestamp is not None and tp in o.ending_by_timestamp:
            out[tp] = _by_time(store, tp, o.ending_by_timestamp[tp], o, "endingOffsetsByTimestamp")
        else:
            off = o.ending.get(tp, -1) if isinstance(o.ending, dict) else -1
            if off > log_end:
                raise ValueError(
                    f"seglog option endingOffsets: offset {off} of {tp[0]}-{tp[1]} "
                    f"is past its log end {log_end}"
                )
            out[tp] = log_end if off == -1 else off
    return out


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


# -- reading (runs in executors) -------------------------------------------------------


def _read_range(o: _ReadOptions, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    store = _open_read_only(o.path)
    schema = _ARROW_SCHEMA if o.include_headers else _ARROW_NO_HEADERS
    width = len(schema)
    where = f"{r.topic}-{r.partition}"
    pos = r.start
    while pos < r.end:
        try:
            batch, nexts = store.read_arrow(
                [(r.topic, r.partition, pos)], min(r.end - pos, _READ_BATCH_ROWS), _READ_BYTES
            )
        except OffsetOutOfRangeError:
            log_start, log_end = store.offsets(r.topic, r.partition)
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
        nxt = nexts[0]
        if nxt is None:
            log_end = store.offsets(r.topic, r.partition)[1]
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
                    batch if width == 8 else pa.RecordBatch.from_arrays(batch.columns[:width], schema=schema)
                )
        pos = nxt


class _Reader(DataSourceReader):
    def __init__(self, o: _ReadOptions) -> None:
        self._o = o

    def partitions(self) -> Sequence[InputPartition]:
        o = self._o
        store = _open_read_only(o.path)
        tps = _topic_partitions(store, o)
        starts = _starting_offsets(store, tps, o)
        ends = _ending_offsets(store, tps, o)
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


def _to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Kafka's offset JSON, with topics and partitions in a fixed order (Spark
    compares offsets as JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def _from_json(d: Mapping[str, Any]) -> Offsets:
    return {(t, int(p)): int(off) for t, parts in d.items() for p, off in parts.items()}


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of offset ranges; the offset is Kafka's JSON, {"topic":{"0":23}}."""

    def __init__(self, o: _ReadOptions) -> None:
        self._o = o
        self._target: Offsets | None = None
        self._store: Store | None = None

    def __getstate__(self) -> dict[str, Any]:
        # read() runs on a pickled copy in an executor, which opens its own store.
        return {"_o": self._o, "_target": None, "_store": None}

    def _handle(self) -> Store:
        if self._store is None or self._store.closed:
            self._store = _open_read_only(self._o.path)
        return self._store

    def _log_ends(self) -> Offsets:
        store = self._handle()
        return {tp: store.offsets(*tp)[1] for tp in _topic_partitions(store, self._o)}

    def initialOffset(self) -> dict[str, Any]:
        store = self._handle()
        return _to_json(_starting_offsets(store, _topic_partitions(store, self._o), self._o))

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


# -- writing (runs in executors) ---------------------------------------------------------


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


def _open_for_write(o: _WriteOptions) -> Store:
    """Opens the store for writing, waiting (with backoff) while another process
    holds the writer lock, at most writeLockTimeoutMs."""
    deadline = time.monotonic() + o.lock_timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            return open_store(o.path)
        except StoreLockedError as e:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreLockedError(
                    f"seglog sink: gave up waiting {o.lock_timeout_ms} ms (writeLockTimeoutMs) for the "
                    f"writer lock of {o.path!r}: {e}. A store has one writer at a time; close the other "
                    "writer (or open it read_only=True) while Spark writes, or raise writeLockTimeoutMs."
                ) from None
            # A failed attempt costs ~20 us: poll often, so the lock does not sit idle.
            time.sleep(min(left, delay * random.uniform(0.5, 1.0)))
            delay = min(delay * 2, 0.01)


def _runs(n: int, *columns: pa.Array | None) -> list[tuple[int, int]]:
    """[start, end) row runs over which every given column is constant."""
    cuts = {0, n}
    for col in columns:
        if col is not None and n:
            cuts.update(pc.run_end_encode(col).run_ends.to_pylist())
    points = sorted(cuts)
    return list(itertools.pairwise(points))


def _as_bytes(v: Any) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _write_batch(producer: Producer, batch: pa.RecordBatch, o: _WriteOptions, result: WriteResult) -> None:
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
        if headers is None:
            k = None if key is None else key.slice(s, e - s)
            for part, first, last in producer.send_batch(topic, value.slice(s, e - s), k, partition=p):
                result.ranges.append((topic, part, first, last))
        else:
            futures = []
            for i in range(s, e):
                h = headers[i].as_py() or []
                futures.append(
                    producer.send(
                        topic,
                        _as_bytes(value[i].as_py()),
                        key=None if key is None else _as_bytes(key[i].as_py()),
                        headers=[(x["key"], _as_bytes(x["value"])) for x in h],
                        partition=p,
                    )
                )
            producer.flush()
            spans: dict[int, tuple[int, int]] = {}
            for f in futures:
                md = f.get(0)
                first, last = spans.get(md.partition, (md.offset, md.offset))
                spans[md.partition] = (min(first, md.offset), max(last, md.offset))
            result.ranges.extend((topic, part, first, last) for part, (first, last) in spans.items())
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
    store = _open_for_write(o)
    try:
        # acks=1: each send_batch returns once its batches are in the log; close()
        # then fsyncs everything once, before the task reports success.
        producer = Producer(store, acks=1)
        try:
            for batch in itertools.chain(buffered, batches):
                _write_batch(producer, batch, o, result)
        finally:
            producer.close()
    finally:
        store.close()
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


# -- the data source ---------------------------------------------------------------------


class SeglogDataSource(DataSource):
    """``format("seglog")``: Spark's Kafka source and sink over a seglog store."""

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> str:
        o = _read_options(self.options, streaming=None)
        return SCHEMA_WITH_HEADERS if o.include_headers else SCHEMA

    def _check_schema(self, schema: StructType, o: _ReadOptions) -> None:
        expected = _spark_schema(o.include_headers)
        if schema.simpleString() != expected.simpleString():
            raise ValueError(
                f"seglog source has a fixed schema ({expected.simpleString()}); got {schema.simpleString()}"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        o = _read_options(self.options, streaming=False)
        self._check_schema(schema, o)
        return _Reader(o)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        o = _read_options(self.options, streaming=True)
        self._check_schema(schema, o)
        return _StreamReader(o)

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        if overwrite:
            raise ValueError("seglog sink: a log is append-only; use mode('append')")
        o = _write_options(self.options)
        _check_write_schema(schema, o)
        return _Writer(o)

    def streamWriter(self, schema: StructType, overwrite: bool) -> _StreamWriter:
        o = _write_options(self.options)
        _check_write_schema(schema, o)
        return _StreamWriter(o)


_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def local_session(app_name: str = "seglog", *, driver_memory: str = "1g", fast_start: bool = False) -> Any:
    """A quiet local SparkSession (``local[2]``, UTC, no UI) whose Python workers
    run this interpreter, as seglog's examples, tests and benchmarks use it.
    ``fast_start`` trades JIT quality for start-up time (tests)."""
    import os
    import sys
    import tempfile

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    fd, conf = tempfile.mkstemp(prefix="seglog-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_QUIET_LOG4J)
    java = f"-XX:+UseSerialGC -Dlog4j2.configurationFile=file:{conf}"
    if fast_start:
        java += " -XX:TieredStopAtLevel=1"
    session = (
        SparkSession.builder.master("local[2]")
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
