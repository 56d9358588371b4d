"""Kafka's ACLs on a seglog broker: managed with CreateAcls, DescribeAcls and DeleteAcls
(AdminClient, kafka-acls), stored as Kafka stores them, and enforced for every API with
Kafka's error codes: a client without its ACL gets TOPIC_, GROUP_ or
CLUSTER_AUTHORIZATION_FAILED; a DENY beats an ALLOW; PREFIXED ACLs cover every name with
their prefix; super users pass everything."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

import seglog

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[seglog.Broker]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "group.initial.rebalance.delay.ms": "0",
    }
    with seglog.Broker(tmp_path / "store", config=config) as b:
        yield b


def conf(broker: seglog.Broker, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def acl(
    name: str,
    principal: str,
    op: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    rtype: ResourceType = ResourceType.TOPIC,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, permission)


def create(admin: AdminClient, *bindings: AclBinding) -> None:
    for b, f in admin.create_acls(list(bindings)).items():
        assert f.result(timeout=30) is None, b


def scram_user(name: str) -> UserScramCredentialUpsertion:
    return UserScramCredentialUpsertion(name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")


def topics(c: dict[str, Any], topic: str | None = None) -> dict[str, Any]:
    """Metadata as the client sees it, from a client made for it. (A librdkafka admin
    client left running with a refused topic in its metadata can crash its process on a
    later refresh: every admin client here lives for one call.)"""
    admin = AdminClient(c)
    try:
        return admin.list_topics(topic, timeout=30).topics
    finally:
        del admin


def admin_error(c: dict[str, Any], call: Callable[[AdminClient], object]) -> int:
    """The error code of an admin call expected to be refused."""
    admin = AdminClient(c)
    try:
        call(admin)
    except KafkaException as e:
        return int(e.args[0].code())
    finally:
        del admin
    raise AssertionError("the call was not refused")


def produce_error(c: dict[str, Any], topic: str, **extra: Any) -> KafkaError | None:
    """The delivery error of one record (None: delivered)."""
    errors: list[KafkaError | None] = []
    p = Producer({**c, "message.timeout.ms": 10000, **extra})
    p.produce(topic, b"v", on_delivery=lambda e, _m: errors.append(e))
    p.flush(30)
    return errors[0] if errors else None


def consume_error(c: dict[str, Any], topic: str, group: str) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer({**c, "group.id": group, "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    error = None
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not got and error is None:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is None:
                got.append(m.value())
            elif m.error().code() != KafkaError._PARTITION_EOF:
                error = m.error()
    finally:
        consumer.close()
    return got, error


def test_every_api_without_its_acl_gets_kafkas_error(broker: seglog.Broker) -> None:
    admin = AdminClient(conf(broker, "admin"))
    for f in admin.create_topics([NewTopic("t", 1, 1), NewTopic("team-a.x", 1, 1)]).values():
        f.result(timeout=30)
    alice = conf(broker, "alice")
    # Metadata shows alice no topic; one she names is TOPIC_AUTHORIZATION_FAILED.
    assert set(topics(alice)) == set()
    assert topics(alice, "t")["t"].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Produce (an idempotent producer first needs a producer id: CLUSTER_AUTHORIZATION_FAILED).
    assert (
        produce_error(alice, "t", **{"enable.idempotence": False}).code()
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    err = produce_error(alice, "t", **{"enable.idempotence": True})
    assert err is not None and err.code() in (
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    ), err
    # A group she may not read: GROUP_AUTHORIZATION_FAILED.
    create(admin, acl("t", "User:alice", AclOperation.READ))
    _, err = consume_error(alice, "t", "g")
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    # Admin APIs: topic creation and deletion, configs, ACLs, SCRAM users.
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    refused = {
        "create_topics": lambda a: a.create_topics([NewTopic("new", 1, 1)])["new"].result(timeout=30),
        "delete_topics": lambda a: a.delete_topics(["t"])["t"].result(timeout=30),
        "describe_configs": lambda a: a.describe_configs([broker_resource])[broker_resource].result(
            timeout=30
        ),
        "create_acls": lambda a: [
            f.result(timeout=30) for f in a.create_acls([acl("t", "User:alice", AclOperation.ALL)]).values()
        ],
        # (librdkafka crashes on any refused DescribeUserScramCredentials: Alter is asked.)
        "alter_user_scram_credentials": lambda a: a.alter_user_scram_credentials([scram_user("bob")])[
            "bob"
        ].result(timeout=30),
    }
    codes = {name: admin_error(alice, call) for name, call in refused.items()}
    assert codes == {
        "create_topics": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "delete_topics": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "describe_configs": KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        "create_acls": KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        "alter_user_scram_credentials": KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
    # The super user passes everything.
    assert produce_error(conf(broker, "admin"), "t") is None


def test_prefixed_allows_and_a_deny_beating_them(broker: seglog.Broker, tmp_path: Path) -> None:
    admin = AdminClient(conf(broker, "admin"))
    for f in admin.create_topics(
        [NewTopic(n, 1, 1) for n in ("team-a.x", "team-a.secret", "team-b.y")]
    ).values():
        f.result(timeout=30)
    prefixed = ResourcePatternType.PREFIXED
    create(
        admin,
        acl("team-a.", "User:bob", AclOperation.WRITE, pattern=prefixed),
        acl("team-a.", "User:bob", AclOperation.READ, pattern=prefixed),
        acl("team-a.secret", "User:bob", AclOperation.READ, AclPermissionType.DENY),
        acl("bob-", "User:bob", AclOperation.READ, rtype=ResourceType.GROUP, pattern=prefixed),
        acl("kafka-cluster", "User:bob", AclOperation.IDEMPOTENT_WRITE, rtype=ResourceType.BROKER),
    )
    bob = conf(broker, "bob")
    assert produce_error(bob, "team-a.x") is None
    assert produce_error(bob, "team-a.secret") is None, "WRITE is allowed; only READ is denied"
    assert produce_error(bob, "team-b.y").code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    got, err = consume_error(bob, "team-a.x", "bob-1")
    assert (got, err) == ([b"v"], None)
    _, err = consume_error(bob, "team-a.secret", "bob-2")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Metadata shows bob what he may describe (READ and WRITE imply DESCRIBE).
    assert set(topics(bob)) == {"team-a.x", "team-a.secret"}

    # Described and deleted with filters; kept as Kafka's ZooKeeper authorizer lays them out.
    found = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC,
            None,
            ResourcePatternType.ANY,
            "User:bob",
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(timeout=30)
    assert len(found) == 3
    stored = json.loads((tmp_path / "store" / ".acls.json").read_text())
    [secret] = [r for r in stored["resources"] if r["name"] == "team-a.secret"]
    assert secret["acls"] == [
        {"principal": "User:bob", "permissionType": "Deny", "operation": "Read", "host": "*"}
    ]
    deny = AclBindingFilter(
        ResourceType.TOPIC,
        "team-a.secret",
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.DENY,
    )
    [deleted] = [f.result(timeout=30) for f in admin.delete_acls([deny]).values()]
    assert len(deleted) == 1
    got, err = consume_error(bob, "team-a.secret", "bob-3")
    assert (got, err) == ([b"v"], None)


def test_without_an_authorizer_the_acl_apis_are_disabled(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "store") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        with pytest.raises(KafkaException) as e:
            for f in admin.create_acls([acl("t", "User:alice", AclOperation.READ)]).values():
                f.result(timeout=30)
        assert e.value.args[0].code() == KafkaError.SECURITY_DISABLED


@pytest.mark.cluster
@pytest.mark.java
def test_a_clusters_acls_live_in_zookeeper_as_kafkas_and_kafka_acls_manages_them(tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    from cluster_helpers import wait_for
    from java_helpers import VERSIONS, tool
    from seglog.testing.zookeeper import ZooKeeper

    with ZooKeeper(tmp_path / "zk") as zk:
        base = {
            "zookeeper.connect": zk.connect_string,
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS.replace(
                "required ", 'required username="admin" password="admin-secret" '
            ),
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin",
            "offsets.topic.replication.factor": "2",
            "group.initial.rebalance.delay.ms": "0",
        }
        brokers = [seglog.Broker(tmp_path / f"b{n}", config={**base, "node.id": n}) for n in (1, 2)]
        try:
            bootstrap = ",".join(b.bootstrap_servers for b in brokers)
            props = tmp_path / "admin.properties"
            props.write_text(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                'username="admin" password="admin-secret";\n'
            )
            admin = ["--bootstrap-server", bootstrap, "--command-config", str(props)]
            tool(
                VERSIONS[-1],
                "kafka-topics",
                *admin,
                "--create",
                "--topic",
                "orders",
                "--replication-factor",
                "2",
            )
            out = tool(
                VERSIONS[0],
                "kafka-acls",
                *admin,
                "--add",
                "--allow-principal",
                "User:alice",
                "--producer",
                "--consumer",
                "--topic",
                "orders",
                "--group",
                "shop",
            ).stdout
            assert "User:alice" in out and "WRITE" in out and "READ" in out
            zk_client = KazooClient(hosts=zk.connect_string)
            zk_client.start()
            try:
                data, _ = zk_client.get("/kafka-acl/Topic/orders")
                stored = json.loads(data)
                assert stored["version"] == 1
                assert {(a["principal"], a["operation"], a["permissionType"]) for a in stored["acls"]} == {
                    ("User:alice", "Write", "Allow"),
                    ("User:alice", "Describe", "Allow"),
                    ("User:alice", "Create", "Allow"),
                    ("User:alice", "Read", "Allow"),
                }
                assert json.loads(zk_client.get("/kafka-acl/Group/shop")[0])["acls"] == [
                    {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
                ]
            finally:
                zk_client.stop()
                zk_client.close()
            listed = tool(VERSIONS[-1], "kafka-acls", *admin, "--list", "--topic", "orders").stdout
            assert "principal=User:alice" in listed and "operation=WRITE" in listed
            # Every broker enforces them, as its view reads them.
            alice = {**conf(brokers[0], "alice"), "bootstrap.servers": bootstrap}
            wait_for("alice may produce", lambda: produce_error(alice, "orders") is None, 60)
            got, err = consume_error(alice, "orders", "shop")
            assert (got, err) == ([b"v"], None)
            _, err = consume_error(alice, "orders", "elsewhere")
            assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
            tool(VERSIONS[0], "kafka-acls", *admin, "--remove", "--force", "--topic", "orders")
            wait_for(
                "alice refused again",
                lambda: (
                    (e := produce_error(alice, "orders")) is not None
                    and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
                ),
                60,
            )
        finally:
            for b in brokers:
                b.close()
