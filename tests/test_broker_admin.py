"""The broker's admin APIs against real admin clients: confluent-kafka's AdminClient
(librdkafka), kafka-python 3.x's KafkaAdminClient and aiokafka's AIOKafkaAdminClient.
Effects are checked on the embedded store, errors by their Kafka codes, and the broker
must keep serving after every refused request."""

from __future__ import annotations

import asyncio
import socket
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, TopicPartition  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

# Kafka's error codes (org.apache.kafka.common.protocol.Errors).
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REQUEST = 42
INVALID_CONFIG = 40

TIMEOUT = 15


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[seglog.Broker]:
    with seglog.Broker(tmp_path / "store", num_partitions=2) as b:
        yield b


@pytest.fixture
def admin(broker: seglog.Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers, "socket.timeout.ms": 10000})


def code_of(future) -> int:
    """The Kafka error code a confluent-kafka admin future failed with."""
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT)
    return info.value.args[0].code()


def assert_serving(broker: seglog.Broker) -> None:
    """The broker still answers (a fresh client, so no connection is reused)."""
    md = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=TIMEOUT)
    assert md.cluster_id and md.controller_id == broker.node_id


# --- confluent-kafka (librdkafka) ---------------------------------------------------


def test_confluent_create_topics_with_configs_defaults_and_errors(broker, admin):
    fs = admin.create_topics(
        [
            NewTopic("orders", num_partitions=3, replication_factor=1, config={"retention.ms": "60000"}),
            NewTopic("defaulted"),  # -1 partitions and replication factor: the store's defaults
        ],
        operation_timeout=10,
    )
    for f in fs.values():
        assert f.result(timeout=TIMEOUT) is None
    d = broker.store.describe("orders")
    assert len(d.partitions) == 3
    assert d.overrides == {"retention.ms": "60000"}
    assert d.config["retention.ms"] == "60000"
    assert len(broker.store.describe("defaulted").partitions) == 2, "num.partitions of the store"

    fs = admin.create_topics(
        [
            NewTopic("orders", 1, 1),
            NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}),
            NewTopic("unknown-key", 1, 1, config={"no.such.key": "1"}),
            NewTopic("replicated", 1, 3),
            NewTopic("bad name!", 1, 1),
            NewTopic("__consumer_offsets", 1, 1),
        ]
    )
    assert code_of(fs["orders"]) == TOPIC_ALREADY_EXISTS
    assert code_of(fs["bad-config"]) == INVALID_CONFIG
    assert code_of(fs["unknown-key"]) == INVALID_CONFIG
    assert code_of(fs["replicated"]) == INVALID_REPLICATION_FACTOR
    assert code_of(fs["bad name!"]) == INVALID_TOPIC_EXCEPTION
    assert code_of(fs["__consumer_offsets"]) == INVALID_REQUEST
    assert sorted(broker.store.topics()) == ["defaulted", "orders"], "nothing refused was made"
    with pytest.raises(KafkaException) as info:
        admin.create_topics([NewTopic("retry", 1, 1, config={"retention.ms": "soon"})])["retry"].result(
            TIMEOUT
        )
    assert "retention.ms" in info.value.args[0].str(), "the message names the bad key"
    assert_serving(broker)


def test_confluent_validate_only_creates_nothing(broker, admin):
    fs = admin.create_topics(
        [NewTopic("dry", 4, 1, config={"cleanup.policy": "compact"})], validate_only=True
    )
    assert fs["dry"].result(timeout=TIMEOUT) is None
    assert "dry" not in broker.store.topics()
    fs = admin.create_topics(
        [NewTopic("dry", 4, 1, config={"cleanup.policy": "sideways"})], validate_only=True
    )
    assert code_of(fs["dry"]) == INVALID_CONFIG


def test_confluent_list_and_delete_topics(broker, admin):
    broker.store.create_topic("a", 1)
    broker.store.create_topic("b", 2)
    md = admin.list_topics(timeout=TIMEOUT)
    assert {"a", "b"} <= set(md.topics)
    assert len(md.topics["b"].partitions) == 2
    fs = admin.delete_topics(["a", "missing"], operation_timeout=10)
    assert fs["a"].result(timeout=TIMEOUT) is None
    assert code_of(fs["missing"]) == UNKNOWN_TOPIC_OR_PARTITION
    assert broker.store.topics() == ["b"]
    assert not (Path(broker.store.path) / "a-0").exists()
    assert_serving(broker)


def test_confluent_create_partitions(broker, admin):
    broker.store.create_topic("grow", 2, config={"retention.ms": "1234"})
    broker.store.append("grow", 0, [b"kept"])
    fs = admin.create_partitions([NewPartitions("grow", 5)])
    assert fs["grow"].result(timeout=TIMEOUT) is None
    d = broker.store.describe("grow")
    assert [p.partition for p in d.partitions] == [0, 1, 2, 3, 4]
    assert d.partitions[0].log_end_offset == 1, "existing data stays"
    assert d.overrides == {"retention.ms": "1234"}, "overrides stay"
    assert len(admin.list_topics(topic="grow", timeout=TIMEOUT).topics["grow"].partitions) == 5

    fs = admin.create_partitions([NewPartitions("grow", 5), NewPartitions("nope", 3)])
    assert code_of(fs["grow"]) == INVALID_PARTITIONS
    assert code_of(fs["nope"]) == UNKNOWN_TOPIC_OR_PARTITION
    fs = admin.create_partitions([NewPartitions("grow", 9)], validate_only=True)
    assert fs["grow"].result(timeout=TIMEOUT) is None
    assert len(broker.store.describe("grow").partitions) == 5, "validate_only changes nothing"
    assert_serving(broker)


def test_confluent_describe_configs_topic_and_broker(broker, admin):
    broker.store.create_topic("conf", 1, config={"retention.ms": "5000"})
    res = ConfigResource(ResourceType.TOPIC, "conf")
    entries = admin.describe_configs([res])[res].result(timeout=TIMEOUT)
    assert set(entries) == set(broker.store.describe("conf").config)
    r = entries["retention.ms"]
    assert (r.value, r.source, r.is_default, r.is_read_only) == (
        "5000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
        False,
        False,
    )
    s = entries["segment.bytes"]
    assert (s.value, s.source, s.is_default) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value, True)

    # librdkafka always asks for synonyms (v1+). Kafka's log.retention.ms defaults to
    # null (log.retention.hours holds the default), so it is no DEFAULT_CONFIG synonym.
    assert [(n, e.source) for n, e in entries["retention.ms"].synonyms.items()] == [
        ("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
    ]
    assert [(n, e.source) for n, e in entries["max.message.bytes"].synonyms.items()] == [
        ("message.max.bytes", ConfigSource.DEFAULT_CONFIG.value),
    ]

    b = ConfigResource(ResourceType.BROKER, str(broker.node_id))
    entries = admin.describe_configs([b])[b].result(timeout=TIMEOUT)
    assert entries["num.partitions"].value == "2"
    assert entries["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["log.retention.ms"].value == str(7 * 24 * 3600 * 1000)
    assert entries["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert entries["node.id"].value == str(broker.node_id)

    missing = ConfigResource(ResourceType.TOPIC, "missing")
    assert code_of(admin.describe_configs([missing])[missing]) == UNKNOWN_TOPIC_OR_PARTITION
    assert_serving(broker)


def test_confluent_alter_configs_replaces_the_override_set(broker, admin):
    broker.store.create_topic("alt", 1, config={"retention.ms": "5000", "segment.bytes": "100000"})
    res = ConfigResource(ResourceType.TOPIC, "alt", set_config={"retention.ms": "9000"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # librdkafka prefers the incremental API
        assert admin.alter_configs([res])[res].result(timeout=TIMEOUT) is None
        assert broker.store.describe("alt").overrides == {"retention.ms": "9000"}, "segment.bytes reset"

        dry = ConfigResource(ResourceType.TOPIC, "alt", set_config={"retention.ms": "1"})
        assert admin.alter_configs([dry], validate_only=True)[dry].result(timeout=TIMEOUT) is None
        assert broker.store.describe("alt").overrides == {"retention.ms": "9000"}

        bad = ConfigResource(ResourceType.TOPIC, "alt", set_config={"retention.ms": "-5"})
        assert code_of(admin.alter_configs([bad])[bad]) == INVALID_CONFIG
        missing = ConfigResource(ResourceType.TOPIC, "missing", set_config={"retention.ms": "1"})
        assert code_of(admin.alter_configs([missing])[missing]) == UNKNOWN_TOPIC_OR_PARTITION
        node = ConfigResource(ResourceType.BROKER, str(broker.node_id), set_config={"num.partitions": "9"})
        assert code_of(admin.alter_configs([node])[node]) == INVALID_CONFIG
    assert broker.store.describe("alt").overrides == {"retention.ms": "9000"}
    assert_serving(broker)


def test_confluent_incremental_alter_configs(broker, admin):
    broker.store.create_topic("inc", 1, config={"retention.ms": "5000", "segment.bytes": "100000"})

    def alter(*entries, validate_only=False):
        res = ConfigResource(ResourceType.TOPIC, "inc", incremental_configs=list(entries))
        return admin.incremental_alter_configs([res], validate_only=validate_only)[res]

    def op(name, value, kind):
        return ConfigEntry(name, value, incremental_operation=kind)

    assert (
        alter(
            op("flush.ms", "100", AlterConfigOpType.SET), op("segment.bytes", None, AlterConfigOpType.DELETE)
        ).result(TIMEOUT)
        is None
    )
    assert broker.store.describe("inc").overrides == {"retention.ms": "5000", "flush.ms": "100"}
    assert alter(op("cleanup.policy", "compact", AlterConfigOpType.APPEND)).result(TIMEOUT) is None
    assert broker.store.describe("inc").overrides["cleanup.policy"] == "delete,compact", (
        "appended to the default"
    )
    assert alter(op("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)).result(TIMEOUT) is None
    assert broker.store.describe("inc").overrides["cleanup.policy"] == "compact"
    assert broker.store.describe("inc").config["cleanup.policy"] == "compact"

    assert alter(op("retention.ms", "1", AlterConfigOpType.SET), validate_only=True).result(TIMEOUT) is None
    assert broker.store.describe("inc").overrides["retention.ms"] == "5000"
    assert code_of(alter(op("retention.ms", "7", AlterConfigOpType.APPEND))) == INVALID_CONFIG
    assert code_of(alter(op("retention.ms", "never", AlterConfigOpType.SET))) == INVALID_CONFIG
    assert code_of(alter(op("no.such.key", "1", AlterConfigOpType.SET))) == INVALID_CONFIG
    assert broker.store.describe("inc").overrides == {
        "retention.ms": "5000",
        "flush.ms": "100",
        "cleanup.policy": "compact",
    }, "a refused request changes nothing"
    node = ConfigResource(
        ResourceType.BROKER,
        str(broker.node_id),
        incremental_configs=[op("num.partitions", "3", AlterConfigOpType.SET)],
    )
    assert code_of(admin.incremental_alter_configs([node])[node]) == INVALID_CONFIG
    assert_serving(broker)


def test_confluent_delete_records(broker, admin):
    broker.store.create_topic("rec", 2)
    broker.store.append("rec", 0, [b"a", b"b", b"c", b"d"])
    broker.store.append("rec", 1, [b"x", b"y"])
    fs = admin.delete_records([TopicPartition("rec", 0, 2)])
    assert fs[TopicPartition("rec", 0)].result(timeout=TIMEOUT).low_watermark == 2
    assert broker.store.describe("rec").partitions[0].log_start_offset == 2
    # -1 (OFFSET_END) is the high watermark: everything goes.
    fs = admin.delete_records([TopicPartition("rec", 1, -1)])
    assert fs[TopicPartition("rec", 1)].result(timeout=TIMEOUT).low_watermark == 2
    assert broker.store.describe("rec").partitions[1].log_start_offset == 2

    fs = admin.delete_records([TopicPartition("rec", 0, 99)])
    assert code_of(fs[TopicPartition("rec", 0)]) == OFFSET_OUT_OF_RANGE
    assert broker.store.describe("rec").partitions[0].log_start_offset == 2
    # librdkafka finds the leader through Metadata first and fails locally; the
    # broker's own answer for a missing topic is checked with kafka-python below.
    fs = admin.delete_records([TopicPartition("missing", 0, 1)])
    with pytest.raises(KafkaException):
        fs[TopicPartition("missing", 0)].result(timeout=TIMEOUT)
    assert "missing" not in broker.store.topics(), "the lookup did not create it"
    assert_serving(broker)


def test_confluent_describe_cluster(broker, admin):
    c = admin.describe_cluster(request_timeout=10).result(timeout=TIMEOUT)
    assert c.cluster_id == broker.cluster_id
    assert c.controller.id == broker.node_id
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    assert [(n.id, n.host, n.port) for n in c.nodes] == [(broker.node_id, host, int(port))]


def _requests(broker: seglog.Broker, api: str) -> float:
    """How many requests of `api` the broker has handled (its Prometheus counter)."""
    for line in broker.metrics_text().splitlines():
        if "requests" in line and f'request="{api}"' in line and not line.startswith("#"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_confluent_consumer_validates_its_position_with_offset_for_leader_epoch(broker):
    """A position that carries a leader epoch is validated (KIP-320) before
    fetching: the broker's answer (epoch 0 ends at the log end) must keep it."""
    from confluent_kafka import Consumer

    broker.store.create_topic("val", 1)
    broker.store.append("val", 0, [b"%d" % i for i in range(5)])
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "auto.offset.reset": "earliest",  # a failed validation would restart from 0
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition("val", 0, 0)])
        got = []
        for _ in range(100):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
                if len(got) == 1:
                    # A seek with an epoch is validated before the next fetch.
                    c.seek(TopicPartition("val", 0, 2, leader_epoch=0))
            if len(got) == 4:
                break
        assert got == [b"0", b"2", b"3", b"4"]
    finally:
        c.close()
    assert _requests(broker, "OffsetForLeaderEpoch") >= 1, broker.metrics_text()


# --- OffsetForLeaderEpoch on the wire --------------------------------------------------


def _request(sock: socket.socket, api_key: int, version: int, body: bytes, corr: int = 7) -> bytes:
    client = b"test"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    frame = header + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    payload = _read(sock, size)
    assert struct.unpack(">i", payload[:4])[0] == corr
    return payload[4:]


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _offset_for_leader_epoch(broker, topic: str, parts: list[tuple[int, int, int]]) -> list[tuple]:
    """OffsetForLeaderEpoch v3: (partition, current epoch, epoch) -> (error, partition, epoch, end)."""
    name = topic.encode()
    body = struct.pack(">i", -1)  # replica_id: a consumer
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts))
    for p, current, epoch in parts:
        body += struct.pack(">iii", p, current, epoch)
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as s:
        resp = _request(s, 23, 3, body)
    # throttle, [topics]: name, [partitions]
    pos = 4
    (ntopics,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    assert ntopics == 1
    (nlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + nlen
    (nparts,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    out = []
    for _ in range(nparts):
        out.append(struct.unpack_from(">hiiq", resp, pos))
        pos += 18
    return out


def test_offset_for_leader_epoch_answers_like_kafka(broker):
    broker.store.create_topic("ep", 1)
    broker.store.append("ep", 0, [b"a", b"b", b"c"])
    got = _offset_for_leader_epoch(
        broker, "ep", [(0, 0, 0), (0, -1, 0), (0, 0, 5), (0, 1, 0), (0, -2, 0), (9, -1, 0)]
    )
    assert got == [
        (0, 0, 0, 3),  # the current epoch ends at the log end
        (0, 0, 0, 3),  # no current epoch given: no check
        (0, 0, -1, -1),  # a later epoch is unknown: undefined epoch and offset
        (75, 0, -1, -1),  # UNKNOWN_LEADER_EPOCH: the client's leader is newer than ours
        (74, 0, -1, -1),  # FENCED_LEADER_EPOCH: older
        (UNKNOWN_TOPIC_OR_PARTITION, 9, -1, -1),
    ]


def test_an_unsupported_version_closes_the_connection_and_the_broker_stays_up(broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as s:
        # IncrementalAlterConfigs v1 is flexible, not served: the connection closes.
        with pytest.raises(ConnectionError):
            _request(s, 44, 1, b"\x00")
    assert_serving(broker)


# --- kafka-python 3.x ----------------------------------------------------------------


@pytest.fixture
def kp_admin(broker):
    kafka = pytest.importorskip("kafka")
    a = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    yield a
    a.close()


def test_kafka_python_create_describe_partitions_delete(broker, kp_admin):
    import kafka.errors as Errors
    from kafka import TopicPartition as KTP
    from kafka.admin import ConfigResource as KConfigResource

    kp_admin.create_topics(
        {"kp": {"num_partitions": 2, "replication_factor": 1, "configs": {"retention.ms": "7000"}}}
    )
    d = broker.store.describe("kp")
    assert (len(d.partitions), d.overrides) == (2, {"retention.ms": "7000"})
    with pytest.raises(Errors.TopicAlreadyExistsError):
        kp_admin.create_topics({"kp": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(Errors.InvalidConfigurationError):
        kp_admin.create_topics(
            {"kp2": {"num_partitions": 1, "replication_factor": 1, "configs": {"retention.ms": "x"}}}
        )
    assert "kp2" not in broker.store.topics()

    modified = kp_admin.describe_configs([KConfigResource("TOPIC", "kp")])
    assert set(modified["topic"]["kp"]) == {"retention.ms"}, "only what was set (the 'modified' filter)"
    assert modified["topic"]["kp"]["retention.ms"]["value"] == "7000"
    everything = kp_admin.describe_configs([KConfigResource("TOPIC", "kp")], config_filter="all")
    assert set(everything["topic"]["kp"]) == set(d.config)

    kp_admin.create_partitions({"kp": 4})
    assert len(broker.store.describe("kp").partitions) == 4
    with pytest.raises(Errors.InvalidPartitionsError):
        kp_admin.create_partitions({"kp": 3})

    broker.store.append("kp", 1, [b"1", b"2", b"3"])
    kp_admin.delete_records({KTP("kp", 1): 2})
    assert broker.store.describe("kp").partitions[1].log_start_offset == 2
    with pytest.raises(Errors.OffsetOutOfRangeError):
        kp_admin.delete_records({KTP("kp", 1): 4}, partition_leader_id=broker.node_id)
    # Sent straight to the broker (no metadata lookup), so this is its answer.
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        kp_admin.delete_records({KTP("missing", 0): 1}, partition_leader_id=broker.node_id)

    kp_admin.delete_topics(["kp"])
    assert "kp" not in broker.store.topics()
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        kp_admin.delete_topics(["kp"])
    assert_serving(broker)


# --- aiokafka ------------------------------------------------------------------------


def test_aiokafka_admin_create_describe_delete(broker):
    aiokafka_admin = pytest.importorskip("aiokafka.admin")
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType

    async def run():
        a = aiokafka_admin.AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await a.start()
        try:
            resp = await a.create_topics(
                [aiokafka_admin.NewTopic("aio", 3, 1, topic_configs={"cleanup.policy": "compact"})]
            )
            created = [tuple(t)[:2] for t in resp.topic_errors]
            again = await a.create_topics([aiokafka_admin.NewTopic("aio", 1, 1)])
            dup = [tuple(t)[:2] for t in again.topic_errors]
            described = await a.describe_configs([AConfigResource(ConfigResourceType.TOPIC, "aio")])
            altered = await a.alter_configs(
                [AConfigResource(ConfigResourceType.TOPIC, "aio", {"retention.ms": "4000"})]
            )
            deleted = await a.delete_topics(["aio", "missing"])
            return created, dup, described, altered, deleted
        finally:
            await a.close()

    created, dup, described, altered, deleted = asyncio.run(run())
    assert created == [("aio", 0)]
    assert dup == [("aio", TOPIC_ALREADY_EXISTS)]
    (res,) = described[0].resources
    assert res[0] == 0
    entries = {e[0]: e for e in res[4]}
    assert entries["cleanup.policy"][1] == "compact"
    # Kafka 3.9's 36 topic keys (compared key by key with Kafka in test_topic_configs).
    assert len(entries) == 36 and {"cleanup.policy", "segment.jitter.ms", "preallocate"} <= set(entries)
    assert [tuple(r)[:1] for r in altered[0].resources] == [(0,)]
    assert dict(tuple(t)[:2] for t in deleted.topic_error_codes) == {
        "aio": 0,
        "missing": UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert "aio" not in broker.store.topics()
    assert_serving(broker)
