"""A streaming pipeline on an embedded seglog store, with Spark Structured Streaming.

1. A producer writes page-view events (key: the user, value: JSON) to the topic
   ``page-views``, in waves, as a web tier would.
2. A Spark query reads the topic as it grows (``format("seglog")``, the options of
   Spark's Kafka source), counts views per page per minute of event time (a
   one-minute watermark closes each window), and writes one record per closed
   window to the topic ``views-per-minute`` (the seglog sink).
3. The results are read back with seglog's Consumer and printed, with throughput.

    python examples/pipeline.py [--events N] [--waves W] [--store DIR] [--via path|kafka]

The producer and Spark's write tasks share the store's single writer: the
producer holds the writer lock only while it writes a wave, and the sink's tasks
wait for it (writeLockTimeoutMs) and take it in turn.

``--via kafka`` runs the same job as it runs against Kafka: a seglog.Broker serves
the store, the producer sends to it over the network, and the query reads and
writes with Spark's own Kafka connector (``format("kafka")`` with
``kafka.bootstrap.servers``; its jars on the session's classpath, as `make java`
resolves them into java/target/). Only the format name and that option differ.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Spark's workers run this Python
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

import seglog
from seglog.spark import local_session

EVENTS, RESULTS = "page-views", "views-per-minute"
PAGES = ["/", "/search", "/cart", "/checkout", "/help"] + [f"/products/{i}" for i in range(15)]
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the simulated clock
WAVE_MS = 30_000  # each wave covers 30 s of event time
TICK = "__tick__"  # a last event past the watermark, so that the last windows close


@dataclass
class Via:
    """Where Spark finds the topics: the store's directory (format "seglog"), or a
    broker's address (format "kafka", Spark's own connector)."""

    store: Path
    servers: str | None = None

    @property
    def format(self) -> str:
        return "seglog" if self.servers is None else "kafka"

    @property
    def options(self) -> dict[str, str]:
        return {} if self.servers is None else {"kafka.bootstrap.servers": self.servers}

    @property
    def path(self) -> tuple[str, ...]:
        """The argument of load() and start(): the store, or none for a broker."""
        return (str(self.store),) if self.servers is None else ()


def connector_jars() -> list[str]:
    """Spark's Kafka connector for this PySpark, as `make java` resolves it."""
    import pyspark

    listed = (
        Path(__file__).resolve().parent.parent
        / f"java/target/spark-kafka-{pyspark.__version__}/classpath.txt"
    )
    if not listed.is_file():
        sys.exit(f"{listed} is missing: `make run RUN_ARGS='--via kafka'` resolves Spark's Kafka connector")
    return listed.read_text().strip().split(":")


def start_query(spark: SparkSession, via: Via, checkpoint: Path) -> StreamingQuery:
    views = (
        spark.readStream.format(via.format)
        .options(**via.options)
        .option("subscribe", EVENTS)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50000")
        .load(*via.path)
        .select(F.from_json(F.col("value").cast("string"), "user string, page string, ts long").alias("e"))
        .select("e.page", F.timestamp_millis("e.ts").alias("event_time"))
        .withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute").alias("w"), "page")
        .count()
    )  # (the tick's own window never closes, so it is never written: no filter needed)
    out = views.select(
        F.concat_ws(" ", F.date_format("w.start", "HH:mm"), "page").alias("key"),
        F.to_json(
            F.struct(F.date_format("w.start", "HH:mm").alias("minute"), "page", F.col("count").alias("views"))
        ).alias("value"),
    )
    return (
        out.writeStream.format(via.format)
        .options(**via.options)
        .option("topic", RESULTS)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(processingTime="1 second")
        .start(*via.path)
    )


@contextlib.contextmanager
def wave_producer(via: Via) -> Iterator[seglog.Producer]:
    """A producer for one wave: on the store, holding its writer lock until the
    wave is written; or sending to the broker."""
    if via.servers is not None:
        with seglog.Producer(bootstrap_servers=via.servers, acks="all") as producer:
            yield producer
    else:
        with seglog.open(via.store) as s, seglog.Producer(s, acks="all") as producer:
            yield producer


def produce(via: Via, waves: int, per_wave: int) -> tuple[int, float]:
    """Writes the events wave by wave (on the store, each under the writer lock
    for as long as it takes to append it); returns (events, seconds spent producing)."""
    rng = random.Random(7)
    weights = [1 / (i + 1) for i in range(len(PAGES))]  # a few pages get most views
    total, busy = 0, 0.0
    for w in range(waves):
        pages = rng.choices(PAGES, weights, k=per_wave)
        users = [rng.randrange(5000) for _ in range(per_wave)]
        base = START_MS + w * WAVE_MS
        t = time.perf_counter()
        keys = [b"user-%d" % u for u in users]
        values = [
            b'{"user":"user-%d","page":"%s","ts":%d}' % (u, p.encode(), base + rng.randrange(WAVE_MS))
            for u, p in zip(users, pages, strict=True)
        ]
        with wave_producer(via) as producer:
            producer.send_batch(EVENTS, values, keys=keys)
            if w == waves - 1:  # moves the watermark past every window
                tick = b'{"user":"-","page":"%s","ts":%d}' % (TICK.encode(), base + 10 * WAVE_MS)
                producer.send_batch(EVENTS, [tick], keys=[b"-"])
        busy += time.perf_counter() - t
        total += per_wave
        print(f"  wave {w + 1:2}/{waves}: {per_wave:,} events", flush=True)
        time.sleep(1.0)
    return total, busy


def read_results(store: Path | seglog.Store) -> dict[tuple[str, str], int]:
    """The results topic through seglog's Consumer (read-only: Spark may be
    writing), or through the Store a broker serves in this process."""
    out: dict[tuple[str, str], int] = {}
    read_only = {"read_only": True} if isinstance(store, Path) else {}
    with seglog.Consumer(
        store,
        RESULTS,
        auto_offset_reset="earliest",
        consumer_timeout_ms=0,
        enable_auto_commit=False,
        **read_only,
    ) as consumer:
        for record in consumer:
            assert record.value is not None
            row = json.loads(record.value)
            out[(row["minute"], row["page"])] = row["views"]  # the last per key wins, as on a compacted topic
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--waves", type=int, default=12)
    ap.add_argument("--store", type=Path, help="store directory (default: a temporary one)")
    ap.add_argument(
        "--via",
        choices=("path", "kafka"),
        default="path",
        help="path: format('seglog') on the store; kafka: Spark's Kafka connector through a seglog.Broker",
    )
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store = args.store or tmp / "store"
        with seglog.open(store) as s:
            for topic, partitions in ((EVENTS, 3), (RESULTS, 1)):
                if topic not in s.topics():
                    s.create_topic(topic, partitions)

        t0 = time.perf_counter()
        spark = local_session("seglog-pipeline", jars=connector_jars() if args.via == "kafka" else ())
        print(f"Spark session up in {time.perf_counter() - t0:.1f}s", flush=True)
        with contextlib.ExitStack() as stack:
            via, results_of = Via(store), store
            if args.via == "kafka":
                broker = stack.enter_context(seglog.Broker(store))
                via, results_of = Via(store, broker.bootstrap_servers), broker.store
                print(f"through a seglog broker at {broker.bootstrap_servers} with Spark's Kafka connector")
            query = start_query(spark, via, tmp / "checkpoint")

            print(f"producing {args.events:,} page views to {EVENTS!r} in {args.waves} waves", flush=True)
            t1 = time.perf_counter()
            produced, busy = produce(via, args.waves, args.events // args.waves)

            # Wait until every closed window is in the results topic.
            deadline = time.monotonic() + 120
            results = read_results(results_of)
            while sum(results.values()) < produced and time.monotonic() < deadline:
                query.processAllAvailable()
                time.sleep(0.5)
                results = read_results(results_of)
            t2 = time.perf_counter()
            progress = [p for p in query.recentProgress if p["numInputRows"]]
            query.stop()
        spark.stop()

    minutes: dict[str, dict[str, int]] = defaultdict(dict)
    for (minute, page), views in results.items():
        minutes[minute][page] = views
    print(f"\nviews per page per minute, read back from {RESULTS!r} with seglog.Consumer:")
    print(f"{'minute':>6}  {'views':>7}  top pages")
    for minute in sorted(minutes):
        pages = sorted(minutes[minute].items(), key=lambda kv: -kv[1])
        top = "  ".join(f"{p} {v:,}" for p, v in pages[:4])
        print(f"{minute:>6}  {sum(minutes[minute].values()):>7,}  {top}")

    counted = sum(results.values())
    rows = sum(p["numInputRows"] for p in progress)
    spark_s = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
    print(
        f"\nproduced  {produced:,} events in {busy:.2f}s of writing: "
        f"{produced / busy:,.0f} events/s (acks=all)"
    )
    print(
        f"Spark     {rows:,} rows in {len(progress)} micro-batches, {spark_s:.1f}s of batch time: "
        f"{rows / spark_s:,.0f} rows/s"
    )
    if len(progress) > 1:  # the first batch also starts Spark's Python workers
        later = progress[1:]
        rows2 = sum(p["numInputRows"] for p in later)
        s2 = sum(p["durationMs"]["triggerExecution"] for p in later) / 1000
        print(f"          after the first micro-batch: {rows2:,} rows in {s2:.1f}s: {rows2 / s2:,.0f} rows/s")
    print(f"end to end {t2 - t1:.1f}s from the first event to the last window in {RESULTS!r}")
    if counted != produced:
        sys.exit(f"MISMATCH: the windows count {counted:,} views, {produced:,} were produced")
    print(f"OK: {len(results)} (minute, page) windows count all {counted:,} views")


if __name__ == "__main__":
    main()
