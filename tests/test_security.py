"""Who may talk to a broker: listeners with Kafka's security protocols, TLS with client
certificates, SASL PLAIN and SCRAM-SHA-256/512 with credentials kept as Kafka keeps them,
KIP-368 sessions, and what a client gets for each way of getting it wrong. Kafka's own
clients (confluent-kafka, kafka-python, aiokafka) run with their usual settings."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

import seglog
from broker_helpers import closed_by_peer, connect, frame, recv_response, string

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


@dataclass
class Pki:
    """A CA, the broker's certificate (for 127.0.0.1), a client's, and another CA's client."""

    dir: Path
    ca: Path
    broker: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path
    stranger_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(d / "ca.pem")
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(d / "broker.pem")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_unit_name="eng")
    client.cert_chain_pems[0].write_to_path(d / "client.pem")
    client.private_key_pem.write_to_path(d / "client.key")
    other = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    other.cert_chain_pems[0].write_to_path(d / "stranger.pem")
    other.private_key_pem.write_to_path(d / "stranger.key")
    return Pki(
        d,
        d / "ca.pem",
        d / "broker.pem",
        d / "client.pem",
        d / "client.key",
        d / "stranger.pem",
        d / "stranger.key",
    )


def sasl_config(pki: Pki, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


def address(broker: seglog.Broker, listener: str) -> str:
    return broker.listeners[listener][1]


def port(broker: seglog.Broker, listener: str) -> int:
    return int(address(broker, listener).rsplit(":", 1)[1])


def client_conf(broker: seglog.Broker, pki: Pki, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": address(broker, "SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def add_scram_users(admin: AdminClient, users: dict[str, tuple[ScramMechanism, int, str]]) -> None:
    upserts = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(m, iterations), password.encode())
        for user, (m, iterations, password) in users.items()
    ]
    for user, f in admin.alter_user_scram_credentials(upserts).items():
        assert f.result(timeout=30) is None, user


def produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    p = Producer({**conf, "acks": "all", "linger.ms": 5})
    errors: list[KafkaError] = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda e, _m: e and errors.append(e))
    assert p.flush(30) == 0 and not errors, errors


def consume_group(conf: dict[str, Any], topic: str, n: int, group: str) -> list[bytes]:
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def auth_error(conf: dict[str, Any]) -> str:
    """What librdkafka reports when it cannot get in: its first error callback."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert errors, "the client got in"
    del admin
    return errors[0].str()


@pytest.fixture
def secured(tmp_path: Path, pki: Pki) -> Iterator[seglog.Broker]:
    with seglog.Broker(tmp_path / "store", config=sasl_config(pki)) as b:
        yield b


def test_sasl_ssl_scram_and_plain_with_confluent_kafka(
    secured: seglog.Broker, pki: Pki, tmp_path: Path
) -> None:
    broker = secured
    admin = AdminClient(client_conf(broker, pki, "PLAIN", "admin", "admin-secret"))
    add_scram_users(
        admin,
        {
            "bob": (ScramMechanism.SCRAM_SHA_512, 8192, "bob-secret"),
            "carol": (ScramMechanism.SCRAM_SHA_256, 4096, "carol-secret"),
        },
    )
    described = {
        u: f.result(timeout=30) for u, f in admin.describe_user_scram_credentials(["bob", "carol"]).items()
    }
    assert [(i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    assert [(i.mechanism, i.iterations) for i in described["carol"].scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    # Kept as Kafka keeps them: salt, stored and server keys, iterations; no password.
    users = json.loads((tmp_path / "store" / ".user-configs.json").read_text())["entities"]
    stored = dict(p.split("=", 1) for p in users["bob"]["config"]["SCRAM-SHA-512"].split(","))
    assert stored["iterations"] == "8192"
    salted = hashlib.pbkdf2_hmac("sha512", b"bob-secret", base64.b64decode(stored["salt"]), 8192)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert base64.b64decode(stored["stored_key"]) == hashlib.sha512(client_key).digest()
    assert b"bob-secret" not in (tmp_path / "store" / ".user-configs.json").read_bytes()
    assert (tmp_path / "store" / ".user-configs.json").stat().st_mode & 0o077 == 0

    values = [f"v{i}".encode() for i in range(100)]
    produce(client_conf(broker, pki, "SCRAM-SHA-512", "bob", "bob-secret"), "t", values)
    got = consume_group(client_conf(broker, pki, "SCRAM-SHA-256", "carol", "carol-secret"), "t", 100, "g")
    assert got == values
    got = consume_group(client_conf(broker, pki, "PLAIN", "alice", "alice-secret"), "t", 100, "g2")
    assert got == values
    # Metadata gives each client its own listener's endpoint.
    md = admin.list_topics(timeout=30)
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [address(broker, "SASL_SSL")]
    plain_md = AdminClient({"bootstrap.servers": address(broker, "PLAINTEXT")}).list_topics(timeout=30)
    assert [f"{b.host}:{b.port}" for b in plain_md.brokers.values()] == [address(broker, "PLAINTEXT")]

    # A deleted credential no longer lets its user in.
    [f] = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
    ).values()
    assert f.result(timeout=30) is None
    refused = auth_error(client_conf(broker, pki, "SCRAM-SHA-256", "carol", "carol-secret"))
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in refused
    stats = broker.stats()
    assert stats["successful_authentication"] >= 5 and stats["failed_authentication"] >= 1, stats


def test_user_credential_requests_get_kafkas_errors(secured: seglog.Broker, pki: Pki) -> None:
    admin = AdminClient(client_conf(secured, pki, "PLAIN", "admin", "admin-secret"))
    few = UserScramCredentialUpsertion("u", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")
    many = UserScramCredentialUpsertion("v", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 20000), b"pw")
    gone = UserScramCredentialDeletion("w", ScramMechanism.SCRAM_SHA_512)
    futures = admin.alter_user_scram_credentials([few, many, gone])
    errors = {}
    for user, f in futures.items():
        with pytest.raises(Exception) as e:
            f.result(timeout=30)
        errors[user] = e.value.args[0]
    assert errors["u"].name() == "UNACCEPTABLE_CREDENTIAL" and "Too few iterations" in errors["u"].str()
    assert errors["v"].name() == "UNACCEPTABLE_CREDENTIAL" and "Too many iterations" in errors["v"].str()
    assert errors["w"].name() == "RESOURCE_NOT_FOUND"
    with pytest.raises(Exception) as e:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(timeout=30)
    assert "does not exist: nobody" in str(e.value)


def test_kafka_python_and_aiokafka_over_sasl_ssl(secured: seglog.Broker, pki: Pki) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.helpers import create_ssl_context
    from kafka import KafkaProducer

    broker = secured
    admin = AdminClient(client_conf(broker, pki, "PLAIN", "admin", "admin-secret"))
    add_scram_users(admin, {"kp": (ScramMechanism.SCRAM_SHA_512, 4096, "kp-secret")})
    producer = KafkaProducer(
        bootstrap_servers=address(broker, "SASL_SSL"),
        security_protocol="SASL_SSL",
        ssl_cafile=str(pki.ca),
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="kp",
        sasl_plain_password="kp-secret",
        acks="all",
    )
    for i in range(20):
        producer.send("kp", f"k{i}".encode())
    producer.flush(30)
    producer.close()

    async def consume() -> list[bytes]:
        c = AIOKafkaConsumer(
            "kp",
            bootstrap_servers=address(broker, "SASL_SSL"),
            security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=str(pki.ca)),
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
            group_id="aio",
            auto_offset_reset="earliest",
        )
        await c.start()
        got: list[bytes] = []
        try:
            while len(got) < 20:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 60)
                got += [m.value for ms in batch.values() for m in ms]
        finally:
            await c.stop()
        return got

    assert asyncio.run(consume()) == [f"k{i}".encode() for i in range(20)]


def test_wrong_credentials_get_kafkas_messages(secured: seglog.Broker, pki: Pki) -> None:
    broker = secured
    admin = AdminClient(client_conf(broker, pki, "PLAIN", "admin", "admin-secret"))
    add_scram_users(admin, {"dave": (ScramMechanism.SCRAM_SHA_512, 4096, "dave-secret")})
    scram = "Authentication failed during authentication due to invalid credentials with SASL mechanism"
    assert f"{scram} SCRAM-SHA-512" in auth_error(client_conf(broker, pki, "SCRAM-SHA-512", "dave", "nope"))
    # An unknown user is told the same, so that it learns nothing of who exists.
    assert f"{scram} SCRAM-SHA-512" in auth_error(client_conf(broker, pki, "SCRAM-SHA-512", "eve", "x"))
    # SCRAM-SHA-256 has no credential for dave.
    assert f"{scram} SCRAM-SHA-256" in auth_error(
        client_conf(broker, pki, "SCRAM-SHA-256", "dave", "dave-secret")
    )
    plain = "Authentication failed: Invalid username or password"
    assert plain in auth_error(client_conf(broker, pki, "PLAIN", "alice", "wrong"))
    assert plain in auth_error(client_conf(broker, pki, "PLAIN", "nobody", "alice-secret"))


def sasl_handshake(s: socket.socket, mechanism: str, version: int = 1) -> tuple[int, list[str]]:
    s.sendall(frame(17, version, 1, string(mechanism)))
    _, body = recv_response(s)
    error, n = struct.unpack_from(">hi", body)
    mechanisms, at = [], 6
    for _ in range(n):
        (size,) = struct.unpack_from(">h", body, at)
        mechanisms.append(body[at + 2 : at + 2 + size].decode())
        at += 2 + size
    return error, mechanisms


def sasl_authenticate(s: socket.socket, token: bytes, version: int = 1) -> tuple[int, str | None, bytes, int]:
    """SaslAuthenticate v0/v1 (non-flexible): (error, message, token, session lifetime ms)."""
    s.sendall(frame(36, version, 2, struct.pack(">i", len(token)) + token))
    _, body = recv_response(s)
    (error, size) = struct.unpack_from(">hh", body)
    message = None if size < 0 else body[4 : 4 + size].decode()
    at = 4 + max(size, 0)
    (n,) = struct.unpack_from(">i", body, at)
    auth = body[at + 4 : at + 4 + n]
    lifetime = struct.unpack_from(">q", body, at + 4 + n)[0] if version >= 1 else 0
    return error, message, auth, lifetime


METADATA_V1_ALL = frame(3, 1, 9, struct.pack(">i", -1))


def test_a_sasl_listener_serves_nothing_before_authentication(secured: seglog.Broker) -> None:
    p = port(secured, "SASL_PLAINTEXT")
    # ApiVersions is answered; any other request closes the connection.
    with connect(p) as s:
        s.sendall(frame(18, 0, 7, b""))
        assert recv_response(s)[0] == 7
        s.sendall(METADATA_V1_ALL)
        assert closed_by_peer(s)
    # A mechanism the listener does not serve: UNSUPPORTED_SASL_MECHANISM (33), with the
    # list, then the connection is closed.
    with connect(p) as s:
        error, mechanisms = sasl_handshake(s, "GSSAPI")
        assert (error, mechanisms) == (33, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        assert closed_by_peer(s)
    # Authenticated, the same connection is served.
    with connect(p) as s:
        assert sasl_handshake(s, "PLAIN")[0] == 0
        assert sasl_authenticate(s, b"\0alice\0alice-secret")[:2] == (0, None)
        s.sendall(METADATA_V1_ALL)
        assert recv_response(s)[0] == 9
        # Authenticating again without a session to renew: ILLEGAL_SASL_STATE (34).
        s.sendall(frame(36, 0, 3, struct.pack(">i", 0)))
        assert struct.unpack_from(">h", recv_response(s)[1])[0] == 34
    # A failed exchange is answered SASL_AUTHENTICATION_FAILED (58) and closed.
    with connect(p) as s:
        assert sasl_handshake(s, "PLAIN")[0] == 0
        error, message, _, _ = sasl_authenticate(s, b"\0alice\0wrong")
        assert (error, message) == (58, "Authentication failed: Invalid username or password")
        assert closed_by_peer(s)
    # After a v0 handshake the tokens travel raw (no request header), as Kafka reads them.
    with connect(p) as s:
        assert sasl_handshake(s, "PLAIN", version=0)[0] == 0
        token = b"\0alice\0alice-secret"
        s.sendall(struct.pack(">i", len(token)) + token)
        (size,) = struct.unpack(">i", s.recv(4))
        assert size == 0
        s.sendall(METADATA_V1_ALL)
        assert recv_response(s)[0] == 9
    # On a listener without SASL the SASL requests get ILLEGAL_SASL_STATE.
    with connect(port(secured, "PLAINTEXT")) as s:
        assert sasl_handshake(s, "PLAIN")[0] == 34


def test_plaintext_to_a_tls_port_is_closed(secured: seglog.Broker) -> None:
    before = secured.stats()["failed_authentication"]
    with connect(port(secured, "SASL_SSL")) as s:
        s.sendall(frame(18, 0, 7, b""))
        assert closed_by_peer(s)
    assert secured.stats()["failed_authentication"] == before + 1


def test_sessions_end_unless_renewed_kip_368(tmp_path: Path, pki: Pki) -> None:
    config = sasl_config(pki, **{"listener.name.sasl_plaintext.connections.max.reauth.ms": "1500"})
    with seglog.Broker(tmp_path / "store", config=config) as broker:
        p = port(broker, "SASL_PLAINTEXT")
        with connect(p) as s:
            assert sasl_handshake(s, "PLAIN")[0] == 0
            assert sasl_authenticate(s, b"\0alice\0alice-secret")[3] == 1500
            s.sendall(METADATA_V1_ALL)
            assert recv_response(s)[0] == 9
            # The session's end is what is tested: time has to pass.
            time.sleep(1.6)
            s.sendall(METADATA_V1_ALL)
            assert closed_by_peer(s), "served after the session ended"
        # Renewed in time, a connection lives on: a new handshake, the same principal.
        with connect(p) as s:
            assert sasl_handshake(s, "PLAIN")[0] == 0
            assert sasl_authenticate(s, b"\0alice\0alice-secret")[0] == 0
            time.sleep(1.0)
            assert sasl_handshake(s, "PLAIN")[0] == 0
            assert sasl_authenticate(s, b"\0alice\0alice-secret")[3] == 1500
            time.sleep(1.0)
            s.sendall(METADATA_V1_ALL)
            assert recv_response(s)[0] == 9
        # Another principal cannot take the connection over.
        with connect(p) as s:
            assert sasl_handshake(s, "PLAIN")[0] == 0
            assert sasl_authenticate(s, b"\0alice\0alice-secret")[0] == 0
            assert sasl_handshake(s, "PLAIN")[0] == 0
            error, message, _, _ = sasl_authenticate(s, b"\0admin\0admin-secret")
            assert error == 58 and "Cannot change principals" in (message or "")
            assert closed_by_peer(s)
        # librdkafka renews its sessions (KIP-368) and keeps consuming across several.
        before = broker.stats()["successful_authentication"]
        conf = {
            "bootstrap.servers": address(broker, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        produce(conf, "r", [b"x"])
        c = Consumer({**conf, "group.id": "r", "auto.offset.reset": "earliest"})
        c.subscribe(["r"])
        deadline = time.monotonic() + 60
        got = 0
        try:
            while broker.stats()["successful_authentication"] < before + 6 and time.monotonic() < deadline:
                m = c.poll(0.2)
                got += m is not None and m.error() is None
        finally:
            c.close()
        assert got == 1
        assert broker.stats()["successful_authentication"] >= before + 6


def ssl_config(pki: Pki, auth: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.location": str(pki.broker),
        "ssl.truststore.location": str(pki.ca),
        "ssl.client.auth": auth,
    }


def test_ssl_with_client_certificates(tmp_path: Path, pki: Pki) -> None:
    with seglog.Broker(tmp_path / "store", config=ssl_config(pki, "required")) as broker:
        base = {
            "bootstrap.servers": address(broker, "SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
        }
        mine = {
            **base,
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        }
        values = [uuid.uuid4().bytes for _ in range(10)]
        produce(mine, "s", values)
        assert consume_group(mine, "s", 10, "s") == values
        # No certificate, or one from another CA: the handshake fails.
        before = broker.stats()["failed_authentication"]
        auth_error(base)
        stranger = {
            **base,
            "ssl.certificate.location": str(pki.stranger_cert),
            "ssl.key.location": str(pki.stranger_key),
        }
        auth_error(stranger)
        assert broker.stats()["failed_authentication"] >= before + 2
        # A client that does not trust the broker's CA gives up on its own.
        ctx = ssl.create_default_context(cafile=str(pki.stranger_cert))
        with pytest.raises(ssl.SSLError), socket.create_connection(("127.0.0.1", port(broker, "SSL"))) as raw:
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    # `requested`: a client without a certificate is let in too.
    with seglog.Broker(tmp_path / "store2", config=ssl_config(pki, "requested")) as broker:
        conf = {
            "bootstrap.servers": address(broker, "SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca),
        }
        produce(conf, "s", [b"anonymous"])


def test_bad_security_configs_are_refused_at_start(tmp_path: Path, pki: Pki) -> None:
    cases = [
        ({"listeners": "SSL://127.0.0.1:0"}, "has no keystore"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tmp_path / "none.pem")}, "none.pem"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.ca)}, "private key"),
        ({**ssl_config(pki, "required"), "ssl.truststore.location": str(pki.client_key)}, "certificate"),
        (
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.location": str(pki.broker),
                "ssl.keystore.type": "JKS",
            },
            "PEM",
        ),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "GSSAPI"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "has no users"),
        (
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.location": str(pki.broker),
                "ssl.client.auth": "always",
            },
            "ssl.client.auth",
        ),
        (
            {
                "listeners": "SSL://127.0.0.1:0",
                "ssl.keystore.location": str(pki.broker),
                "ssl.enabled.protocols": "TLSv1.1",
            },
            "TLSv1.1",
        ),
    ]
    for config, needle in cases:
        with pytest.raises((seglog.SeglogError, OSError, ValueError)) as e:
            seglog.Broker(tmp_path / "store", config=config).close()
        assert needle in str(e.value), (config, str(e.value))


def scram_jaas(user: str, password: str) -> str:
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return f'{module} required username="{user}" password="{password}";'


@pytest.mark.cluster
@pytest.mark.java
def test_a_cluster_replicating_over_sasl_ssl_serves_kafkas_tools_and_java_clients(
    tmp_path: Path, pki: Pki
) -> None:
    """Three brokers whose replication runs over SASL_SSL with SCRAM-SHA-512, the
    credentials written to ZooKeeper by Kafka's own kafka-configs (as Kafka's SCRAM
    bootstrap does), clients of each kind on the same listener."""
    from cluster_helpers import wait_for
    from java_helpers import VERSIONS, run, tool
    from seglog.testing.zookeeper import ZooKeeper

    with ZooKeeper(tmp_path / "zk") as zk:
        for user, mechanism, password in [
            ("admin", "SCRAM-SHA-512", "admin-secret"),
            ("alice", "SCRAM-SHA-256", "alice-secret"),
        ]:
            out = tool(
                VERSIONS[0],
                "kafka-configs",
                "--zookeeper",
                zk.connect_string,
                "--alter",
                "--add-config",
                f"{mechanism}=[iterations=4096,password={password}]",
                "--entity-type",
                "users",
                "--entity-name",
                user,
            ).stdout
            assert f"Completed updating config for entity: user-principal '{user}'." in out
        config = {
            "zookeeper.connect": zk.connect_string,
            "listeners": "SASL_SSL://127.0.0.1:0",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas("admin", "admin-secret"),
            "ssl.keystore.location": str(pki.broker),
            "ssl.truststore.location": str(pki.ca),
            "offsets.topic.replication.factor": "3",
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            "replica.lag.time.max.ms": "10000",
        }
        brokers = {n: seglog.Broker(tmp_path / f"b{n}", config={**config, "node.id": n}) for n in (1, 2, 3)}
        try:
            bootstrap = ",".join(address(b, "SASL_SSL") for b in brokers.values())
            props = tmp_path / "client.properties"
            props.write_text(
                "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                f"sasl.jaas.config={scram_jaas('admin', 'admin-secret')}\n"
                f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n"
            )
            created = tool(
                VERSIONS[-1],
                "kafka-topics",
                "--bootstrap-server",
                bootstrap,
                "--command-config",
                str(props),
                "--create",
                "--topic",
                "t",
                "--partitions",
                "3",
                "--replication-factor",
                "3",
                "--config",
                "min.insync.replicas=2",
            ).stdout
            assert "Created topic t." in created
            alice = {
                **client_conf(brokers[1], pki, "SCRAM-SHA-256", "alice", "alice-secret"),
                "bootstrap.servers": bootstrap,
            }
            values = [f"a{i}".encode() for i in range(300)]
            produce(alice, "t", values)
            admin = AdminClient(alice)

            def full_isrs() -> bool:
                parts = admin.list_topics("t", timeout=10).topics["t"].partitions.values()
                return len(parts) == 3 and all(sorted(p.isrs) == [1, 2, 3] for p in parts)

            wait_for("every partition's ISR full (followers fetching over SASL_SSL)", full_isrs, 60)
            assert sorted(consume_group(alice, "t", 300, "before")) == sorted(values)
            for version in VERSIONS:
                lines = run(
                    version,
                    "produce",
                    bootstrap=bootstrap,
                    topic="t",
                    count=100,
                    client_acks="all",
                    client_security_protocol="SASL_SSL",
                    client_sasl_mechanism="SCRAM-SHA-512",
                    client_sasl_jaas_config=scram_jaas("admin", "admin-secret"),
                    client_ssl_truststore_type="PEM",
                    client_ssl_truststore_location=str(pki.ca),
                )
                failed = [line for line in lines if "error" in line]
                assert not failed, failed[:3]
            # Each partition's leader goes: its followers had every acknowledged record.
            leaders = {p.leader for p in admin.list_topics("t", timeout=10).topics["t"].partitions.values()}
            victim = sorted(leaders)[0]
            brokers.pop(victim).close()
            rest = ",".join(address(b, "SASL_SSL") for b in brokers.values())
            got = consume_group({**alice, "bootstrap.servers": rest}, "t", 300 + 100 * len(VERSIONS), "after")
            assert sorted(v for v in got if v.startswith(b"a")) == sorted(values)
            assert len(got) == 300 + 100 * len(VERSIONS)
            for b in brokers.values():
                assert b.stats()["successful_authentication"] >= 2
        finally:
            for b in brokers.values():
                b.close()


@pytest.mark.cluster
def test_seglog_cluster_secure_starts_a_sasl_ssl_cluster_and_says_how_to_reach_it(tmp_path: Path) -> None:
    import re
    import signal
    import subprocess
    import sys

    from broker_helpers import env
    from cluster_helpers import wait_for

    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog", "cluster", "--dir", str(tmp_path / "c"), "--secure"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]
        assert re.match(
            r"seglog: cluster listening on 127\.0\.0\.1:\d+(,127\.0\.0\.1:\d+){2}$", lines[1].strip()
        )
        settings = json.loads(lines[2].split("(confluent-kafka): ", 1)[1])
        assert settings["security.protocol"] == "SASL_SSL" and settings["sasl.password"]
        # The secrets are in files only their owner reads, not on the brokers' command lines.
        for name in ("secure.properties", "client.properties"):
            assert (tmp_path / "c" / name).stat().st_mode & 0o077 == 0
        for pid_dir in Path("/proc").iterdir():
            if pid_dir.name.isdigit():
                try:
                    cmdline = (pid_dir / "cmdline").read_bytes()
                except OSError:
                    continue
                assert settings["sasl.password"].encode() not in cmdline
        admin = AdminClient(settings)
        for f in admin.create_topics([NewTopic("t", 3, 3)]).values():
            f.result(timeout=60)
        values = [f"s{i}".encode() for i in range(50)]
        produce(settings, "t", values)
        assert sorted(consume_group(settings, "t", 50, "g")) == sorted(values)
        # Replicated over SASL_SSL: every partition's ISR is full.
        wait_for(
            "full ISRs",
            lambda: all(
                len(p.isrs) == 3 for p in admin.list_topics("t", timeout=10).topics["t"].partitions.values()
            ),
            60,
        )
        # A plaintext client gets nowhere.
        host, port = settings["bootstrap.servers"].split(",")[0].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(frame(18, 0, 1, b""))
            assert closed_by_peer(s)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


@pytest.mark.java
def test_ssl_client_certificates_from_kafka_python_aiokafka_and_java(tmp_path: Path, pki: Pki) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context
    from cryptography.hazmat.primitives import serialization
    from kafka import KafkaConsumer

    from java_helpers import VERSIONS, run

    # Java's PEM keystore reads PKCS#8 keys: the client's key rewritten so, with its chain.
    key = serialization.load_pem_private_key(pki.client_key.read_bytes(), password=None)
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    keystore = tmp_path / "client-keystore.pem"
    keystore.write_bytes(pkcs8 + pki.client_cert.read_bytes())
    with seglog.Broker(tmp_path / "store", config=ssl_config(pki, "required")) as broker:
        bootstrap = address(broker, "SSL")
        for version in VERSIONS:
            lines = run(
                version,
                "produce",
                bootstrap=bootstrap,
                topic="j",
                count=20,
                client_security_protocol="SSL",
                client_ssl_keystore_type="PEM",
                client_ssl_keystore_location=str(keystore),
                client_ssl_truststore_type="PEM",
                client_ssl_truststore_location=str(pki.ca),
            )
            assert not [line for line in lines if "error" in line], lines[:3]

        async def produce_aio() -> None:
            context = create_ssl_context(
                cafile=str(pki.ca), certfile=str(pki.client_cert), keyfile=str(pki.client_key)
            )
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
            await p.start()
            try:
                for i in range(10):
                    await p.send_and_wait("j", f"aio{i}".encode())
            finally:
                await p.stop()

        asyncio.run(produce_aio())
        consumer = KafkaConsumer(
            "j",
            bootstrap_servers=bootstrap,
            security_protocol="SSL",
            ssl_cafile=str(pki.ca),
            ssl_certfile=str(pki.client_cert),
            ssl_keyfile=str(pki.client_key),
            auto_offset_reset="earliest",
        )
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(values) < 20 * len(VERSIONS) + 10 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    values += [m.value for m in records]
        finally:
            consumer.close()
        assert len(values) == 20 * len(VERSIONS) + 10
        assert sorted(v for v in values if v.startswith(b"aio")) == sorted(
            f"aio{i}".encode() for i in range(10)
        )
