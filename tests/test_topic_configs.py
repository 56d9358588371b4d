"""Kafka 3.9's whole topic configuration: every key it takes, with its type, default,
broker synonym and source, set through CreateTopics and IncrementalAlterConfigs and read
back with DescribeConfigs; compared key by key with a Kafka 3.9 broker, refusals and
their messages included; and the keys that change how the log behaves, shown doing so."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

import seglog
from java_helpers import tool
from kafka_reference import REFERENCE_VERSION, KafkaBroker
from seglog.testing import ZooKeeper

#: Settings that differ from every default, one per key where Kafka takes one.
SETTINGS = {
    "cleanup.policy": "compact,delete",
    "compression.gzip.level": "5",
    "compression.lz4.level": "12",
    "compression.type": "zstd",
    "compression.zstd.level": "7",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "2000",
    "flush.messages": "100000",
    "flush.ms": "3000",
    "follower.replication.throttled.replicas": "0:0",
    "index.interval.bytes": "8192",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "max.compaction.lag.ms": "600000",
    "max.message.bytes": "2000000",
    "message.downconversion.enable": "false",
    "message.format.version": "2.8",
    "message.timestamp.after.max.ms": "4000",
    "message.timestamp.before.max.ms": "5000",
    "message.timestamp.difference.max.ms": "6000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "7000",
    "min.insync.replicas": "1",
    "preallocate": "true",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "retention.bytes": "100000000",
    "retention.ms": "8000000",
    "segment.bytes": "50000000",
    "segment.index.bytes": "1000000",
    "segment.jitter.ms": "9000",
    "segment.ms": "10000000",
    "unclean.leader.election.enable": "true",
}

#: Values Kafka refuses, each with why.
REFUSED = [
    ("compression.type", "brotli"),
    ("message.format.version", "0.7"),
    ("remote.storage.enable", "true"),
    ("remote.log.copy.disable", "true"),
    ("remote.log.delete.on.disable", "true"),
    ("local.retention.ms", "-3"),
    ("min.compaction.lag.ms", "-1"),
    ("max.compaction.lag.ms", "0"),
    ("segment.jitter.ms", "-1"),
    ("preallocate", "maybe"),
    ("compression.gzip.level", "10"),
    ("compression.zstd.level", "23"),
    ("compression.lz4.level", "18"),
    ("message.downconversion.enable", "x"),
    ("message.timestamp.difference.max.ms", "-1"),
    ("retention.ms", "-2"),
    ("segment.ms", "0"),
    ("min.cleanable.dirty.ratio", "2"),
    ("max.message.bytes", "abc"),
    ("nonsense.key", "1"),
]


def described(admin: AdminClient, topic: str) -> dict[str, tuple[object, ...]]:
    [future] = admin.describe_configs([ConfigResource("TOPIC", topic)]).values()
    return {
        name: (e.value, e.source, e.is_read_only, [(s.name, s.value, s.source) for s in e.synonyms.values()])
        for name, e in future.result().items()
    }


def session(bootstrap: str) -> dict[str, object]:
    """What a tool sees of the configuration: the defaults, every key set at creation,
    every key set again one by one with IncrementalAlterConfigs, and the refusals."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("plain", 1, 1)])["plain"].result(30)
    admin.create_topics([NewTopic("set", 1, 1, config=SETTINGS)])["set"].result(30)
    admin.create_topics([NewTopic("altered", 1, 1)])["altered"].result(30)
    for key, value in SETTINGS.items():
        op = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
        res = ConfigResource("TOPIC", "altered", incremental_configs=[op])
        [f] = admin.incremental_alter_configs([res]).values()
        f.result(30)
    refusals = {}
    for key, value in REFUSED:
        [f] = admin.create_topics([NewTopic("x", 1, 1, config={key: value})], validate_only=True).values()
        try:
            f.result(30)
            refusals[f"{key}={value}"] = "accepted"
        except KafkaException as e:
            err = e.args[0]
            refusals[f"{key}={value}"] = f"{err.name()}: {err.str()}"
    return {
        "plain": described(admin, "plain"),
        "set": described(admin, "set"),
        "altered": described(admin, "altered"),
        "refused": refusals,
    }


@pytest.mark.java
def test_topic_configuration_as_kafka_describes_and_refuses_it(zookeeper: ZooKeeper, tmp_path: Path) -> None:
    """Every key of a topic, default and set (at creation and with
    IncrementalAlterConfigs), described with the same value, source, read-only flag
    and synonyms as by a Kafka 3.9 broker; the same values refused, with the same
    error and message."""
    with KafkaBroker(tmp_path / "kafka", zookeeper.connect_string) as kafka:
        expected = session(kafka.bootstrap_servers)
    with seglog.Broker(tmp_path / "store") as broker:
        got = session(broker.bootstrap_servers)
    for what in ("plain", "set", "altered"):
        assert sorted(got[what]) == sorted(expected[what]), what
        for key in expected[what]:
            assert (what, key, got[what][key]) == (what, key, expected[what][key])
    assert len(expected["plain"]) == 36
    for attempt, outcome in expected["refused"].items():
        assert (attempt, got["refused"][attempt]) == (attempt, outcome)


def codecs_of(store_path: Path, topic: str) -> set[int]:
    """The codec id of every batch of ``topic``-0, read from its segment files."""
    codecs = set()
    for segment in sorted((store_path / f"{topic}-0").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.add(attributes & 0x07)
            pos += 12 + length
    return codecs


def test_compression_type_stores_the_topics_codec(tmp_path: Path) -> None:
    """A topic with compression.type=zstd stores zstd batches from an uncompressed
    producer (and from a gzip one), which consumers read back as sent, and
    kafka-dump-log reads as zstd; `producer` keeps each batch's own codec."""
    store_path = tmp_path / "store"
    with seglog.Broker(store_path) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for topic, codec in (("z", "zstd"), ("p", "producer")):
            admin.create_topics([NewTopic(topic, 1, 1, config={"compression.type": codec})])[topic].result(30)
        for codec in ("none", "gzip"):
            p = Producer({"bootstrap.servers": broker.bootstrap_servers, "compression.type": codec})
            for topic in ("z", "p"):
                for i in range(50):
                    p.produce(topic, b"%s-%d" % (codec.encode(), i) * 20, key=b"k%d" % i, partition=0)
            assert p.flush(30) == 0
        assert codecs_of(store_path, "z") == {4}
        assert codecs_of(store_path, "p") == {0, 1}
        sent = [b"%s-%d" % (c.encode(), i) * 20 for c in ("none", "gzip") for i in range(50)]
        for topic in ("z", "p"):
            assert [r.value for r in broker.store.read(topic, 0, 0, max_records=1000)] == sent
        # librdkafka decodes the zstd batches the broker made.
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"})
        c.assign([TopicPartition("z", 0, 0)])
        read: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(read) < len(sent) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                read.append(m.value())
        c.close()
        assert read == sent
    [segment] = sorted((store_path / "z-0").glob("*.log"))
    dumped = tool(REFERENCE_VERSION, "kafka-dump-log", "--files", str(segment)).stdout
    assert dumped.count("compresscodec: zstd") >= 2, dumped
    assert "compresscodec: none" not in dumped and "compresscodec: gzip" not in dumped


def test_a_single_broker_refuses_acks_all_below_min_insync_replicas(tmp_path: Path) -> None:
    """min.insync.replicas=2 on a single broker (an ISR of one): acks=all sends fail
    with NOT_ENOUGH_REPLICAS, acks=1 sends go through."""
    with seglog.Broker(tmp_path / "store") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("m", 1, 1, config={"min.insync.replicas": "2"})])["m"].result(30)
        errors: list[KafkaError | None] = []
        strict = Producer(
            {"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "message.timeout.ms": 3000}
        )
        strict.produce("m", b"x", on_delivery=lambda err, _m: errors.append(err))
        strict.flush(30)
        # librdkafka retries NOT_ENOUGH_REPLICAS until the message times out.
        [err] = errors
        assert err is not None and err.code() in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError._MSG_TIMED_OUT)
        assert 'seglog_request_errors_total{request="Produce",error="19"}' in broker.metrics_text()
        assert broker.store.offsets("m", 0) == (0, 0)
        loose = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "1"})
        loose.produce("m", b"y")
        assert loose.flush(30) == 0
        assert [r.value for r in broker.store.read("m", 0, 0)] == [b"y"]


def test_the_store_and_the_cli_take_the_same_keys(tmp_path: Path) -> None:
    """`seglog topics create --config` and `Store.create_topic` take Kafka's keys and
    refuse with Kafka's messages."""
    store_path = str(tmp_path / "store")
    seglog_cli = [sys.executable, "-m", "seglog", "topics"]
    settings = ["compression.type=lz4", "segment.jitter.ms=60000", "message.format.version=2.8"]
    made = subprocess.run(
        [*seglog_cli, "create", "c", "--store", store_path, *(a for s in settings for a in ("--config", s))],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    refused = subprocess.run(
        [*seglog_cli, "create", "d", "--store", store_path, "--config", "preallocate=maybe"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "Invalid value maybe for configuration preallocate: Expected value to be either true or false" in (
        refused.stderr
    )
    with seglog.open(store_path) as store:
        config = store.describe("c").config
        assert (config["compression.type"], config["segment.jitter.ms"]) == ("lz4", "60000")
        with pytest.raises(seglog.InvalidConfigError, match="Unknown topic config name: nope"):
            store.create_topic("e", config={"nope": "1"})
        store.create_topic("f", config={"min.compaction.lag.ms": 5, "max.compaction.lag.ms": 10})
        with pytest.raises(seglog.InvalidConfigError, match=r"min\.compaction\.lag\.ms \(9\) >"):
            store.create_topic("g", config={"min.compaction.lag.ms": 9, "max.compaction.lag.ms": 8})
