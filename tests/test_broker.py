"""The broker against Kafka's own clients (confluent-kafka, kafka-python 3.x, aiokafka):
what they send is stored as Kafka stores it, what they read is what was written, by them
or by the embedded API, and what they are told (offsets, times, errors) is Kafka's."""

from __future__ import annotations

import asyncio
import json
import re
import select
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    TopicPartition,
)
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

import seglog
from broker_helpers import (
    INVALID_TOPIC_EXCEPTION,
    UNKNOWN_TOPIC_OR_PARTITION,
    assert_serves,
    connect,
    consume_n,
    consumer,
    env,
    fetch_request_v4,
    frame,
    parse_fetch_v4,
    parse_produce_v3,
    produce_all,
    produce_request_v3,
    producer,
    record_batch,
    recv_response,
    serving,
    start_serve,
)

# Kafka's compression ids in a batch's attributes.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_600_000_000_000


def batches(raw: bytes) -> list[DefaultRecordBatch]:
    """RecordBatches parsed by kafka-python's own parser, each CRC-checked."""
    out = []
    for batch in MemoryRecords(raw):
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc(), f"bad CRC in the batch at offset {batch.base_offset}"
        out.append(batch)
    return out


def items(n: int, partition: int | None = 0) -> list[dict]:
    return [
        {
            "key": b"key-%d" % i,
            "value": b"value %d " % i * (i % 7 + 1),
            "headers": [("seq", b"%d" % i), ("dup", b"a"), ("dup", None)],
            "timestamp": T0 + i,
            **({} if partition is None else {"partition": partition}),
        }
        for i in range(n)
    ]


# ---------------------------------------------------------------- confluent-kafka


@pytest.mark.parametrize("codec", ["lz4", "zstd", "gzip", "snappy"])
def test_confluent_kafka_round_trip_with_each_codec(
    broker: seglog.Broker, store: seglog.Store, codec: str
) -> None:
    sent = items(300)
    p = producer(broker.bootstrap_servers, **{"compression.type": codec, "linger.ms": 20})
    reports = produce_all(p, "events", sent)  # the topic is created by Metadata
    assert [m.offset() for m in reports] == list(range(300))

    got = consume_n(broker.bootstrap_servers, "events", 0, 300)
    assert [m.offset() for m in got] == list(range(300))
    for item, m in zip(sent, got, strict=True):
        assert (m.key(), m.value()) == (item["key"], item["value"])
        assert m.headers() == [("seq", item["headers"][0][1]), ("dup", b"a"), ("dup", None)]
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, item["timestamp"])

    # Stored as the client compressed it: the batches kept, not re-encoded. librdkafka
    # silently sends uncompressed batches when it infers from ApiVersions that the broker
    # lacks the codec: zstd needs Produce v7 and Fetch v10, lz4 its LZ4 feature, which it
    # infers from FindCoordinator being advertised (rdkafka_feature.c).
    # It also sends a batch uncompressed when compressing would not shrink it, which
    # happens to a batch of a record or two cut off by linger.ms on a slow machine.
    on_disk = batches(store.read_raw("events", 0, 0, max_bytes=1 << 30))
    assert {b.compression_type for b in on_disk} <= {CODEC_IDS[codec], 0}
    compressed = [len(list(b)) for b in on_disk if b.compression_type == CODEC_IDS[codec]]
    plain = [len(list(b)) for b in on_disk if b.compression_type == 0]
    assert sum(compressed) >= 290, f"librdkafka did not compress: {compressed=} {plain=}"
    assert all(n <= 3 for n in plain), plain
    assert sum(compressed) + sum(plain) == 300


def test_confluent_murmur2_partitioner_agrees_with_seglog(broker: seglog.Broker, store: seglog.Store) -> None:
    n = 7
    store.create_topic("keyed", partitions=n)
    keys = [b"user-%d" % i for i in range(300)] + [b"", b"\x00\xff" * 9, "ключ".encode()]
    p = producer(broker.bootstrap_servers, partitioner="murmur2_random")
    reports = produce_all(p, "keyed", [{"key": k, "value": b"v" + k} for k in keys])
    for key, md in zip(keys, reports, strict=True):
        assert md.partition() == store.partition_for_key("keyed", key), key
        # Kafka's Utils.toPositive(murmur2(key)) % partitions, computed here too.
        assert md.partition() == (seglog.murmur2(key) & 0x7FFFFFFF) % n, key
        [record] = store.read("keyed", md.partition(), md.offset(), max_records=1)
        assert (record.key, record.value) == (key, b"v" + key)
    assert len({md.partition() for md in reports}) == n


# ---------------------------------------------------------------- kafka-python, aiokafka


def test_kafka_python_producer_and_consumer(broker: seglog.Broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    prod = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        acks="all",
        enable_idempotence=False,
        compression_type="gzip",
        linger_ms=5,
    )
    futures = [
        prod.send(
            "kp",
            key=b"k%d" % i,
            value=b"v%d" % i,
            headers=[("h", b"%d" % i)],
            partition=0,
            timestamp_ms=T0 + i,
        )
        for i in range(200)
    ]
    mds = [f.get(timeout=30) for f in futures]
    prod.close()
    assert [md.offset for md in mds] == list(range(200))

    cons = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False)
    try:
        tp = KTopicPartition("kp", 0)
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 200 and time.monotonic() < deadline:
            for records in cons.poll(timeout_ms=500).values():
                got.extend(records)
        assert [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type) for r in got] == [
            (i, b"k%d" % i, b"v%d" % i, T0 + i, 0) for i in range(200)
        ]
        assert [list(r.headers) for r in got[:2]] == [[("h", b"0")], [("h", b"1")]]
        assert cons.beginning_offsets([tp]) == {tp: 0}
        assert cons.end_offsets([tp]) == {tp: 200}
    finally:
        cons.close()


def test_aiokafka_producer_and_consumer(broker: seglog.Broker) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    async def main() -> list[tuple[int, bytes | None, bytes | None, int]]:
        prod = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, acks="all", compression_type="gzip"
        )
        await prod.start()
        try:
            futures = [
                await prod.send("aio", key=b"k%d" % i, value=b"v%d" % i, partition=0, timestamp_ms=T0 + i)
                for i in range(100)
            ]
            mds = await asyncio.gather(*futures)
        finally:
            await prod.stop()
        assert [md.offset for md in mds] == list(range(100))
        cons = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False
        )
        await cons.start()
        try:
            tp = ATopicPartition("aio", 0)
            cons.assign([tp])
            cons.seek(tp, 0)  # an explicit offset: Fetch alone (ListOffsets is tested below)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 100 and time.monotonic() < deadline:
                for records in (await cons.getmany(timeout_ms=500)).values():
                    got.extend((r.offset, r.key, r.value, r.timestamp) for r in records)
            return got
        finally:
            await cons.stop()

    got = asyncio.run(asyncio.wait_for(main(), 90))
    assert got == [(i, b"k%d" % i, b"v%d" % i, T0 + i) for i in range(100)]


def test_aiokafka_list_offsets(broker: seglog.Broker, store: seglog.Store) -> None:
    # aiokafka 0.14 sends ListOffsets v3 (and kafka-python 2.x v1-v3): below v4 a
    # response has no leader epoch field.
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    store.append("aiolo", 0, [(None, b"%d" % i) for i in range(5)])
    store.delete_records("aiolo", 0, 2)

    async def main() -> tuple[dict, dict, bytes | None]:
        cons = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers, group_id=None, enable_auto_commit=False
        )
        await cons.start()
        try:
            tp = ATopicPartition("aiolo", 0)
            cons.assign([tp])
            begin = await asyncio.wait_for(cons.beginning_offsets([tp]), 5)
            end = await asyncio.wait_for(cons.end_offsets([tp]), 5)
            await cons.seek_to_beginning(tp)
            first = await asyncio.wait_for(cons.getone(), 5)
            return begin, end, first.value
        finally:
            await cons.stop()

    begin, end, first = asyncio.run(main())
    assert ({tp.partition: o for tp, o in begin.items()}, {tp.partition: o for tp, o in end.items()}) == (
        {0: 2},
        {0: 5},
    )
    assert first == b"2"


# ---------------------------------------------------------------- ListOffsets


def test_offsets_for_times_and_watermarks(broker: seglog.Broker, store: seglog.Store) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    store.create_topic("times", partitions=1)
    sent = [{"value": b"%d" % i, "timestamp": T0 + 1000 * i, "partition": 0} for i in range(10)]
    produce_all(producer(broker.bootstrap_servers), "times", sent)

    c = consumer(broker.bootstrap_servers)
    try:
        asked = [T0 - 5, T0 + 3500, T0 + 9000, T0 + 99_000]
        found = [c.offsets_for_times([TopicPartition("times", 0, t)], timeout=10)[0].offset for t in asked]
        assert found == [0, 4, 9, -1]  # -1: no record that late
        assert c.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (0, 10)
        store.delete_records("times", 0, 3)
        assert c.get_watermark_offsets(TopicPartition("times", 0), timeout=10) == (3, 10)
    finally:
        c.close()

    k = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=None)
    try:
        tp = KTopicPartition("times", 0)
        got = k.offsets_for_times({tp: T0 + 3500})[tp]
        assert (got.offset, got.timestamp) == (4, T0 + 4000)
        assert k.offsets_for_times({tp: T0 + 99_000})[tp] is None
        assert (k.beginning_offsets([tp]), k.end_offsets([tp])) == ({tp: 3}, {tp: 10})
    finally:
        k.close()


# ---------------------------------------------------------------- the broker and the embedded API


READER = """
import json, sys, seglog
with seglog.open(sys.argv[1], read_only=True) as s:
    recs = s.read("shared", 0, 0, max_bytes=1 << 30)
    rows = [[r.offset, r.key.hex(), r.value.hex(), r.timestamp, [[k, (v or b"").hex()] for k, v in r.headers]]
            for r in recs]
    print(json.dumps(rows))
"""


def test_records_produced_over_the_network_are_read_by_the_embedded_store_and_kafka_python(
    broker: seglog.Broker, store: seglog.Store, store_path: Path
) -> None:
    sent = items(120)
    produce_all(producer(broker.bootstrap_servers, **{"compression.type": "lz4"}), "shared", sent)
    expected = [
        [i, it["key"].hex(), it["value"].hex(), it["timestamp"], [["seq", b"%d" % i], ["dup", b"a"]]]
        for i, it in enumerate(sent)
    ]

    # Another process, read-only, while the broker holds the store. (A None header
    # value comes out as "": it is compared in-process below.)
    r = subprocess.run(
        [sys.executable, "-c", READER, str(store_path)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [row[:4] for row in got] == [row[:4] for row in expected]
    assert [row[4] for row in got] == [
        [["seq", (b"%d" % i).hex()], ["dup", b"a".hex()], ["dup", ""]] for i in range(120)
    ]

    # The same store in this process.
    recs = store.read("shared", 0, 0, max_bytes=1 << 30)
    assert [r.headers for r in recs[:1]] == [(("seq", b"0"), ("dup", b"a"), ("dup", None))]

    # The segment file itself, parsed by kafka-python's own batch parser.
    [log] = sorted((store_path / "shared-0").glob("*.log"))
    parsed = [rec for batch in batches(log.read_bytes()) for rec in batch]
    assert [(r.offset, r.key, r.value, r.timestamp) for r in parsed] == [
        (i, it["key"], it["value"], it["timestamp"]) for i, it in enumerate(sent)
    ]
    assert [h for h in parsed[5].headers] == [("seq", b"5"), ("dup", b"a"), ("dup", None)]


def test_records_from_the_embedded_producer_are_consumed_by_confluent_kafka(
    broker: seglog.Broker, store: seglog.Store
) -> None:
    store.create_topic("embedded", partitions=2)
    with seglog.Producer(store, linger_ms=0) as p:
        futures = [
            p.send(
                "embedded",
                value=b"v%d" % i,
                key=b"k%d" % i,
                headers=[("n", b"%d" % i)],
                partition=1,
                timestamp=T0 + i,
            )
            for i in range(50)
        ]
        p.flush()
        assert [f.get().offset for f in futures] == list(range(50))
    store.append("embedded", 1, [(b"raw", b"appended")], compression_type="zstd")

    got = consume_n(broker.bootstrap_servers, "embedded", 1, 51)
    assert [(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()) for m in got[:50]] == [
        (i, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)], (TIMESTAMP_CREATE_TIME, T0 + i)) for i in range(50)
    ]
    assert (got[50].key(), got[50].value()) == (b"raw", b"appended")


def test_log_append_time_topics_give_the_broker_s_time(broker: seglog.Broker, store: seglog.Store) -> None:
    store.create_topic("lat", partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    [md] = produce_all(
        producer(broker.bootstrap_servers), "lat", [{"value": b"x", "timestamp": 5, "partition": 0}]
    )
    after = int(time.time() * 1000)
    kind, ts = md.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME and before <= ts <= after, (md.timestamp(), before, after)
    [m] = consume_n(broker.bootstrap_servers, "lat", 0, 1)
    assert m.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, ts)
    [r] = store.read("lat", 0, 0)
    assert (r.timestamp_type, r.timestamp) == (1, ts)


# ---------------------------------------------------------------- errors with Kafka's codes


def test_a_record_over_max_message_bytes_is_refused_with_message_too_large(
    broker: seglog.Broker, store: seglog.Store
) -> None:
    from kafka import KafkaProducer
    from kafka.errors import MessageSizeTooLargeError

    store.create_topic("small", partitions=1, config={"max.message.bytes": 1000})
    p = producer(broker.bootstrap_servers, retries=0)
    errors: list[KafkaError] = []
    p.produce("small", value=b"x" * 5000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert not errors[0].retriable()
    produce_all(p, "small", [{"value": b"fits", "partition": 0}])

    kp = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, acks="all", enable_idempotence=False, retries=0
    )
    try:
        with pytest.raises(MessageSizeTooLargeError):
            kp.send("small", value=b"y" * 5000, partition=0).get(timeout=30)
    finally:
        kp.close()
    assert [r.value for r in store.read("small", 0, 0)] == [b"fits"]


def test_produce_to_an_unknown_partition_or_an_internal_topic_is_refused(
    broker: seglog.Broker, store: seglog.Store
) -> None:
    store.create_topic("one", partitions=1)
    batch = record_batch([b"a", b"b"])

    def produce(s, corr: int, topic: str, partition: int) -> tuple[int, int]:
        s.sendall(frame(0, 3, corr, produce_request_v3(topic, partition, batch)))
        got_corr, body = recv_response(s)
        assert got_corr == corr
        [(name, p, err, base, _)] = parse_produce_v3(body)
        assert (name, p) == (topic, partition)
        return err, base

    with connect(broker.port) as s:
        assert produce(s, 1, "one", 7) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        assert produce(s, 2, "one", -1) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        assert produce(s, 3, "nowhere", 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1), "Produce never creates topics"
        assert produce(s, 4, "one", 0) == (0, 0)
        # Refused before it exists (Kafka checks internal topics first and answers 17 there
        # too; 3 would still refuse it) and once seglog's group coordinator has made it.
        assert produce(s, 5, "__consumer_offsets", 0) in [
            (INVALID_TOPIC_EXCEPTION, -1),
            (UNKNOWN_TOPIC_OR_PARTITION, -1),
        ]
        with seglog.Consumer(store, group_id="g") as c:
            c.commit({("one", 0): 1})
        assert "__consumer_offsets" in store.topics()
        end = store.offsets("__consumer_offsets", 0)[1]
        assert produce(s, 6, "__consumer_offsets", 0) == (INVALID_TOPIC_EXCEPTION, -1)
        assert store.offsets("__consumer_offsets", 0)[1] == end
    assert "nowhere" not in store.topics()
    assert store.offsets("one", 0) == (0, 2)

    # What confluent-kafka reports: the partition count from Metadata, and the
    # internal topic's error from Metadata (it is never auto-created for a producer).
    p = producer(broker.bootstrap_servers, **{"message.timeout.ms": 10000})
    errors: list[KafkaError] = []
    p.produce("one", value=b"x", partition=7, on_delivery=lambda err, msg: errors.append(err))
    p.produce("__consumer_offsets", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert sorted(e.code() for e in errors) == sorted(
        [KafkaError._UNKNOWN_PARTITION, KafkaError.TOPIC_EXCEPTION]
    )
    assert store.offsets("one", 0) == (0, 2)


# ---------------------------------------------------------------- long poll


def test_a_long_polling_consumer_gets_a_record_as_soon_as_it_is_produced(store: seglog.Store) -> None:
    store.create_topic("lp", partitions=1)
    broker = seglog.Broker(store)
    c = consumer(broker.bootstrap_servers, **{"fetch.wait.max.ms": 60_000})
    try:
        c.assign([TopicPartition("lp", 0, OFFSET_BEGINNING)])
        assert c.poll(1.0) is None
        threading.Timer(0.3, lambda: store.append("lp", 0, [b"late"])).start()
        msg = None
        deadline = time.monotonic() + 30
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None and msg.value() == b"late"
    finally:
        c.close()
        # The consumer's next long poll is still waiting in the broker: do not wait it out.
        broker.close(timeout=0.5)


def test_fetch_waits_for_min_bytes_and_answers_when_they_arrive(
    broker: seglog.Broker, store: seglog.Store
) -> None:
    store.create_topic("mb", partitions=1)
    store.append("mb", 0, [b"small"])
    with connect(broker.port, timeout=30) as s:
        # 20 kB wanted, 60 s allowed: a broker ignoring min_bytes answers at once with the small record.
        s.sendall(frame(1, 4, 1, fetch_request_v4("mb", 0, 0, max_wait_ms=60_000, min_bytes=20_000)))
        readable, _, _ = select.select([s], [], [], 1.0)
        assert not readable, "answered before min_bytes were there"
        store.append("mb", 0, [b"x" * 30_000])
        corr, body = recv_response(s)  # an answer long before max_wait_ms, or the socket times out
        assert corr == 1
        [(_, _, err, hw, records)] = parse_fetch_v4(body)
        assert (err, hw) == (0, 2) and len(records) >= 20_000
        assert [len(list(b)) for b in batches(records)] == [1, 1]

        # Data already there is answered at once, whatever max_wait_ms says.
        s.sendall(frame(1, 4, 2, fetch_request_v4("mb", 0, 1, max_wait_ms=60_000, min_bytes=1)))
        assert recv_response(s)[0] == 2


# ---------------------------------------------------------------- zero copy and metrics


@pytest.mark.parametrize("sendfile", [True, False])
def test_fetch_bytes_go_out_with_sendfile_or_through_a_copy(store: seglog.Store, sendfile: bool) -> None:
    store.create_topic("zc", partitions=1)
    for i in range(20):
        store.append("zc", 0, [b"%d-" % i + b"z" * 1000] * 50)
    record_bytes = len(store.read_raw("zc", 0, 0, max_bytes=1 << 30))
    with seglog.Broker(store, socket_sendfile_enable=sendfile) as broker:
        before = broker.stats()
        got = consume_n(broker.bootstrap_servers, "zc", 0, 1000)
        assert got[-1].value() == b"19-" + b"z" * 1000
        after = broker.stats()
    sent = after["fetch_sendfile_bytes"] - before["fetch_sendfile_bytes"]
    copied = after["fetch_copied_bytes"] - before["fetch_copied_bytes"]
    if sendfile:
        assert sent >= record_bytes and copied == 0, after
    else:
        assert copied >= record_bytes and sent == 0, after
    assert after["bytes_out"] - before["bytes_out"] >= record_bytes


@pytest.mark.parametrize("sendfile", ["true", "false"])
def test_bytes_served_do_not_stay_in_the_brokers_resident_memory(tmp_path: Path, sendfile: str) -> None:
    """Fetch finds the batches it sends through the segment's memory map, which
    touches every page of small batches; those pages are let go once sent, so a
    broker that has served 64 MiB keeps far less than that mapped (its RssFile)."""
    path = tmp_path / "store"
    value = b"r" * 1000
    with seglog.open(path) as store:
        store.create_topic("rss", partitions=1)
        for _ in range(16 * 1024):  # 4 KiB batches: a batch header on every page
            store.append("rss", 0, [value] * 4)
    with serving(path, "--config", f"socket.sendfile.enable={sendfile}") as served:
        before = served.rss_kib("RssFile")
        c = consumer(served.bootstrap, **{"fetch.max.bytes": 4 << 20})
        try:
            c.assign([TopicPartition("rss", 0, OFFSET_BEGINNING)])
            seen = 0
            deadline = time.monotonic() + 120
            while seen < 64 * 1024:
                assert time.monotonic() < deadline, seen
                for m in c.consume(10_000, timeout=1):
                    assert m.error() is None, m.error()
                    seen += 1
        finally:
            c.close()
        grown = served.rss_kib("RssFile") - before
    assert seen == 64 * 1024
    assert grown < 16 * 1024, f"{grown} KiB of the 64 MiB served stayed mapped"


def test_a_consumer_tailing_the_log_leaves_no_pages_resident(tmp_path: Path) -> None:
    """A consumer (or a follower) at the log end fetches one batch at a time, and each
    fetch's lookup walks from the index entry of the batch before (Kafka's index names a
    batch by its last offset): the pages a fetch released must not be mapped again for
    good by the next one's walk. After 32 MiB produced in 64 KiB batches, each read as it
    came, the broker keeps far less than that mapped."""
    batches, per, value = 512, 64, b"t" * 1000
    with serving(tmp_path / "store") as served:
        p = producer(served.bootstrap, **{"linger.ms": 1000, "batch.size": 1 << 20, "acks": 1})
        produce_all(p, "tail", [{"value": value, "partition": 0}])
        before = served.rss_kib("RssFile")
        c = consumer(served.bootstrap, **{"fetch.wait.max.ms": 5})
        seen = 0
        try:
            c.assign([TopicPartition("tail", 0, OFFSET_BEGINNING)])
            for _ in range(batches):
                produce_all(p, "tail", [{"value": value, "partition": 0}] * per)  # one batch
                deadline = time.monotonic() + 30
                while seen < 1 + (_ + 1) * per:
                    assert time.monotonic() < deadline, seen
                    for m in c.consume(per, timeout=1):
                        assert m.error() is None, m.error()
                        seen += 1
        finally:
            c.close()
        grown = served.rss_kib("RssFile") - before
    assert seen == 1 + batches * per
    assert grown < 8 * 1024, f"{grown} KiB of the 32 MiB served at the log end stayed mapped"


def test_prometheus_metrics_over_http(store: seglog.Store) -> None:
    with seglog.Broker(store, metrics="127.0.0.1:0") as broker:
        assert broker.metrics_address is not None
        produce_all(
            producer(broker.bootstrap_servers), "m", [{"value": b"%d" % i, "partition": 0} for i in range(7)]
        )
        consume_n(broker.bootstrap_servers, "m", 0, 7)
        with urllib.request.urlopen(f"http://{broker.metrics_address}/metrics", timeout=10) as resp:
            assert resp.status == 200
            text = resp.read().decode()
        stats = broker.stats()

    def value(pattern: str) -> float:
        m = re.search(rf"^{pattern} (\S+)$", text, re.MULTILINE)
        assert m, f"no {pattern} in:\n{text}"
        return float(m.group(1))

    for api in ("ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets"):
        assert value(rf'seglog_requests_total\{{request="{api}"\}}') >= 1, api
    assert value(r'seglog_log_end_offset\{topic="m",partition="0"\}') == 7
    assert value("seglog_messages_in_total") == 7 == stats["messages_in"]
    assert value("seglog_fetch_sendfile_bytes_total") > 0
    assert "seglog_request_latency_seconds_bucket" in text


# ---------------------------------------------------------------- seglog serve


LISTENING = re.compile(r"^seglog: broker (\d+) listening on 127\.0\.0\.1:(\d+)$")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_seglog_serve_prints_its_address_serves_clients_and_stops_cleanly(store_path: Path, sig: int) -> None:
    served = start_serve(store_path, "--node-id", "3", "--config", "flush.messages=1")
    try:
        m = LISTENING.match(served.line)
        assert m and m.group(1) == "3" and int(m.group(2)) == served.port != 0, served.line
        assert_serves(served.bootstrap, "served")
        # An in-flight long poll is finished and answered, not cut off, by the stop.
        with connect(served.port, timeout=30) as s:
            s.sendall(frame(1, 4, 77, fetch_request_v4("served", 0, 1, max_wait_ms=1500)))
            time.sleep(0.3)
            served.proc.send_signal(sig)
            corr, body = recv_response(s)
            assert corr == 77 and parse_fetch_v4(body)[0][2:4] == (0, 1)
        assert served.stop(sig) == 0, "".join(served.stderr)
    finally:
        if served.proc.poll() is None:
            served.stop(signal.SIGKILL)
    assert served.rest == "", "exactly one stdout line"
    assert not any("Traceback" in line for line in served.stderr), "".join(served.stderr)
    with seglog.open(store_path) as store:
        assert store.clean_shutdown
        assert store.offsets("served", 0) == (0, 1)


def test_seglog_serve_refuses_a_bad_flag_a_bad_key_and_a_locked_store(store_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "seglog",
                "serve",
                "--store",
                str(store_path),
                "--listen",
                "127.0.0.1:0",
                *args,
            ],
            capture_output=True,
            text=True,
            env=env(),
            timeout=60,
        )

    def fails(*args: str) -> str:
        r = run(*args)
        assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        lines = [line for line in r.stderr.splitlines() if line.startswith("seglog: error:")]
        assert len(lines) == 1, r.stderr
        return lines[0]

    def usage(*args: str) -> None:
        r = run(*args)
        assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
        assert "usage: seglog" in r.stderr and "error:" in r.stderr and "Traceback" not in r.stderr, r.stderr

    usage("--bogus")  # usage errors: argparse's message, exit status 2
    usage("--config", "no-equals-sign")
    usage("--node-id", "x")
    assert "socket.request.max.bytes" in fails("--config", "socket.request.max.bytes=lots")
    with seglog.open(store_path):
        assert "lock" in fails().lower()
    with serving(store_path) as served:
        assert "lock" in fails().lower(), "a second broker on the same store"
        assert_serves(served.bootstrap)
