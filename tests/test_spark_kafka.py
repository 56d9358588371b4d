"""Spark's own Kafka connector (``format("kafka")``: spark-sql-kafka-0-10 at the
installed PySpark's version, as `make java` resolves it) reading and writing
through seglog brokers. Each read is compared with seglog's own data source over
the same broker (which its own tests compare with the log) and with the records
the log holds; each write with what lands in the log, batch by batch."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import seglog
from cluster_helpers import Zk, wait_for
from java_helpers import spark_kafka_jars
from seglog.testing import LocalCluster
from test_java_clients import CODECS, batches
from test_replication import FAST, TOPIC, MakeCluster, topic_with_full_isr, up
from test_spark import append, log_records, make_store, rows

pytestmark = [pytest.mark.spark, pytest.mark.java]

SERVERS = "kafka.bootstrap.servers"


@pytest.fixture
def kafka_spark(spark: SparkSession) -> SparkSession:
    """The session, checked to carry the connector's jars."""
    configured = spark.sparkContext.getConf().get("spark.jars", "")
    missing = [j for j in spark_kafka_jars() if j not in configured]
    assert not missing, f"the session started without Spark's Kafka connector: {missing}"
    return spark


def read(spark: SparkSession, fmt: str, servers: str, **options: str) -> DataFrame:
    return spark.read.format(fmt).option(SERVERS, servers).options(**options).load()


def columns(df: DataFrame) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def logged_rows(path: Path, topic: str) -> list[dict[str, Any]]:
    """The topic's records as Spark's Kafka source shows them (headers included)."""
    return [
        {
            "key": r.key,
            "value": r.value,
            "topic": topic,
            "partition": p,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestampType": 0,
            "headers": [{"key": k, "value": v} for k, v in r.headers] if r.headers else None,
        }
        for p, recs in sorted(log_records(path, topic).items())
        for r in recs
    ]


# -- batch reads ---------------------------------------------------------------------------

BASE = 1_700_000_000_000


def test_batch_read_equals_the_log_and_seglogs_source_option_for_option(
    kafka_spark: SparkSession, tmp_path: Path
) -> None:
    spark = kafka_spark
    make_store(tmp_path, {"events": 3, "other": 1})
    for p in range(3):
        append(
            tmp_path,
            "events",
            p,
            [
                (
                    f"k{i}".encode(),
                    f"v{p}-{i}".encode(),
                    [("h", str(i).encode()), ("n", None)],
                    BASE + 100 * i,
                )
                for i in range(40)
            ]
            + [(None, None, [], BASE + 5_000), (b"plain", b"x" * 3000, [], BASE + 5_100)],
        )
    append(tmp_path, "other", 0, [b"o1", b"o2"])
    expected = logged_rows(tmp_path, "events")
    assert len(expected) == 126
    # Small fetches: the connector's consumers go back for more many times per partition.
    small = {"kafka.max.partition.fetch.bytes": "700", "kafka.fetch.max.bytes": "2000"}
    cases: list[dict[str, str]] = [
        {"subscribe": "events"},
        {"subscribe": "events", "includeHeaders": "true", **small},
        {"subscribePattern": "ev.*|oth.*", "kafka.client.id": "spark-reader"},
        {"assign": json.dumps({"events": [1], "other": [0]}), "kafka.isolation.level": "read_committed"},
        {
            "subscribe": "events",
            "startingOffsets": json.dumps({"events": {"0": 3, "1": -2, "2": 41}}),
            "endingOffsets": json.dumps({"events": {"0": 30, "1": -1, "2": -1}}),
        },
        {"subscribe": "events", "startingTimestamp": str(BASE + 1_050), "endingTimestamp": str(BASE + 2_500)},
        {
            "subscribe": "events",
            "startingOffsetsByTimestamp": json.dumps(
                {"events": {"0": BASE + 3_000, "1": BASE, "2": BASE + 5_050}}
            ),
            "endingOffsetsByTimestamp": json.dumps(
                {"events": {"0": BASE + 3_500, "1": BASE + 200, "2": BASE + 9_000}}
            ),
            "startingOffsetsByTimestampStrategy": "latest",
        },
        {"subscribe": "events", "minPartitions": "7"},
    ]
    with seglog.Broker(tmp_path) as broker:
        servers = broker.bootstrap_servers
        for options in cases:
            kafka = read(spark, "kafka", servers, **options)
            ours = read(spark, "seglog", servers, **options)
            assert columns(kafka) == columns(ours), options
            got = rows(kafka)
            assert got == rows(ours), options
            assert got, options
        # Against the log itself, column for column.
        assert rows(read(spark, "kafka", servers, subscribe="events", includeHeaders="true")) == expected
        ranged = rows(read(spark, "kafka", servers, **cases[4]))
        assert [(r["partition"], r["offset"]) for r in ranged] == (
            [(0, o) for o in range(3, 30)] + [(1, o) for o in range(42)] + [(2, 41)]
        )
        by_time = rows(read(spark, "kafka", servers, **cases[5]))
        assert {r["offset"] for r in by_time} == set(range(11, 25))
        by_offsets_by_time = rows(read(spark, "kafka", servers, **cases[6]))
        assert [(r["partition"], r["offset"]) for r in by_offsets_by_time] == (
            [(0, o) for o in range(30, 35)] + [(1, 0), (1, 1), (2, 41)]
        )
        # Ranges split as Kafka's connector splits them (each in proportion to its size, rounded).
        split = read(spark, "kafka", servers, subscribe="events", minPartitions="7").rdd.getNumPartitions()
        assert split == read(spark, "seglog", servers, **cases[7]).rdd.getNumPartitions() == 6

        # Data loss: the log start moves past where a query starts.
        broker.store.delete_records("events", 0, 25)
        from_zero = json.dumps({"events": {"0": 0, "1": -2, "2": -2}})
        with pytest.raises(Exception) as e:
            read(spark, "kafka", servers, subscribe="events", startingOffsets=from_zero).count()
        assert "failOnDataLoss" in str(e.value), str(e.value)[:3000]
        lenient = {"subscribe": "events", "startingOffsets": from_zero, "failOnDataLoss": "false"}
        got = rows(read(spark, "kafka", servers, **lenient))
        assert [r["offset"] for r in got if r["partition"] == 0] == list(range(25, 42))
        assert got == rows(read(spark, "seglog", servers, **lenient))
        # Offset JSON naming only some partitions: Kafka's connector refuses it, seglog's
        # source reads the others from earliest (docs/broker.md).
        some = {"subscribe": "events", "startingOffsets": json.dumps({"events": {"1": 40}})}
        with pytest.raises(Exception) as e:
            read(spark, "kafka", servers, **some).count()
        assert "Partitions specified for Kafka start offsets don't match what are assigned" in str(e.value)
        assert read(spark, "seglog", servers, **some).count() == 17 + 2 + 42


# -- streaming reads -----------------------------------------------------------------------


class Batches:
    """A foreachBatch sink keeping each micro-batch's (partition, offset, value) by batch
    id: a batch run again after a stop replaces its first run, as an idempotent sink's
    would, so what it holds is what an exactly-once sink ends up with."""

    def __init__(self) -> None:
        self.by_id: dict[int, list[tuple[int, int, bytes]]] = {}
        self.runs: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        got = [(r.partition, r.offset, r.value) for r in df.select("partition", "offset", "value").collect()]
        with self._lock:
            self.by_id[batch_id] = got
            self.runs.append(batch_id)

    def records(self) -> list[tuple[int, int, bytes]]:
        with self._lock:
            return [x for b in self.by_id.values() for x in b]


def test_streaming_read_stopped_and_restarted_sees_every_record_once(
    kafka_spark: SparkSession, tmp_path: Path
) -> None:
    spark = kafka_spark
    make_store(tmp_path, {"t": 3})
    total, sent = 6_000, threading.Event()
    with seglog.Broker(tmp_path) as broker:
        servers = broker.bootstrap_servers

        def produce() -> None:
            with seglog.Producer(bootstrap_servers=servers, acks="all") as producer:
                for i in range(total):
                    producer.send("t", f"v{i}".encode(), key=f"k{i}".encode())
                    if i % 200 == 199:
                        producer.flush()
                        time.sleep(0.02)  # a steady trickle, so that batches overlap the producer
            sent.set()

        sink = Batches()

        def start() -> Any:
            return (
                spark.readStream.format("kafka")
                .option(SERVERS, servers)
                .options(subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="700")
                .option("kafka.max.partition.fetch.bytes", "4096")
                .load()
                .writeStream.foreachBatch(sink)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(processingTime="100 milliseconds")
                .start()
            )

        producer = threading.Thread(target=produce)
        producer.start()
        query = start()
        for stop in (1_500, 3_500):  # stopped twice while the producer is still at work
            wait_for(f"{stop} records streamed", lambda s=stop: len(sink.records()) >= s, 120)
            query.stop()
            assert query.exception() is None, query.exception()
            query = start()
        sent.wait(120)
        producer.join()
        wait_for("every record streamed", lambda: len(sink.records()) >= total, 120)
        query.processAllAvailable()
        query.stop()
        assert query.exception() is None, query.exception()
    got = sink.records()
    logged = {(p, r.offset): r.value for p, recs in log_records(tmp_path, "t").items() for r in recs}
    assert len(logged) == total
    assert sorted((p, o) for p, o, _ in got) == sorted(logged)  # each offset once: no loss, no duplicate
    assert all(logged[(p, o)] == v for p, o, v in got)
    assert sorted(sink.by_id) == list(range(len(sink.by_id)))  # batch ids went on from the checkpoint


# -- the Kafka sink ------------------------------------------------------------------------

WRITE_ROWS = [
    # key, value, topic, partition, headers
    (b"k1", b"v1", "a", None, None),
    (None, b"v3", "b", None, None),
    (b"k4", b"v4", "a", 2, None),
    (b"k5", b"v5", "a", 2, [("trace", b"t5"), ("n", None)]),
    (b"k6", None, "b", 0, None),
] + [(f"key{i}".encode(), f"value{i}".encode(), "a", None, None) for i in range(300)]


def test_kafka_sink_batch_write_lands_as_seglogs_partitioner_puts_it(
    kafka_spark: SparkSession, tmp_path: Path
) -> None:
    spark = kafka_spark
    make_store(tmp_path, {"a": 3, "b": 1})
    df = spark.createDataFrame(
        WRITE_ROWS,
        "key binary, value binary, topic string, partition int, "
        "headers array<struct<key:string,value:binary>>",
    ).coalesce(1)
    with seglog.Broker(tmp_path) as broker:
        df.write.format("kafka").option(SERVERS, broker.bootstrap_servers).options(
            **{"kafka.compression.type": "zstd", "kafka.acks": "all", "kafka.linger.ms": "20"}
        ).save()
        store = broker.store
        landed = {
            t: {
                p: [(r.key, r.value, r.headers) for r in recs] for p, recs in log_records(tmp_path, t).items()
            }
            for t in ("a", "b")
        }
        for key, value, topic, partition, headers in WRITE_ROWS:
            p = partition if partition is not None else (store.partition_for_key(topic, key) if key else None)
            where = [q for q, recs in landed[topic].items() if (key, value, tuple(headers or ())) in recs]
            assert len(where) == 1, (key, value, landed[topic])
            if p is not None:
                assert where == [p], (key, value)
    assert sum(len(v) for v in landed["a"].values()) == 303
    for p in range(3):  # in order within a partition
        keyed = [int(k[3:]) for k, _, _ in landed["a"][p] if k and k.startswith(b"key")]
        assert keyed == sorted(keyed)
        written = batches(tmp_path, "a", p)
        assert {b.attributes & 0x7 for b in written} == {CODECS["zstd"]}
        assert all(b.producer_id >= 0 for b in written)  # the producer's idempotence, Kafka's default


def test_kafka_sink_write_stream_copies_exactly_across_restarts(
    kafka_spark: SparkSession, tmp_path: Path
) -> None:
    spark = kafka_spark
    make_store(tmp_path, {"t": 2, "copy": 2})
    with seglog.Broker(tmp_path) as broker:
        servers = broker.bootstrap_servers

        def copy() -> None:
            q = (
                spark.readStream.format("kafka")
                .option(SERVERS, servers)
                .options(subscribe="t", startingOffsets="earliest", maxOffsetsPerTrigger="8")
                .option("includeHeaders", "true")
                .load()
                .select("key", "value", "partition", "headers")
                .writeStream.format("kafka")
                .option(SERVERS, servers)
                .options(topic="copy", checkpointLocation=str(tmp_path / "cp"))
                .option("kafka.compression.type", "lz4")
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination(120)
            assert q.exception() is None, q.exception()

        for p in range(2):
            broker.store.append(
                "t", p, [(f"k{i}".encode(), f"a{i}".encode(), [("i", b"%d" % i)]) for i in range(15)]
            )
        copy()
        for p in range(2):
            broker.store.append("t", p, [(f"k{i}".encode(), f"b{i}".encode(), []) for i in range(15, 21)])
        copy()
        copy()  # nothing new: nothing written
    copied = log_records(tmp_path, "copy")
    for p in range(2):
        assert [(r.key, r.value, r.headers) for r in copied[p]] == [
            (f"k{i}".encode(), f"{'a' if i < 15 else 'b'}{i}".encode(), (("i", b"%d" % i),) if i < 15 else ())
            for i in range(21)
        ]
        assert {b.attributes & 0x7 for b in batches(tmp_path, "copy", p)} == {CODECS["lz4"]}


# -- a cluster -------------------------------------------------------------------------------


@pytest.mark.cluster
def test_connector_reads_and_writes_a_three_broker_cluster(
    kafka_spark: SparkSession, local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    spark = kafka_spark
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    servers = cluster.bootstrap_servers
    n = 3_000
    frame = spark.range(n, numPartitions=2).select(
        F.format_string("k%d", "id").cast("binary").alias("key"),
        F.format_string("v%d", "id").cast("binary").alias("value"),
    )
    frame.write.format("kafka").option(SERVERS, servers).option("topic", TOPIC).option(
        "kafka.acks", "all"
    ).save()
    got = rows(read(spark, "kafka", servers, subscribe=TOPIC))
    assert sorted(r["value"] for r in got) == sorted(f"v{i}".encode() for i in range(n))
    assert {r["partition"] for r in got} == set(parts)
    for p in parts:
        assert [r["offset"] for r in got if r["partition"] == p] == list(
            range(sum(r["partition"] == p for r in got))
        )
    assert got == rows(read(spark, "seglog", servers, subscribe=TOPIC))
    sink = Batches()
    query = (
        spark.readStream.format("kafka")
        .option(SERVERS, servers)
        .options(subscribe=TOPIC, startingOffsets="earliest", maxOffsetsPerTrigger="1000")
        .load()
        .writeStream.foreachBatch(sink)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted((p, o) for p, o, _ in sink.records()) == sorted((r["partition"], r["offset"]) for r in got)
    assert len(sink.by_id) >= 3


# -- the example pipeline ----------------------------------------------------------------------


@pytest.mark.parametrize("via", ["path", "kafka"])
def test_pipeline_example_counts_every_event(tmp_path: Path, via: str) -> None:
    """examples/pipeline.py (`make run`), small, on the store and through a broker with
    Spark's connector: its own check compares the windows' counts with what it produced."""
    example = Path(__file__).resolve().parent.parent / "examples" / "pipeline.py"
    args = ["--events", "6000", "--waves", "3", "--via", via, "--store", str(tmp_path / "store")]
    proc = subprocess.run([sys.executable, str(example), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr[-5000:]}"
    assert "all 6,000 views" in proc.stdout, proc.stdout
    assert ("Kafka connector" in proc.stdout) == (via == "kafka")
