"""Spark reading seglog (through `path`, through a broker, and through a broker
with Spark's own Kafka connector) vs Spark reading Parquet: the same 1,000,000 records.

    .venv/bin/python benches/bench_spark.py [--records N] [--value-bytes B] [--runs R] [--json FILE]

Builds a store with one topic of 2 partitions holding N records of B-byte values,
writes the same records (Spark's Kafka columns) as 2 Parquet files (one per
partition, so all sources get 2 tasks), then on one local[2] SparkSession times
`count(*), sum(length(value))` over each source: the store opened by the
executors (`path`), the same store served by a `seglog.Broker` in this process
(`kafka.bootstrap.servers`: Fetch requests decoded into Arrow in Rust), the
same broker read by Spark's Kafka connector (`format("kafka")`, its jars as
`make java` resolves them), the connector through Kafka 3.9's own broker
(ZooKeeper mode, the same records), and Parquet. The reads run in rounds, each
source once per round in turn (path and Parquet, then, with the brokers up, the
broker, the connector through seglog and through Kafka, and Parquet), after a
warm-up round: so that every source meets the JVM equally warmed up. The JVM
keeps its default collector (G1 with 2 or more CPUs; see `local_session`). Prints
the best of R rounds and the median over rounds of each round's ratio to the
Parquet run of the same round. Also times a batch write of the N
records into a seglog topic, through `path` (2 tasks that take the store's writer
lock in turn), through the broker (2 tasks producing with acks=all) and through
the broker with the connector's Kafka sink. Prints rows/s and the ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka.admin import AdminClient, NewTopic

import seglog
from seglog.spark import local_session
from seglog.testing import ZooKeeper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # Kafka's own broker, as the tests run it

from java_helpers import spark_kafka_jars  # noqa: E402
from kafka_reference import KafkaBroker  # noqa: E402

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

SERVERS = "kafka.bootstrap.servers"


def build(root: Path, n: int, value_bytes: int) -> tuple[Path, Path]:
    store_path, parquet_dir = root / "store", root / "parquet"
    parquet_dir.mkdir()
    with seglog.open(store_path) as store:
        store.create_topic("bench", partitions=2)
        with seglog.Producer(store, acks=1) as producer:
            step = 50_000
            for p in range(2):
                for i in range(0, n // 2, step):
                    k = min(step, n // 2 - i)
                    body = os.urandom(k * value_bytes)
                    offsets = pa.array(range(0, (k + 1) * value_bytes, value_bytes), pa.int32()).buffers()[1]
                    values = pa.Array.from_buffers(pa.binary(), k, [None, offsets, pa.py_buffer(body)])
                    producer.send_batch("bench", values, partition=p)
        # The Parquet copy: the very records, with all of Spark's Kafka columns.
        for p in range(2):
            batches, offset, end = [], 0, store.offsets("bench", p)[1]
            while offset < end:
                batch, nexts = store.read_arrow([("bench", p, offset)], 100_000, 4 << 20)
                batches.append(batch.drop_columns(["headers"]))
                offset = nexts[0] or end
            pq.write_table(pa.Table.from_batches(batches), parquet_dir / f"part-{p}.parquet")
    return store_path, parquet_dir


def rounds(runs: int, cases: dict[str, Any]) -> dict[str, list[float]]:
    """Each case once per round, in turn, after a warm-up round; the times."""
    for f in cases.values():
        f()  # warm-up: Python workers, JIT, page cache
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(runs):
        for k, f in cases.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return times


def median_ratio(fast: list[float], slow: list[float]) -> float:
    """The median over rounds of slow[i] / fast[i] (rows/s of `fast`'s source
    over those of `slow`'s, round by round)."""
    return statistics.median(s / f for f, s in zip(fast, slow, strict=True))


def best_of(runs: int, f: Any) -> float:
    f()  # warm-up: Python workers, JIT, page cache
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    n = args.records

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        store_path, parquet_dir = build(root, n, args.value_bytes)
        print(f"built {n:,} records of {args.value_bytes} B in {time.perf_counter() - t:.1f}s", flush=True)
        spark = local_session("seglog-bench", driver_memory="2g", jars=spark_kafka_jars())
        management = spark.sparkContext._jvm.java.lang.management
        gc_names = [b.getName() for b in management.ManagementFactory.getGarbageCollectorMXBeans()]
        print(f"JVM collectors: {', '.join(gc_names)}", flush=True)
        agg = ("count(*) AS n", "sum(length(value)) AS bytes")
        expected = (n, n * args.value_bytes)

        def seglog_read() -> None:
            df = spark.read.format("seglog").option("subscribe", "bench").load(str(store_path))
            r = df.selectExpr(*agg).first()
            assert r is not None and (r.n, r.bytes) == expected, r

        servers = ""

        def broker_read() -> None:
            df = (
                spark.read.format("seglog")
                .option("subscribe", "bench")
                .option("kafka.bootstrap.servers", servers)
                .load()
            )
            r = df.selectExpr(*agg).first()
            assert r is not None and (r.n, r.bytes) == expected, r

        def connector_read() -> None:
            df = spark.read.format("kafka").option("subscribe", "bench").option(SERVERS, servers).load()
            r = df.selectExpr(*agg).first()
            assert r is not None and (r.n, r.bytes) == expected, r

        kafka_servers = ""

        def kafka_read() -> None:  # the connector through Kafka 3.9's own broker
            df = spark.read.format("kafka").option("subscribe", "bench").option(SERVERS, kafka_servers).load()
            r = df.selectExpr(*agg).first()
            assert r is not None and (r.n, r.bytes) == expected, r

        def parquet_read() -> None:
            r = spark.read.parquet(str(parquet_dir)).selectExpr(*agg).first()
            assert r is not None and (r.n, r.bytes) == expected, r

        counter = iter(range(1_000_000))

        def seglog_write() -> None:
            topic = f"copy{next(counter)}"
            spark.read.parquet(str(parquet_dir)).select("key", "value").write.format("seglog").option(
                "topic", topic
            ).mode("append").save(str(store_path))

        def broker_write() -> None:
            topic = f"remote{next(counter)}"
            broker.store.create_topic(topic, partitions=2)  # Kafka's partitioner needs the topic first
            spark.read.parquet(str(parquet_dir)).select("key", "value").write.format("seglog").option(
                "topic", topic
            ).option("kafka.bootstrap.servers", servers).mode("append").save()

        def connector_write() -> None:
            topic = f"connector{next(counter)}"
            broker.store.create_topic(topic, partitions=2)
            spark.read.parquet(str(parquet_dir)).select("key", "value").write.format("kafka").option(
                "topic", topic
            ).option(SERVERS, servers).save()

        first = rounds(args.runs, {"path": seglog_read, "parquet": parquet_read})
        t_write = best_of(args.runs, seglog_write)
        # The broker holds the store's writer lock, so its figures come last. Beside it,
        # Kafka 3.9's own broker (ZooKeeper mode) with the same records, written there
        # by the connector's sink, partition for partition.
        with contextlib.ExitStack() as up:
            zookeeper = up.enter_context(ZooKeeper(root / "zookeeper"))
            kafka = up.enter_context(KafkaBroker(root / "kafka", zookeeper.connect_string, fast_start=False))
            kafka_servers = kafka.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": kafka_servers})
            admin.create_topics([NewTopic("bench", 2, 1)])["bench"].result()
            spark.read.parquet(str(parquet_dir)).select("key", "value", "partition").write.format(
                "kafka"
            ).option("topic", "bench").option(SERVERS, kafka_servers).save()
            broker = up.enter_context(seglog.Broker(store_path))
            servers = broker.bootstrap_servers
            second = rounds(
                args.runs,
                {
                    "broker": broker_read,
                    "connector": connector_read,
                    "kafka": kafka_read,
                    "parquet": parquet_read,
                },
            )
            t_broker_write = best_of(args.runs, broker_write)
            t_connector_write = best_of(args.runs, connector_write)
        t_seglog, t_broker, t_connector = min(first["path"]), min(second["broker"]), min(second["connector"])
        t_kafka = min(second["kafka"])
        t_parquet = min(first["parquet"] + second["parquet"])
        path_ratio = median_ratio(first["path"], first["parquet"])
        broker_ratio = median_ratio(second["broker"], second["parquet"])
        connector_ratio = median_ratio(second["connector"], second["parquet"])
        kafka_ratio = median_ratio(second["kafka"], second["parquet"])
        connector_over_kafka = median_ratio(second["connector"], second["kafka"])
        spark.stop()

    figures = {
        "records": n,
        "jvm_collectors": gc_names,
        "value_bytes": args.value_bytes,
        "seglog_read_s": round(t_seglog, 3),
        "seglog_read_rows_per_s": round(n / t_seglog),
        "parquet_read_s": round(t_parquet, 3),
        "parquet_read_rows_per_s": round(n / t_parquet),
        "seglog_over_parquet": round(t_parquet / t_seglog, 3),
        "seglog_over_parquet_median_round": round(path_ratio, 3),
        "broker_over_parquet_median_round": round(broker_ratio, 3),
        "connector_over_parquet_median_round": round(connector_ratio, 3),
        "rounds": {"path_and_parquet": first, "broker_connector_and_parquet": second},
        "broker_read_s": round(t_broker, 3),
        "broker_read_rows_per_s": round(n / t_broker),
        "broker_over_path": round(t_seglog / t_broker, 3),
        "broker_over_parquet": round(t_parquet / t_broker, 3),
        "connector_read_s": round(t_connector, 3),
        "connector_read_rows_per_s": round(n / t_connector),
        "connector_over_parquet": round(t_parquet / t_connector, 3),
        "kafka_read_s": round(t_kafka, 3),
        "kafka_read_rows_per_s": round(n / t_kafka),
        "kafka_over_parquet_median_round": round(kafka_ratio, 3),
        "connector_seglog_over_kafka_median_round": round(connector_over_kafka, 3),
        "seglog_write_s": round(t_write, 3),
        "seglog_write_rows_per_s": round(n / t_write),
        "broker_write_s": round(t_broker_write, 3),
        "broker_write_rows_per_s": round(n / t_broker_write),
        "connector_write_s": round(t_connector_write, 3),
        "connector_write_rows_per_s": round(n / t_connector_write),
    }
    best = f"best of {args.runs} rounds"
    print(f"Spark reads seglog, path  : {n / t_seglog:12,.0f} rows/s  ({t_seglog:.2f}s, {best})")
    print(f"Spark reads seglog, broker: {n / t_broker:12,.0f} rows/s  ({t_broker:.2f}s)")
    print(f"Spark's Kafka connector   : {n / t_connector:12,.0f} rows/s  ({t_connector:.2f}s, the broker)")
    print(f"  the same, Kafka 3.9      : {n / t_kafka:12,.0f} rows/s  ({t_kafka:.2f}s, Kafka's own broker)")
    print(f"Spark reads Parquet       : {n / t_parquet:12,.0f} rows/s  ({t_parquet:.2f}s)")
    print(
        f"path / Parquet            : {t_parquet / t_seglog:.2f}x the rows/s (best of each); "
        f"median of the rounds' ratios {path_ratio:.2f}x"
    )
    print(
        f"broker / Parquet          : {t_parquet / t_broker:.2f}x the rows/s (best of each); "
        f"median of the rounds' ratios {broker_ratio:.2f}x"
    )
    print(
        f"connector / Parquet       : {t_parquet / t_connector:.2f}x the rows/s (best of each); "
        f"median of the rounds' ratios {connector_ratio:.2f}x"
    )
    print(
        f"connector, seglog / Kafka : {t_kafka / t_connector:.2f}x the rows/s (best of each); "
        f"median of the rounds' ratios {connector_over_kafka:.2f}x; Kafka / Parquet {kafka_ratio:.2f}x"
    )
    print(f"broker / path             : {t_seglog / t_broker:.2f}x the rows/s")
    print(
        f"Spark writes seglog, path  : {n / t_write:12,.0f} rows/s  ({t_write:.2f}s, 2 tasks, "
        "acks=1 + fsync at close)"
    )
    print(
        f"Spark writes seglog, broker: {n / t_broker_write:12,.0f} rows/s  ({t_broker_write:.2f}s, 2 tasks, "
        "idempotent produce, acks=all)"
    )
    print(
        f"Spark's Kafka sink, broker : {n / t_connector_write:12,.0f} rows/s  ({t_connector_write:.2f}s, "
        "2 tasks, the connector's producer defaults)"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
