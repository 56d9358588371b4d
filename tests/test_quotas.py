"""Kafka's client quotas on a seglog broker: produce and fetch byte rates and request
time per user and client id, managed with kafka-configs (AlterClientQuotas and
DescribeClientQuotas, or ZooKeeper written directly), enforced as Kafka enforces them (a
client over its quota is told ``throttle_time_ms`` and not read from meanwhile); the
controller mutation rate (KIP-599); and Kafka 4's bound on ``segment.bytes`` (KIP-1030)."""

from __future__ import annotations

import json
import os
import stat
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

import seglog
from broker_helpers import connect, frame, recv_response, string
from test_acls import JAAS

# Short windows, so a rate settles within seconds (Kafka's own are 11 of a second).
WINDOWS = {"quota.window.num": "4", "quota.window.size.seconds": "1", "controller.quota.window.num": "4"}
VALUE = b"q" * 1000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[seglog.Broker]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        **WINDOWS,
    }
    with seglog.Broker(tmp_path / "store", config=config) as b:
        yield b


def conf(broker: seglog.Broker, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
        **extra,
    }


def properties(tmp_path: Path, user: str = "admin") -> Path:
    props = tmp_path / f"{user}.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{user}-secret";\n'
    )
    return props


class Rates:
    """Bytes a client got through, by when: acknowledged records, or records consumed."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.throttles: list[int] = []
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.events.append((time.monotonic(), n))

    def throttled(self, event: Any) -> None:
        self.throttles.append(int(event.throttle_time * 1000))

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            return sum(n for t, n in self.events if start <= t < end) / (end - start)


def produce_for(c: dict[str, Any], topic: str, seconds: float, rates: Rates) -> None:
    """Produces VALUE records to ``topic`` as fast as the broker takes them, for ``seconds``."""
    p = Producer({**c, "linger.ms": 5, "batch.size": 16384, "throttle_cb": rates.throttled})

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            rates.add(len(msg.value()))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, VALUE, callback=delivered)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(60)


def test_a_user_over_its_produce_quota_is_held_to_it_and_another_is_not_slowed(
    broker: seglog.Broker, tmp_path: Path
) -> None:
    from java_helpers import VERSIONS, tool

    quota = 200_000
    admin = ["--bootstrap-server", broker.bootstrap_servers, "--command-config", str(properties(tmp_path))]
    out = tool(
        VERSIONS[-1],
        "kafka-configs",
        *admin,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "alice",
        "--add-config",
        f"producer_byte_rate={quota}",
    ).stdout
    assert "Completed updating config for user alice." in out, out
    described = tool(
        VERSIONS[0], "kafka-configs", *admin, "--describe", "--entity-type", "users", "--entity-name", "alice"
    ).stdout
    assert f"Quota configs for user-principal 'alice' are producer_byte_rate={float(quota)}" in described
    topics = AdminClient(conf(broker, "admin"))
    topics.create_topics([NewTopic("q", 1, 1)])["q"].result(30)

    alice, bob = Rates(), Rates()
    started = time.monotonic()
    threads = [
        threading.Thread(target=produce_for, args=(conf(broker, "alice"), "q", 14, alice)),
        threading.Thread(target=produce_for, args=(conf(broker, "bob"), "q", 14, bob)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Once the first burst is paid back (a few windows), alice runs at her quota.
    held = alice.rate(started + 5, started + 14)
    assert abs(held - quota) / quota < 0.10, f"alice at {held:.0f} B/s with a quota of {quota}"
    assert alice.throttles and max(alice.throttles) > 0, "alice was told throttle_time_ms"
    assert not [t for t in bob.throttles if t > 0], f"bob was throttled: {bob.throttles[:5]}"
    sent = {name: sum(n for _, n in r.events) for name, r in (("alice", alice), ("bob", bob))}
    assert sent["bob"] > sent["alice"], f"bob, unthrottled beside alice, got less through: {sent}"
    metrics = broker.stats()
    assert metrics["quota_throttled_produce"] > 0 and metrics["quota_throttle_time_ms_produce"] > 0


def test_a_client_id_over_its_fetch_quota_is_held_to_it(broker: seglog.Broker) -> None:
    admin = AdminClient(conf(broker, "admin"))
    admin.create_topics([NewTopic("f", 1, 1)])["f"].result(30)
    p = Producer(conf(broker, "bob", **{"linger.ms": 20, "batch.size": 16384}))
    for _ in range(4000):
        p.produce("f", VALUE)
        p.poll(0)
    assert p.flush(60) == 0
    quota = 150_000
    set_quota(broker, [("client-id", "slow-reader")], {"consumer_byte_rate": quota})

    def consume(client_id: str, seconds: float, rates: Rates) -> None:
        c = Consumer(
            conf(broker, "alice")
            | {
                "client.id": client_id,
                "group.id": client_id,
                "auto.offset.reset": "earliest",
                "fetch.max.bytes": 65536,
                "message.max.bytes": 65536,
                "max.partition.fetch.bytes": 32768,
                "throttle_cb": rates.throttled,
            }
        )
        c.assign([TopicPartition("f", 0, 0)])
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                rates.add(len(m.value()))
        c.close()

    slow, fast = Rates(), Rates()
    started = time.monotonic()
    threads = [
        threading.Thread(target=consume, args=("slow-reader", 12, slow)),
        threading.Thread(target=consume, args=("fast-reader", 12, fast)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = slow.rate(started + 4, started + 12)
    assert abs(held - quota) / quota < 0.10, f"slow-reader at {held:.0f} B/s with a quota of {quota}"
    assert slow.throttles and max(slow.throttles) > 0
    assert sum(n for _, n in fast.events) == 4000 * len(VALUE), "the other client id reads everything"
    assert not [t for t in fast.throttles if t > 0]
    assert broker.stats()["quota_throttled_fetch"] > 0


def set_quota(broker: seglog.Broker, entity: list[tuple[str, str | None]], values: dict[str, float]) -> None:
    """AlterClientQuotas v0, sent raw as admin (confluent-kafka's AdminClient has none)."""
    body = alter_client_quotas_v0([(entity, values)])
    with raw(broker) as s:
        s.sendall(frame(49, 0, 1, body))
        _, answer = recv_response(s)
    errors = parse_alter_client_quotas_v0(answer)
    assert errors == [(0, None)], errors


def alter_client_quotas_v0(
    entries: list[tuple[list[tuple[str, str | None]], dict[str, float | None]]], validate_only: bool = False
) -> bytes:
    out = struct.pack(">i", len(entries))
    for entity, ops in entries:
        out += struct.pack(">i", len(entity))
        for etype, name in entity:
            out += string(etype) + string(name)
        out += struct.pack(">i", len(ops))
        for key, value in ops.items():
            out += string(key) + struct.pack(">d?", value or 0.0, value is None)
    return out + struct.pack(">?", validate_only)


def parse_alter_client_quotas_v0(body: bytes) -> list[tuple[int, str | None]]:
    pos = 4  # throttle_time_ms
    (n,) = struct.unpack_from(">i", body, pos)
    pos += 4
    out = []
    for _ in range(n):
        code, mlen = struct.unpack_from(">hh", body, pos)
        pos += 4
        message = None if mlen < 0 else body[pos : pos + mlen].decode()
        pos += max(mlen, 0)
        (entities,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(entities):
            for _ in range(2):
                (slen,) = struct.unpack_from(">h", body, pos)
                pos += 2 + max(slen, 0)
        out.append((code, message))
    return out


class raw:
    """A socket to ``broker``'s SASL_PLAINTEXT listener, authenticated as admin with PLAIN."""

    def __init__(self, broker: seglog.Broker, user: str = "admin") -> None:
        self.port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
        self.user = user

    def __enter__(self) -> Any:
        s = connect(self.port)
        s.sendall(frame(17, 1, 0, string("PLAIN")))
        recv_response(s)
        token = f"\0{self.user}\0{self.user}-secret".encode()
        s.sendall(frame(36, 0, 0, struct.pack(">i", len(token)) + token))
        _, answer = recv_response(s)
        assert struct.unpack_from(">h", answer)[0] == 0, answer
        self.s = s
        return s

    def __exit__(self, *exc: object) -> None:
        self.s.close()


def metadata_v4(port_socket: Any, client_id: str, correlation: int, topics: list[str] | None = None) -> int:
    """Sends Metadata v4 and answers its response's throttle_time_ms."""
    names = b"".join(string(t) for t in topics or [])
    body = struct.pack(">i", len(topics or [])) + names + struct.pack(">?", True)
    port_socket.sendall(frame(3, 4, correlation, body, client_id=client_id))
    got, answer = recv_response(port_socket)
    assert got == correlation
    return struct.unpack_from(">i", answer)[0]


def test_request_time_and_controller_mutation_quotas_throttle_their_clients_alone(
    broker: seglog.Broker,
) -> None:
    set_quota(broker, [("client-id", "hammer")], {"request_percentage": 0.01})
    set_quota(broker, [("user", None), ("client-id", "creator")], {"controller_mutation_rate": 2})
    with raw(broker) as s:
        throttled = next(t for t in (metadata_v4(s, "hammer", i) for i in range(1, 100_000)) if t > 0)
        assert 0 < throttled <= 1000, "a request-time throttle is at most one window"
        assert [metadata_v4(s, "other", i) for i in range(300, 320)] == [0] * 20
    # KIP-599: 2 partitions a second, a burst of 2 x 4 windows = 8; auto-creation is
    # permissive: the topics are made, and the client told to wait.
    with raw(broker) as s:
        first = metadata_v4(s, "creator", 1, [f"auto-{i}" for i in range(4)])
        second = metadata_v4(s, "creator", 2, [f"auto-{i}" for i in range(4, 12)])
    assert first == 0, "four partitions are within the burst"
    assert second > 0, f"eight more overdraw the bucket by four: {second} ms"
    assert {f"auto-{i}" for i in range(12)} <= set(broker.store.topics())
    metrics = broker.stats()
    assert metrics["quota_throttled_request"] > 0 and metrics["quota_throttled_controller_mutation"] > 0


def describe_client_quotas_v0(components: list[tuple[str, int, str | None]], strict: bool) -> bytes:
    out = struct.pack(">i", len(components))
    for etype, match_type, name in components:
        out += string(etype) + struct.pack(">b", match_type) + string(name)
    return out + struct.pack(">?", strict)


def test_quotas_are_described_refused_and_kept_as_kafka_does(broker: seglog.Broker, tmp_path: Path) -> None:
    from java_helpers import VERSIONS, tool

    admin = ["--bootstrap-server", broker.bootstrap_servers, "--command-config", str(properties(tmp_path))]

    def configs(*args: str, check: bool = True) -> Any:
        return tool(VERSIONS[-1], "kafka-configs", *admin, *args, check=check)

    alice_my_app = "--entity-type users --entity-name alice --entity-type clients --entity-name".split()
    alice_my_app.append("my app")
    for entity, config in [
        ("--entity-type clients --entity-default".split(), "consumer_byte_rate=2048"),
        (alice_my_app, "request_percentage=12.5"),
        (
            "--entity-type users --entity-default".split(),
            "producer_byte_rate=4096,controller_mutation_rate=3",
        ),
    ]:
        configs("--alter", *entity, "--add-config", config)
    out = configs("--describe", "--entity-type", "clients").stdout
    assert "Quota configs for the default client-id are consumer_byte_rate=2048.0" in out, out
    out = configs("--describe", *alice_my_app).stdout
    expected = "Quota configs for user-principal 'alice', client-id 'my app' are request_percentage=12.5"
    assert expected in out, out
    bad = configs(
        *"--alter --entity-type users --entity-name bob --add-config producer_byte_rate=1.5".split(),
        check=False,
    )
    assert bad.returncode != 0 and "producer_byte_rate must be a LONG value" in bad.stdout + bad.stderr
    with raw(broker) as s:
        s.sendall(frame(48, 0, 7, describe_client_quotas_v0([("user", 2, None)], strict=True)))
        _, answer = recv_response(s)
    code = struct.unpack_from(">h", answer, 4)[0]
    assert code == 0
    assert b"<default>" not in answer and b"producer_byte_rate" in answer, "the default user has no name"
    with raw(broker, "alice") as s:
        s.sendall(frame(48, 0, 8, describe_client_quotas_v0([("topic", 2, None)], strict=False)))
        _, answer = recv_response(s)
    assert struct.unpack_from(">h", answer, 4)[0] == 35, "UNSUPPORTED_VERSION for an unknown entity type"
    # Kept in the store, private to the broker's user, and read again on restart.
    path = broker.store.path / ".client-quotas.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    stored = json.loads(path.read_text())["entities"]
    assert stored["users/alice/clients/my%20app"]["config"] == {"request_percentage": "12.5"}
    assert stored["clients/<default>"]["config"] == {"consumer_byte_rate": "2048"}


def test_kafka_4s_segment_bytes_bound_holds_over_the_wire_and_the_internal_key_passes(
    broker: seglog.Broker,
) -> None:
    admin = AdminClient(conf(broker, "admin"))
    small = admin.create_topics([NewTopic("tiny", 1, 1, config={"segment.bytes": "100"})])["tiny"]
    with pytest.raises(KafkaException) as refused:
        small.result(30)
    err = refused.value.args[0]
    assert err.code() == 40, err  # INVALID_CONFIG
    assert "Invalid value 100 for configuration segment.bytes: Value must be at least 1048576" in err.str()
    admin.create_topics([NewTopic("ok", 1, 1, config={"internal.segment.bytes": "4096"})])["ok"].result(30)
    assert broker.store.describe("ok").overrides == {"segment.bytes": "4096"}
    res = ConfigResource(ConfigResource.Type.TOPIC, "ok")
    entry = ConfigEntry("segment.bytes", "1000", incremental_operation=AlterConfigOpType.SET)
    with pytest.raises(KafkaException):
        admin.incremental_alter_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, "ok", incremental_configs=[entry])]
        )[res].result(30)
    # Other keys of a topic below the bound still change.
    entry = ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
    admin.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, "ok", incremental_configs=[entry])]
    )[res].result(30)
    assert broker.store.describe("ok").overrides == {"segment.bytes": "4096", "retention.ms": "60000"}


def test_a_clusters_quotas_live_in_zookeeper_as_kafkas_and_every_broker_enforces_them(tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    from cluster_helpers import wait_for
    from java_helpers import VERSIONS, tool
    from seglog.testing.zookeeper import ZooKeeper

    with ZooKeeper(tmp_path / "zk") as zk:
        base = {"zookeeper.connect": zk.connect_string, "offsets.topic.replication.factor": "2", **WINDOWS}
        brokers = [seglog.Broker(tmp_path / f"b{n}", config={**base, "node.id": n}) for n in (1, 2)]
        try:
            first, second = (b.bootstrap_servers for b in brokers)
            # Through one broker's AlterClientQuotas; read back through the other's.
            tool(
                VERSIONS[-1],
                "kafka-configs",
                "--bootstrap-server",
                first,
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                "batch job",
                "--add-config",
                "request_percentage=0.01",
            )
            zk_client = KazooClient(hosts=zk.connect_string)
            zk_client.start()
            try:
                data, _ = zk_client.get("/config/clients/batch%20job")
                assert json.loads(data) == {"version": 1, "config": {"request_percentage": "0.01"}}
                # A quota written into ZooKeeper as Kafka's brokers write it is read too.
                zk_client.create(
                    "/config/users/<default>",
                    json.dumps({"version": 1, "config": {"producer_byte_rate": "1048576"}}).encode(),
                    makepath=True,
                )
            finally:
                zk_client.stop()
                zk_client.close()

            def described(version: str, *entity: str, showing: str) -> str:
                """kafka-configs --describe through the second broker, once it shows ``showing``."""

                def out() -> str | None:
                    args = ("--bootstrap-server", second, "--describe", *entity)
                    text = tool(version, "kafka-configs", *args).stdout
                    return text if showing in text else None

                return wait_for(f"{showing} through the other broker", out, timeout=60, interval=0.5)

            out = described(VERSIONS[0], "--entity-type", "clients", showing="batch job")
            assert "Quota configs for client-id 'batch job' are request_percentage=0.01" in out, out
            out = described(
                VERSIONS[-1], "--entity-type", "users", "--entity-default", showing="producer_byte_rate"
            )
            assert "Quota configs for the default user-principal are producer_byte_rate=1048576.0" in out, out
            for broker in brokers:
                port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
                with connect(port) as s:
                    throttled = next(
                        t for t in (metadata_v4(s, "batch job", i) for i in range(1, 100_000)) if t > 0
                    )
                    assert throttled > 0
        finally:
            for b in brokers:
                b.close()
