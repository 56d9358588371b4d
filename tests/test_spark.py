"""The PySpark data source (seglog.spark) on a real local SparkSession.

One session for the module (starting the JVM takes ~10 s); Spark's Python workers
are separate processes, so each test builds its store on disk and closes it
before Spark touches it, and reads results back through seglog itself.
"""

from __future__ import annotations

import json
import os
import pkgutil
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import seglog
from seglog.spark import SeglogDataSource

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

pytestmark = pytest.mark.spark


# -- helpers ---------------------------------------------------------------------------


def make_store(path: Path, topics: dict[str, int], config: dict[str, int] | None = None) -> None:
    with seglog.open(path) as store:
        for name, partitions in topics.items():
            store.create_topic(name, partitions, config=config)


def append(path: Path, topic: str, partition: int, records: list[Any]) -> tuple[int, int]:
    with seglog.open(path) as store:
        return store.append(topic, partition, records)


def log_records(path: Path, topic: str) -> dict[int, list[seglog.ConsumerRecord]]:
    """Every record of a topic per partition, read with seglog itself."""
    with seglog.open(path, read_only=True) as store:
        out: dict[int, list[seglog.ConsumerRecord]] = {}
        for p in range(store.partition_count(topic)):
            offset, end = store.offsets(topic, p)
            out[p] = []
            while offset < end:
                chunk = store.read(topic, p, offset)
                out[p].extend(chunk)
                offset = chunk[-1].offset + 1
        return out


def rows(df: DataFrame) -> list[dict[str, Any]]:
    """The rows as dicts, timestamps as epoch ms, in (topic, partition, offset) order."""
    if "timestamp" in df.columns:
        df = df.withColumn("timestamp", F.unix_millis("timestamp"))
    ordered = df.orderBy(*[c for c in ("topic", "partition", "offset") if c in df.columns])
    out: list[dict[str, Any]] = ordered.toArrow().to_pylist()
    return out


def read(spark: SparkSession, path: Path, **options: str) -> DataFrame:
    return spark.read.format("seglog").options(**options).load(str(path))


def key_value(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["topic"], r["partition"], r["offset"], r["key"], r["value"]) for r in records]


def present(b: bytes | None) -> bytes:
    assert b is not None
    return b


def error_text(exc: pytest.ExceptionInfo[BaseException]) -> str:
    return str(exc.value)


# -- registration ----------------------------------------------------------------------


def test_registration_explicit_and_automatic(spark: SparkSession, tmp_path: Path) -> None:
    import pyspark_seglog

    assert pyspark_seglog.DefaultSource is SeglogDataSource
    assert "pyspark_seglog" in {m.name for m in pkgutil.iter_modules()}
    make_store(tmp_path, {"t": 1})
    append(tmp_path, "t", 0, [b"a", b"b"])
    assert read(spark, tmp_path, subscribe="t").count() == 2  # auto-registered
    spark.dataSource.register(SeglogDataSource)
    assert read(spark, tmp_path, subscribe="t").count() == 2


# -- batch reads -----------------------------------------------------------------------


def test_batch_read_matches_the_log_column_for_column(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"events": 2, "other": 1})
    append(
        tmp_path,
        "events",
        0,
        [
            (f"k{i}".encode(), f"v{i}".encode(), [("h", str(i).encode()), ("n", None)], 1_700_000_000_000 + i)
            for i in range(5)
        ],
    )
    append(tmp_path, "events", 1, [b"plain", (None, None)])  # no key; a null value (tombstone)
    append(tmp_path, "other", 0, [b"not read"])

    df = read(spark, tmp_path, subscribe="events")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    got = rows(df)
    expected = [
        {
            "key": r.key,
            "value": r.value,
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestampType": r.timestamp_type,
        }
        for p, recs in sorted(log_records(tmp_path, "events").items())
        for r in recs
    ]
    assert got == expected and len(got) == 7
    assert got[0]["timestamp"] == 1_700_000_000_000 and got[0]["key"] == b"k0"
    assert got[6]["value"] is None and got[5]["key"] is None

    with_headers = rows(read(spark, tmp_path, subscribe="events", includeHeaders="true"))
    assert [r["headers"] for r in with_headers[:2]] == [
        [{"key": "h", "value": b"0"}, {"key": "n", "value": None}],
        [{"key": "h", "value": b"1"}, {"key": "n", "value": None}],
    ]
    assert with_headers[5]["headers"] is None  # as Spark's Kafka source has it


def test_subscribe_pattern_and_assign(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"orders-eu": 2, "orders-us": 1, "payments": 1})
    for topic, parts in (("orders-eu", 2), ("orders-us", 1), ("payments", 1)):
        for p in range(parts):
            append(tmp_path, topic, p, [f"{topic}/{p}/{i}".encode() for i in range(3)])
    pattern = rows(read(spark, tmp_path, subscribePattern="orders-.*"))
    assert {(r["topic"], r["partition"]) for r in pattern} == {
        ("orders-eu", 0),
        ("orders-eu", 1),
        ("orders-us", 0),
    }
    assert len(pattern) == 9
    several = rows(read(spark, tmp_path, subscribe="payments, orders-us"))
    assert [r["value"] for r in several] == [
        f"{t}/0/{i}".encode() for t in ("orders-us", "payments") for i in range(3)
    ]
    assigned = rows(read(spark, tmp_path, assign=json.dumps({"orders-eu": [1], "payments": [0]})))
    assert [(r["topic"], r["partition"]) for r in assigned] == [("orders-eu", 1)] * 3 + [("payments", 0)] * 3


def test_starting_and_ending_offsets(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 2})
    append(tmp_path, "t", 0, [str(i).encode() for i in range(10)])
    append(tmp_path, "t", 1, [str(i).encode() for i in range(10)])
    df = read(
        spark,
        tmp_path,
        subscribe="t",
        startingOffsets=json.dumps({"t": {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({"t": {"0": 7, "1": -1}}),
    )
    got = [(r["partition"], r["offset"]) for r in rows(df)]
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]
    # Words, and partitions left out of the JSON take the default (earliest / latest).
    df = read(
        spark, tmp_path, subscribe="t", startingOffsets="earliest", endingOffsets=json.dumps({"t": {"1": 2}})
    )
    assert [(r["partition"], r["offset"]) for r in rows(df)] == [(0, o) for o in range(10)] + [(1, 0), (1, 1)]


def test_offsets_by_timestamp(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 2})
    base = 1_700_000_000_000
    append(tmp_path, "t", 0, [(None, str(i).encode(), None, base + 1000 * i) for i in range(10)])
    append(tmp_path, "t", 1, [(None, str(i).encode(), None, base + 500 * i) for i in range(10)])

    def offsets(**options: str) -> list[tuple[int, int]]:
        return [(r["partition"], r["offset"]) for r in rows(read(spark, tmp_path, subscribe="t", **options))]

    # startingTimestamp: per partition, the first offset with timestamp >= it.
    assert offsets(startingTimestamp=str(base + 4000)) == [(0, o) for o in range(4, 10)] + [(1, 8), (1, 9)]
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets.
    first = json.dumps({"t": {"0": 0, "1": 0}})
    assert offsets(
        startingTimestamp=str(base + 8500), startingOffsets=first, startingOffsetsByTimestampStrategy="latest"
    ) == [(0, 9)]
    by_ts = json.dumps({"t": {"0": base + 7000, "1": base + 1}})
    assert offsets(startingOffsetsByTimestamp=by_ts) == [(0, o) for o in range(7, 10)] + [
        (1, o) for o in range(1, 10)
    ]
    assert offsets(endingTimestamp=str(base + 1500)) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]
    ending_by_ts = json.dumps({"t": {"0": base + 2000, "1": base + 99_000}})  # nothing that late: latest
    assert offsets(endingOffsetsByTimestamp=ending_by_ts) == [(0, 0), (0, 1)] + [(1, o) for o in range(10)]
    # No record late enough: an error by default, the log end with strategy latest.
    late = str(base + 60_000)
    with pytest.raises(PySparkException) as e:
        offsets(startingTimestamp=late)
    assert "has a timestamp >=" in error_text(e) and "startingOffsetsByTimestampStrategy" in error_text(e)
    assert offsets(startingTimestamp=late, startingOffsetsByTimestampStrategy="latest") == []


def test_min_partitions_splits_ranges_without_loss_or_overlap(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 2})
    append(tmp_path, "t", 0, [str(i).encode() for i in range(900)])
    append(tmp_path, "t", 1, [str(i).encode() for i in range(100)])
    assert read(spark, tmp_path, subscribe="t").rdd.getNumPartitions() == 2
    df = read(spark, tmp_path, subscribe="t", minPartitions="10")
    assert df.rdd.getNumPartitions() == 10  # 9 pieces of the 900-record partition, 1 of the other
    got = [(r["partition"], r["offset"], r["value"]) for r in rows(df)]
    assert got == [(0, i, str(i).encode()) for i in range(900)] + [
        (1, i, str(i).encode()) for i in range(100)
    ]
    df = read(spark, tmp_path, subscribe="t", maxRecordsPerPartition="300")
    assert df.rdd.getNumPartitions() == 4 and df.count() == 1000


def test_compacted_topic_offsets_with_gaps(spark: SparkSession, tmp_path: Path) -> None:
    config = {"cleanup.policy": "compact", "segment.bytes": 1024, "min.cleanable.dirty.ratio": 0.01}
    with seglog.open(tmp_path) as store:
        store.create_topic("c", 1, config=config)
        for i in range(30):
            prefix = b"a" if i < 15 else b"b"  # the a-keys are never written again
            store.append("c", 0, [(prefix + b"%d" % j, b"v%d-%d" % (i, j)) for j in range(5)])
        assert store.clean_topic("c")["records_removed"] > 0
    # (Consumer.poll_arrow: Store.read returns [] at a batch the cleaner emptied, see the report)
    with seglog.Consumer(
        tmp_path, "c", auto_offset_reset="earliest", read_only=True, enable_auto_commit=False
    ) as consumer:
        kept = consumer.poll_arrow(max_records=1000).column("offset").to_pylist()
    assert len(kept) < 150 and kept[-1] == 149  # gaps where older values of a key were
    gap = next(o for o in range(150) if o not in kept and o > kept[0])
    assert [r["offset"] for r in rows(read(spark, tmp_path, subscribe="c"))] == kept
    assert [r["offset"] for r in rows(read(spark, tmp_path, subscribe="c", minPartitions="5"))] == kept
    ending = json.dumps({"c": {"0": gap}})  # an end inside a gap: only offsets below it
    got = rows(read(spark, tmp_path, subscribe="c", endingOffsets=ending))
    assert [r["offset"] for r in got] == [o for o in kept if o < gap]


def apply_retention(path: Path, topic: str, retention_bytes: int) -> int:
    """Sets retention.bytes and runs the log maintenance now (the writer's
    background thread would, every log.retention.check.interval.ms): the oldest
    segments go and the log start offset moves up. Returns the new log start."""
    with seglog.open(path) as store:
        store.alter_topic_config(topic, {"retention.bytes": retention_bytes})
        assert store.run_maintenance(topic)["deleted_segments"] > 0
        return store.offsets(topic, 0)[0]


def test_batch_read_data_loss(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 1})
    append(tmp_path, "t", 0, [b"x" * 100] * 60)
    with seglog.open(tmp_path) as store:
        store.delete_records("t", 0, 25)  # Kafka's DeleteRecords: the log start moves to 25
    start = 25
    from_zero = json.dumps({"t": {"0": 0}})
    with pytest.raises(PySparkException) as e:
        read(spark, tmp_path, subscribe="t", startingOffsets=from_zero).count()
    assert "failOnDataLoss" in error_text(e) and f"log start offset {start}" in error_text(e)
    got = rows(read(spark, tmp_path, subscribe="t", startingOffsets=from_zero, failOnDataLoss="false"))
    assert [r["offset"] for r in got] == list(range(start, 60))


# -- streaming reads -------------------------------------------------------------------


def stream_copy(spark: SparkSession, src: Path, dst: Path, checkpoint: Path, **options: str) -> None:
    """Runs an availableNow query that copies topic t of `src` to topic copy of
    `dst` (the seglog sink), keeping the source offset in the value."""
    df = spark.readStream.format("seglog").option("subscribe", "t").options(**options).load(str(src))
    out = df.select(
        "key",
        F.concat(F.col("value"), F.lit(b"@"), F.col("offset").cast("string").cast("binary")).alias("value"),
        "partition",
    )
    q = (
        out.writeStream.format("seglog")
        .option("topic", "copy")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(dst))
    )
    q.awaitTermination(120)
    assert not q.isActive
    assert q.exception() is None, q.exception()


def test_streaming_restart_reads_exactly_the_new_records(spark: SparkSession, tmp_path: Path) -> None:
    src, dst, cp = tmp_path / "src", tmp_path / "dst", tmp_path / "cp"
    make_store(src, {"t": 2})
    make_store(dst, {"copy": 2})
    for p in range(2):
        append(src, "t", p, [(f"k{i}".encode(), f"a{i}".encode()) for i in range(15)])
    stream_copy(spark, src, dst, cp, startingOffsets="earliest")
    first = log_records(dst, "copy")
    assert sorted(present(r.value) for recs in first.values() for r in recs) == sorted(
        f"a{i}@{i}".encode() for i in range(15) for _ in range(2)
    )
    # New records, and a restart from the checkpoint: only those are read.
    for p in range(2):
        append(src, "t", p, [(f"k{i}".encode(), f"b{i}".encode()) for i in range(15, 25)])
    stream_copy(spark, src, dst, cp, startingOffsets="earliest")
    after = log_records(dst, "copy")
    for p in range(2):  # the sink kept each source partition's order in the same partition
        assert [r.value for r in after[p]] == [f"a{i}@{i}".encode() for i in range(15)] + [
            f"b{i}@{i}".encode() for i in range(15, 25)
        ]
        assert [r.key for r in after[p]] == [f"k{i}".encode() for i in range(25)]


def test_streaming_starts_at_latest_and_finds_new_topics(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 1})
    append(tmp_path, "t", 0, [b"old"] * 5)
    q = (
        spark.readStream.format("seglog")
        .option("subscribePattern", "t.*")
        .load(str(tmp_path))
        .writeStream.format("memory")
        .queryName("latest_default")
        .start()
    )
    try:
        q.processAllAvailable()
        append(tmp_path, "t", 0, [b"new1", b"new2"])
        with seglog.open(tmp_path) as store:  # a topic created later starts at its beginning
            store.create_topic("t2", 2)
            store.append("t2", 1, [b"x", b"y"])
        q.processAllAvailable()
        got = spark.sql("select topic, partition, offset, value from latest_default").collect()
        assert sorted((r.topic, r.partition, r.offset, bytes(r.value)) for r in got) == [
            ("t", 0, 5, b"new1"),
            ("t", 0, 6, b"new2"),
            ("t2", 1, 0, b"x"),
            ("t2", 1, 1, b"y"),
        ]
    finally:
        q.stop()


def test_available_now_honours_max_offsets_per_trigger(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 2})
    for p in range(2):
        append(tmp_path, "t", p, [f"{p}-{i}".encode() for i in range(25)])
    batches: list[tuple[int, list[tuple[int, int]]]] = []

    def sink(df: DataFrame, batch_id: int) -> None:
        batches.append(
            (batch_id, sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect()))
        )

    q = (
        spark.readStream.format("seglog")
        .option("subscribe", "t")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10")
        .load(str(tmp_path))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    sizes = [len(b) for _, b in batches if b]
    assert sizes == [10, 10, 10, 10, 10]  # 5 per partition per batch: the budget split by backlog
    assert sorted(x for _, b in batches for x in b) == [(p, i) for p in range(2) for i in range(25)]


def test_streaming_data_loss_fails_or_skips(spark: SparkSession, tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_store(src, {"t": 1}, {"segment.bytes": 2048})
    make_store(tmp_path / "dst", {"copy": 1})
    append(src, "t", 0, [b"x" * 100] * 5)
    for name in ("strict", "lenient"):  # two queries, each at offset 5
        stream_copy(spark, src, tmp_path / "dst", tmp_path / name, startingOffsets="earliest")
    for _ in range(5):
        append(src, "t", 0, [b"y" * 100] * 10)
    start = apply_retention(src, "t", 3000)
    assert 5 < start < 55  # offsets 5..start-1 are gone before the queries read them
    with pytest.raises(Exception) as e:
        stream_copy(spark, src, tmp_path / "dst", tmp_path / "strict")
    assert "failOnDataLoss" in error_text(e)
    before = sum(len(v) for v in log_records(tmp_path / "dst", "copy").values())
    stream_copy(spark, src, tmp_path / "dst", tmp_path / "lenient", failOnDataLoss="false")
    copied = log_records(tmp_path / "dst", "copy")[0][before:]
    assert [int(present(r.value).split(b"@")[1]) for r in copied] == list(range(start, 55))


def test_streaming_read_while_a_producer_process_appends(spark: SparkSession, tmp_path: Path) -> None:
    total = 20_000
    make_store(tmp_path, {"t": 2})
    producer = textwrap.dedent(
        """
        import sys, time, seglog
        path, total = sys.argv[1], int(sys.argv[2])
        with seglog.open(path) as store, seglog.Producer(store, linger_ms=1) as producer:
            for i in range(0, total, 500):
                ids = range(i, i + 500)
                producer.send_batch("t", [b"%d" % j for j in ids], keys=[b"%d" % (j % 7) for j in ids])
                time.sleep(0.02)
        """
    )
    q = (
        spark.readStream.format("seglog")
        .option("subscribe", "t")
        .option("startingOffsets", "earliest")
        .load(str(tmp_path))
        .writeStream.format("memory")
        .queryName("live")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", producer, str(tmp_path), str(total)], stderr=subprocess.PIPE
        )
        # A batch read in the middle sees a consistent prefix of each partition.
        mid = rows(read(spark, tmp_path, subscribe="t"))
        for p in range(2):
            offsets = [r["offset"] for r in mid if r["partition"] == p]
            assert offsets == list(range(len(offsets)))
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        q.processAllAvailable()
        got = spark.sql("select partition, offset, key, value from live").collect()
    finally:
        q.stop()
    assert len(got) == total
    assert sorted(int(r.value) for r in got) == list(range(total))  # every record once
    for p in range(2):
        assert sorted(r.offset for r in got if r.partition == p) == list(
            range(sum(r.partition == p for r in got))
        )
    assert all(int(r.key) == int(r.value) % 7 for r in got)


# -- writes ----------------------------------------------------------------------------


def test_batch_write_reads_back_exactly(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"a": 3, "b": 1})
    data = [
        # key, value, topic, partition, headers
        (b"k1", b"v1", "a", None, None),
        (b"k2", b"v2", "a", None, None),
        (None, b"v3", "b", None, None),
        (b"k4", b"v4", "a", 2, None),
        (b"k5", b"v5", "a", 2, [("trace", b"t5"), ("n", None)]),
        (b"k6", None, "b", 0, None),
    ]
    df = spark.createDataFrame(
        data,
        "key binary, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    ).coalesce(1)
    df.write.format("seglog").mode("append").save(str(tmp_path))
    a, b = log_records(tmp_path, "a"), log_records(tmp_path, "b")
    with seglog.open(tmp_path, read_only=True) as store:
        p1, p2 = store.partition_for_key("a", b"k1"), store.partition_for_key("a", b"k2")
    expected_a: dict[int, list[tuple[Any, ...]]] = {0: [], 1: [], 2: []}
    expected_a[p1].append((b"k1", b"v1", ()))
    expected_a[p2].append((b"k2", b"v2", ()))
    expected_a[2] += [(b"k4", b"v4", ()), (b"k5", b"v5", (("trace", b"t5"), ("n", None)))]
    assert {p: [(r.key, r.value, r.headers) for r in recs] for p, recs in a.items()} == expected_a
    assert [(r.key, r.value) for r in b[0]] == [(None, b"v3"), (b"k6", None)]

    # The topic option overrides the column; string keys and values are stored as UTF-8.
    spark.createDataFrame([("x", "é", "b")], "key string, value string, topic string").write.format(
        "seglog"
    ).option("topic", "c").mode("append").save(str(tmp_path))
    assert [(r.key, r.value) for r in log_records(tmp_path, "c")[0]] == [(b"x", "é".encode())]
    assert len(log_records(tmp_path, "b")[0]) == 2


def test_batch_write_many_tasks_share_the_single_writer(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 4})
    n = 20_000
    df = spark.range(n, numPartitions=4).select(
        F.col("id").cast("string").cast("binary").alias("value"),
        (F.col("id") % 4).cast("int").alias("partition"),
    )
    df.write.format("seglog").option("topic", "t").mode("append").save(str(tmp_path))
    got = log_records(tmp_path, "t")
    for p in range(4):
        values = [int(present(r.value)) for r in got[p]]
        assert sorted(values) == [i for i in range(n) if i % 4 == p]
    # Read back through Spark as well: the same records.
    assert read(spark, tmp_path, subscribe="t").count() == n


def test_write_waits_for_the_writer_lock_then_fails_clearly(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 1})
    df = spark.createDataFrame([(b"v",)], "value binary")
    store = seglog.open(tmp_path)  # this process holds the writer lock
    try:
        with pytest.raises(PySparkException) as e:
            df.write.format("seglog").option("topic", "t").option("writeLockTimeoutMs", "500").mode(
                "append"
            ).save(str(tmp_path))
        assert "writeLockTimeoutMs" in error_text(e) and f"pid {os.getpid()}" in error_text(e)
        # Released while the task waits: the write goes through.
        threading.Timer(1.0, store.close).start()
        df.write.format("seglog").option("topic", "t").mode("append").save(str(tmp_path))
    finally:
        store.close()
    assert [r.value for r in log_records(tmp_path, "t")[0]] == [b"v"]


def test_streaming_write_from_a_rate_of_rows(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"src": 1, "out": 2})
    append(tmp_path, "src", 0, [f"{i}".encode() for i in range(300)])
    q = (
        spark.readStream.format("seglog")
        .option("subscribe", "src")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load(str(tmp_path))
        .select(
            F.col("value").alias("key"),
            F.upper(F.concat(F.lit("row-"), F.col("value").cast("string"))).alias("value"),
        )
        .withColumn("topic", F.lit("out"))
        .writeStream.format("seglog")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start(str(tmp_path))
    )
    q.awaitTermination(120)
    assert q.exception() is None
    out = log_records(tmp_path, "out")
    with seglog.open(tmp_path, read_only=True) as store:
        for p, recs in out.items():
            assert all(store.partition_for_key("out", present(r.key)) == p for r in recs)
    assert sorted((present(r.key), present(r.value)) for recs in out.values() for r in recs) == sorted(
        (f"{i}".encode(), f"ROW-{i}".encode()) for i in range(300)
    )


# -- bad options -----------------------------------------------------------------------


BAD_READS: list[tuple[dict[str, str], str]] = [
    ({}, "exactly one of the options subscribe, subscribePattern or assign"),
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of the options"),
    ({"subscribePattern": "("}, "invalid regular expression"),
    ({"assign": '{"t":"0"}'}, "list of partition numbers"),
    ({"assign": '{"nope":[0]}'}, "topic 'nope' does not exist"),
    ({"assign": '{"t":[5]}'}, "no partition 5"),
    ({"subscribe": "t", "startingOffsets": "first"}, "must be earliest, latest or JSON"),
    ({"subscribe": "t", "startingOffsets": "{bad json"}, "not valid JSON"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "not allowed in a batch query"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, "not allowed in a batch query"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":99}}'}, "past its log end 3"),
    ({"subscribe": "t", "startingOffsets": '{"u":{"0":1}}'}, "names partitions the query does not read: u-0"),
    (
        {"subscribe": "t", "startingOffsets": '{"t":{"0":2}}', "endingOffsets": '{"t":{"0":1}}'},
        "after its end",
    ),
    ({"subscribe": "t", "failOnDataLoss": "yes"}, "failOnDataLoss must be true or false"),
    ({"subscribe": "t", "minPartitions": "0"}, "minPartitions must be >= 1"),
    ({"subscribe": "t", "minPartitions": "many"}, "minPartitions must be an integer"),
    ({"subscribe": "t", "startingTimestamp": "-5"}, "startingTimestamp must be >= 0"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger is for streaming"),
    ({"subscribe": "t", "startingOffsetByTimestamp": "{}"}, "unknown option 'startingoffsetbytimestamp'"),
]


@pytest.mark.parametrize(("options", "message"), BAD_READS, ids=[m for _, m in BAD_READS])
def test_bad_read_options(spark: SparkSession, tmp_path: Path, options: dict[str, str], message: str) -> None:
    make_store(tmp_path, {"t": 1})
    append(tmp_path, "t", 0, [b"a", b"b", b"c"])
    with pytest.raises(Exception) as e:
        read(spark, tmp_path, **options).count()
    assert message in error_text(e)


def test_bad_source_and_sink_usage(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 1})
    checks: list[tuple[Callable[[], object], str]] = [
        (lambda: spark.read.format("seglog").option("subscribe", "t").load().count(), "option path"),
        (
            lambda: (
                spark.read.format("seglog")
                .option("kafka.bootstrap.servers", "h:9092")
                .option("subscribe", "t")
                .load(str(tmp_path))
            ),
            "are both set; give exactly one",
        ),
        (lambda: read(spark, tmp_path / "missing", subscribe="t").count(), "no store at path"),
        (
            lambda: (
                spark.readStream.format("seglog")
                .options(subscribe="t", endingOffsets="latest")
                .load(str(tmp_path))
                .writeStream.format("memory")
                .queryName("x")
                .start()
                .awaitTermination(60)
            ),
            "a stream has no end",
        ),
        (
            lambda: (
                spark.createDataFrame([(b"k",)], "key binary")
                .write.format("seglog")
                .option("topic", "t")
                .mode("append")
                .save(str(tmp_path))
            ),
            "needs a 'value' column",
        ),
        (
            lambda: (
                spark.createDataFrame([(b"v",)], "value binary")
                .write.format("seglog")
                .mode("append")
                .save(str(tmp_path))
            ),
            "no 'topic' column and no topic option",
        ),
        (
            lambda: (
                spark.createDataFrame([(b"v", 1)], "value binary, partition long")
                .write.format("seglog")
                .option("topic", "t")
                .mode("append")
                .save(str(tmp_path))
            ),
            "column 'partition' must be int",
        ),
        (
            lambda: (
                spark.createDataFrame([(b"v", None)], "value binary, topic string")
                .write.format("seglog")
                .mode("append")
                .save(str(tmp_path))
            ),
            "null topic present in the data",
        ),
        (
            lambda: (
                spark.createDataFrame([(b"v",)], "value binary")
                .write.format("seglog")
                .option("topic", "t")
                .mode("overwrite")
                .save(str(tmp_path))
            ),
            "append-only",
        ),
        (
            lambda: (
                spark.createDataFrame([(b"v",)], "value binary")
                .write.format("seglog")
                .option("topic", "t")
                .option("writeLockTimeoutMs", "soon")
                .mode("append")
                .save(str(tmp_path))
            ),
            "writeLockTimeoutMs must be an integer",
        ),
    ]
    for action, message in checks:
        with pytest.raises(Exception) as e:
            action()
        assert message in error_text(e), (message, error_text(e)[:2000])
    assert log_records(tmp_path, "t")[0] == []  # nothing was written by the failed writes


# -- through a broker (kafka.bootstrap.servers) ----------------------------------------


def read_remote(spark: SparkSession, broker: seglog.Broker, **options: str) -> DataFrame:
    return (
        spark.read.format("seglog")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .options(**options)
        .load()
    )


def test_broker_batch_read_equals_path_read(spark: SparkSession, tmp_path: Path) -> None:
    base = 1_700_000_000_000
    make_store(tmp_path, {"events": 2, "other": 1})
    for p in range(2):
        append(
            tmp_path,
            "events",
            p,
            [
                (
                    f"k{i}".encode(),
                    f"v{p}-{i}".encode(),
                    [("h", str(i).encode()), ("n", None)],
                    base + 100 * i,
                )
                for i in range(40)
            ]
            + [(None, None), b"plain"],
        )
    append(tmp_path, "other", 0, [b"o1", b"o2"])
    cases: list[dict[str, str]] = [
        {"subscribe": "events"},
        {"subscribe": "events", "includeHeaders": "true"},
        {"subscribePattern": ".*"},
        {"assign": json.dumps({"events": [1], "other": [0]})},
        {
            "subscribe": "events",
            "startingOffsets": json.dumps({"events": {"0": 3, "1": -2}}),
            "endingOffsets": json.dumps({"events": {"0": 30, "1": -1}}),
        },
        {"subscribe": "events", "startingTimestamp": str(base + 1_050), "endingTimestamp": str(base + 2_500)},
        {"subscribe": "events", "minPartitions": "7"},
    ]
    with seglog.Broker(tmp_path) as broker:
        for options in cases:
            remote = read_remote(spark, broker, **options)
            local = read(spark, tmp_path, **options)
            assert remote.schema == local.schema
            got = rows(remote)
            assert got == rows(local), options
            assert got, options
        split = read_remote(spark, broker, subscribe="events", minPartitions="7").rdd.getNumPartitions()
        assert split == read(spark, tmp_path, subscribe="events", minPartitions="7").rdd.getNumPartitions()
        assert split > 2
        # Data loss: the log start moves past what a query asks for.
        broker.store.delete_records("events", 0, 25)
        from_zero = json.dumps({"events": {"0": 0}})
        with pytest.raises(PySparkException) as e:
            read_remote(spark, broker, subscribe="events", startingOffsets=from_zero).count()
        assert "failOnDataLoss" in error_text(e) and "log start offset 25" in error_text(e)
        options = {"subscribe": "events", "startingOffsets": from_zero, "failOnDataLoss": "false"}
        got = rows(read_remote(spark, broker, **options))
        assert got == rows(read(spark, tmp_path, **options))
        assert [r["offset"] for r in got if r["partition"] == 0] == list(range(25, 42))


def stream_batches(
    spark: SparkSession, checkpoint: Path, source: dict[str, str]
) -> list[list[tuple[Any, ...]]]:
    """Runs an availableNow query over topic t (at most 10 offsets a trigger) and
    returns each non-empty micro-batch's (partition, offset, key, value), sorted."""
    batches: list[list[tuple[Any, ...]]] = []

    def sink(df: DataFrame, batch_id: int) -> None:
        got = df.select("partition", "offset", "key", "value").collect()
        if got:
            batches.append(sorted((r.partition, r.offset, r.key, r.value) for r in got))

    reader = spark.readStream.format("seglog").options(subscribe="t", maxOffsetsPerTrigger="10", **source)
    q = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return batches


def test_broker_streaming_read_equals_path_read(spark: SparkSession, tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_store(store, {"t": 2})
    for p in range(2):
        append(store, "t", p, [(f"k{i}".encode(), f"a{p}-{i}".encode()) for i in range(12)])
    with seglog.Broker(store) as broker:
        remote = {"kafka.bootstrap.servers": broker.bootstrap_servers}
        local = {"path": str(store)}
        for name, source in (("remote", remote), ("local", local)):
            batches = stream_batches(spark, tmp_path / name, {**source, "startingOffsets": "earliest"})
            assert [len(b) for b in batches] == [10, 10, 4], name
        for p in range(2):  # more records, and both queries restarted from their checkpoints
            broker.store.append("t", p, [(None, f"b{p}-{i}".encode()) for i in range(7)])
        after = {
            name: stream_batches(spark, tmp_path / name, source)
            for name, source in (("remote", remote), ("local", local))
        }
        assert after["remote"] == after["local"]
        assert sorted(x for b in after["remote"] for x in b) == [
            (p, 12 + i, None, f"b{p}-{i}".encode()) for p in range(2) for i in range(7)
        ]
        # startingTimestamp and failOnDataLoss, as through a path.
        broker.store.delete_records("t", 0, 5)
        starting = json.dumps({"t": {"0": 0, "1": 0}})
        with pytest.raises(Exception) as e:
            stream_batches(spark, tmp_path / "strict", {**remote, "startingOffsets": starting})
        assert "failOnDataLoss" in error_text(e)
        lenient = {"startingOffsets": starting, "failOnDataLoss": "false"}
        got = stream_batches(spark, tmp_path / "lenient-r", {**remote, **lenient})
        assert got == stream_batches(spark, tmp_path / "lenient-l", {**local, **lenient})
        assert sorted(x[:2] for b in got for x in b) == [(0, o) for o in range(5, 19)] + [
            (1, o) for o in range(19)
        ]
        future = str(seglog_now_ms() + 3_600_000)
        latest = {"startingTimestamp": future, "startingOffsetsByTimestampStrategy": "latest"}
        assert stream_batches(spark, tmp_path / "ts", {**remote, **latest}) == []


def seglog_now_ms() -> int:
    import time

    return int(time.time() * 1000)


WRITE_ROWS = [
    # key, value, topic, partition, headers
    (b"k1", b"v1", "a", None, None),
    (b"k2", b"v2", "a", None, None),
    (None, b"v3", "b", None, None),
    (b"k4", b"v4", "a", 2, None),
    (b"k5", b"v5", "a", 2, [("trace", b"t5"), ("n", None)]),
    (b"k6", None, "b", 0, None),
] + [(f"key{i}".encode(), f"value{i}".encode(), "a", None, None) for i in range(200)]


def logged(path: Path, topics: list[str]) -> dict[str, dict[int, list[tuple[Any, ...]]]]:
    return {
        t: {
            p: [(r.offset, r.key, r.value, r.headers) for r in recs]
            for p, recs in log_records(path, t).items()
        }
        for t in topics
    }


def test_broker_batch_write_equals_path_write(spark: SparkSession, tmp_path: Path) -> None:
    remote, local = tmp_path / "remote", tmp_path / "local"
    for store in (remote, local):
        make_store(store, {"a": 3, "b": 1, "c": 1})
    df = spark.createDataFrame(
        WRITE_ROWS,
        "key binary, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    )
    strings = spark.createDataFrame([("x", "é", "b")], "key string, value string, topic string")
    with seglog.Broker(remote) as broker:
        for frame, options in ((df.coalesce(1), {}), (strings, {"topic": "c"})):
            remote_options = {**options, "kafka.bootstrap.servers": broker.bootstrap_servers}
            frame.write.format("seglog").options(**remote_options).mode("append").save()
            frame.write.format("seglog").options(**options).mode("append").save(str(local))
    assert logged(remote, ["a", "b", "c"]) == logged(local, ["a", "b", "c"])
    assert sum(len(v) for v in logged(remote, ["a"])["a"].values()) == 204
    # Several write tasks at once, through the broker (no writer lock to take in turn).
    make_store(tmp_path / "many", {"t": 4})
    n = 20_000
    many = spark.range(n, numPartitions=4).select(
        F.col("id").cast("string").cast("binary").alias("value"),
        (F.col("id") % 4).cast("int").alias("partition"),
    )
    with seglog.Broker(tmp_path / "many") as broker:
        many.write.format("seglog").option("topic", "t").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).mode("append").save()
    got = log_records(tmp_path / "many", "t")
    for p in range(4):
        assert sorted(int(present(r.value)) for r in got[p]) == [i for i in range(n) if i % 4 == p]


def test_broker_streaming_write_equals_path_write(spark: SparkSession, tmp_path: Path) -> None:
    src = tmp_path / "src"
    make_store(src, {"t": 2})
    for p in range(2):
        append(src, "t", p, [(f"k{i}".encode(), f"a{i}".encode()) for i in range(15)])
    make_store(tmp_path / "remote", {"copy": 2})
    make_store(tmp_path / "local", {"copy": 2})
    with seglog.Broker(src) as source, seglog.Broker(tmp_path / "remote") as sink:

        def copy(to: dict[str, str], checkpoint: str) -> None:
            # Read through one broker, write through another (or into a path).
            df = (
                spark.readStream.format("seglog")
                .option("kafka.bootstrap.servers", source.bootstrap_servers)
                .options(subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="8")
                .load()
            )
            q = (
                df.select("key", "value", "partition")
                .writeStream.format("seglog")
                .options(topic="copy", checkpointLocation=str(tmp_path / checkpoint), **to)
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination(120)
            assert q.exception() is None, q.exception()

        copy({"kafka.bootstrap.servers": sink.bootstrap_servers}, "cp-remote")
        copy({"path": str(tmp_path / "local")}, "cp-local")
        for p in range(2):
            source.store.append("t", p, [(f"k{i}".encode(), f"b{i}".encode()) for i in range(15, 20)])
        copy({"kafka.bootstrap.servers": sink.bootstrap_servers}, "cp-remote")
        copy({"path": str(tmp_path / "local")}, "cp-local")
    remote, local = logged(tmp_path / "remote", ["copy"]), logged(tmp_path / "local", ["copy"])
    assert remote == local
    for p in range(2):
        assert [(k, v) for _, k, v, _ in remote["copy"][p]] == [
            (f"k{i}".encode(), f"{'a' if i < 15 else 'b'}{i}".encode()) for i in range(20)
        ]


def test_broker_bad_options(spark: SparkSession, tmp_path: Path) -> None:
    make_store(tmp_path, {"t": 1})
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = f"127.0.0.1:{s.getsockname()[1]}"
    with seglog.Broker(tmp_path) as broker:
        servers = broker.bootstrap_servers
        value = spark.createDataFrame([(b"k", b"v")], "key binary, value binary")
        checks: list[tuple[Callable[[], object], str]] = [
            (
                lambda: (
                    spark.read.format("seglog")
                    .options(subscribe="t", **{"kafka.bootstrap.servers": servers})
                    .load(str(tmp_path))
                    .count()
                ),
                "are both set; give exactly one",
            ),
            (
                lambda: (
                    spark.read.format("seglog")
                    .options(subscribe="t", **{"kafka.bootstrap.servers": "localhost"})
                    .load()
                    .count()
                ),
                "comma-separated list of HOST:PORT",
            ),
            (
                lambda: (
                    spark.read.format("seglog")
                    .options(subscribe="t", **{"kafka.bootstrap.servers": free})
                    .load()
                    .count()
                ),
                "cannot reach the broker at kafka.bootstrap.servers",
            ),
            (
                lambda: read_remote(spark, broker, assign='{"nope":[0]}').count(),
                "topic 'nope' does not exist",
            ),
            (lambda: read_remote(spark, broker, assign='{"t":[3]}').count(), "no partition 3"),
            (
                lambda: (
                    value.write.format("seglog")
                    .options(topic="t", writeLockTimeoutMs="10", **{"kafka.bootstrap.servers": servers})
                    .mode("append")
                    .save()
                ),
                "writeLockTimeoutMs is for path",
            ),
            (
                lambda: (
                    value.write.format("seglog")
                    .options(topic="missing", **{"kafka.bootstrap.servers": servers})
                    .mode("append")
                    .save()
                ),
                "topic 'missing' does not exist on the broker",
            ),
            (
                lambda: (
                    value.write.format("seglog")
                    .options(topic="t", **{"kafka.bootstrap.servers": servers})
                    .mode("append")
                    .save(str(tmp_path))
                ),
                "are both set; give exactly one",
            ),
        ]
        for action, message in checks:
            with pytest.raises(Exception) as e:
                action()
            assert message in error_text(e), (message, error_text(e)[:2000])
    assert log_records(tmp_path, "t")[0] == []
