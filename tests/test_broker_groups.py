"""Consumer groups through the broker's classic group coordinator: confluent-kafka
members in separate processes splitting partitions and taking over a killed one's,
kafka-python and aiokafka group consumers, static membership, offsets that survive a
broker restart, the bytes of ``__consumer_offsets`` read with Kafka's own schemas,
and Kafka's errors for bad requests."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import seglog

# Short sessions for the tests; the broker's floor is lowered to allow them.
GROUP_KEYS: dict[str, Any] = {"group_min_session_timeout_ms": 500, "group_initial_rebalance_delay_ms": 0}
OFFSETS_TOPIC = "__consumer_offsets"


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _append(store: seglog.Store, topic: str, partition: int, values: list[bytes]) -> None:
    store.append(topic, partition, values)


# -- Kafka's schemas of __consumer_offsets records, read by kafka-python's own codec ------

# Kafka's OffsetCommitKey/Value and GroupMetadataKey/Value (group-coordinator's
# common/message JSON); kafka-python ships a generic codec for such schemas but not
# these four, so they are given here and decoded by that codec.
_SCHEMAS = {
    "OffsetCommitKey": [
        {"name": "group", "type": "string", "versions": "0+"},
        {"name": "topic", "type": "string", "versions": "0+"},
        {"name": "partition", "type": "int32", "versions": "0+"},
    ],
    "OffsetCommitValue": [
        {"name": "offset", "type": "int64", "versions": "0+"},
        {"name": "leaderEpoch", "type": "int32", "versions": "3+", "default": -1, "ignorable": True},
        {"name": "metadata", "type": "string", "versions": "0+"},
        {"name": "commitTimestamp", "type": "int64", "versions": "0+"},
        {"name": "expireTimestamp", "type": "int64", "versions": "1", "default": -1, "ignorable": True},
    ],
    "GroupMetadataKey": [{"name": "group", "type": "string", "versions": "0"}],
    "GroupMetadataValue": [
        {"name": "protocolType", "versions": "0+", "type": "string"},
        {"name": "generation", "versions": "0+", "type": "int32"},
        {"name": "protocol", "versions": "0+", "type": "string", "nullableVersions": "0+"},
        {"name": "leader", "versions": "0+", "type": "string", "nullableVersions": "0+"},
        {"name": "currentStateTimestamp", "versions": "2+", "type": "int64", "default": -1},
        {
            "name": "members",
            "versions": "0+",
            "type": "[]MemberMetadata",
            "fields": [
                {"name": "memberId", "versions": "0+", "type": "string"},
                {
                    "name": "groupInstanceId",
                    "versions": "3+",
                    "type": "string",
                    "default": "null",
                    "nullableVersions": "3+",
                },
                {"name": "clientId", "versions": "0+", "type": "string"},
                {"name": "clientHost", "versions": "0+", "type": "string"},
                {"name": "rebalanceTimeout", "versions": "1+", "type": "int32"},
                {"name": "sessionTimeout", "versions": "0+", "type": "int32"},
                {"name": "subscription", "versions": "0+", "type": "bytes"},
                {"name": "assignment", "versions": "0+", "type": "bytes"},
            ],
        },
    ],
}
_VERSIONS = {
    "OffsetCommitKey": ("0-1", "none"),
    "OffsetCommitValue": ("0-4", "4+"),
    "GroupMetadataKey": ("0", "none"),
    "GroupMetadataValue": ("0-4", "4+"),
}


@pytest.fixture(scope="module")
def kafka_schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """kafka-python data classes for the four record schemas."""
    import importlib

    from kafka.protocol.api_data import ApiData

    root = tmp_path_factory.mktemp("schemas")
    pkg = root / "consumer_offsets_schemas"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, fields in _SCHEMAS.items():
        valid, flexible = _VERSIONS[name]
        doc = {"type": "data", "name": name, "validVersions": valid, "flexibleVersions": flexible}
        (pkg / f"{name}.json").write_text(json.dumps({**doc, "fields": fields}))
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("consumer_offsets_schemas")
        return {name: type(name, (ApiData,), {}, load_json=module) for name in _SCHEMAS}
    finally:
        sys.path.remove(str(root))


def _records(store: seglog.Store, schemas: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """Every record of __consumer_offsets, in each partition's order, decoded with
    kafka-python's codec: ("offset" | "group", key, value or None)."""
    out = []
    for p, part in enumerate(store.describe(OFFSETS_TOPIC).partitions):
        end = part.log_end_offset
        if end == 0:
            continue
        for r in store.read(OFFSETS_TOPIC, p, 0, max_records=end + 1):
            (kind,) = struct.unpack_from(">h", r.key)
            if kind in (0, 1):
                key = schemas["OffsetCommitKey"].decode(r.key[2:], version=0, header=False)
                value = schemas["OffsetCommitValue"].decode(r.value) if r.value is not None else None
                out.append(("offset", key, value))
            else:
                assert kind == 2, f"a key of record type {kind}"
                key = schemas["GroupMetadataKey"].decode(r.key[2:], version=0, header=False)
                value = schemas["GroupMetadataValue"].decode(r.value) if r.value is not None else None
                out.append(("group", key, value))
    return out


def _group_records(store: seglog.Store, schemas: dict[str, Any], group: str) -> list[Any]:
    return [v for kind, k, v in _records(store, schemas) if kind == "group" and k.group == group]


# -- raw requests ----------------------------------------------------------------------


def _call(addr: str, request: Any, response_cls: Any, version: int) -> Any:
    request.with_header(correlation_id=7, client_id="raw")
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(request.encode(version=version, header=True, framed=True))
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        data = s.recv(size, socket.MSG_WAITALL)
    return response_cls.decode(data, version=version, header=True)


def _join(addr: str, group: str, protocols: list[tuple[str, bytes]], version: int = 5, **kw: Any) -> Any:
    from kafka.protocol.consumer.group import JoinGroupRequest, JoinGroupResponse

    fields: dict[str, Any] = {
        "group_id": group,
        "session_timeout_ms": 6000,
        "rebalance_timeout_ms": 6000,
        "member_id": "",
        "protocol_type": "consumer",
        "protocols": [
            JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m, version=version)
            for n, m in protocols
        ],
    }
    if version >= 5:
        fields["group_instance_id"] = None
    fields.update(kw)
    return _call(addr, JoinGroupRequest(version=version, **fields), JoinGroupResponse, version)


# -- confluent-kafka members in their own processes ---------------------------------

_MEMBER = r"""
import sys
from confluent_kafka import Consumer

bootstrap, group, topic, out = sys.argv[1:5]
f = open(out, "a", buffering=1)


def on_assign(consumer, partitions):
    f.write("A " + ",".join(str(p.partition) for p in partitions) + "\n")


def on_revoke(consumer, partitions):
    f.write("R\n")


c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300,
})
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
while True:
    m = c.poll(0.2)
    if m is None or m.error():
        continue
    # Processed (written), then committed synchronously: at least once, and a
    # record is seen twice only if a member dies between the two.
    f.write(f"M {m.partition()} {m.offset()} {m.value().decode()}\n")
    c.commit(message=m, asynchronous=False)
"""


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, out: Path) -> None:
        self.out = out
        self.proc = subprocess.Popen([sys.executable, "-c", _MEMBER, bootstrap, group, topic, str(out)])

    def lines(self) -> list[list[str]]:
        try:
            text = self.out.read_text()
        except FileNotFoundError:
            return []
        return [line.split(" ") for line in text.split("\n") if line]

    def assignment(self) -> set[int]:
        """The partitions of its last assignment (empty if revoked since)."""
        current: set[int] = set()
        for line in self.lines():
            if line[0] == "A":
                current = {int(p) for p in line[1].split(",") if p} if len(line) > 1 else set()
            elif line[0] == "R":
                current = set()
        return current

    def consumed(self) -> list[tuple[int, int, str]]:
        return [(int(x[1]), int(x[2]), x[3]) for x in self.lines() if x[0] == "M"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def _produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


def test_three_member_processes_split_partitions_and_take_over_a_killed_ones(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("events", 6)
        servers = broker.bootstrap_servers
        members = [Member(servers, "split", "events", tmp_path / f"m{i}.txt") for i in range(3)]
        try:

            def split_evenly() -> bool:
                parts = [m.assignment() for m in members]
                return all(len(p) == 2 for p in parts) and set().union(*parts) == set(range(6))

            _wait(split_evenly, 60, "three members with two partitions each")
            first = [f"a{i}" for i in range(300)]
            _produce(servers, "events", first, 6)

            def seen(ms: list[Member]) -> collections.Counter[str]:
                return collections.Counter(v for m in ms for _p, _o, v in m.consumed())

            _wait(lambda: set(first) <= set(seen(members)), 60, "the first records consumed")
            victim, survivors = members[0], members[1:]
            victim_partitions = victim.assignment()
            os.kill(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait(timeout=10)
            second = [f"b{i}" for i in range(300)]
            _produce(servers, "events", second, 6)
            # The survivors get the dead member's partitions once its session (6 s) ends.
            _wait(lambda: set(first + second) <= set(seen(members)), 90, "every record consumed")
            _wait(
                lambda: set().union(*(m.assignment() for m in survivors)) == set(range(6)),
                30,
                "the survivors to own all partitions",
            )
            counts = seen(members)
            assert set(counts) == set(first + second), "nothing but what was produced"
            twice = {v: n for v, n in counts.items() if n > 1}
            # A record is consumed twice only if the killed member processed it and died
            # before its commit: at most one per partition it owned.
            assert len(twice) <= len(victim_partitions), twice
            assert all(n == 2 for n in twice.values()), twice
            victim_seen = {v for _p, _o, v in victim.consumed()}
            assert set(twice) <= victim_seen, "duplicates come only from the killed member's window"
            # Each member read each partition in offset order.
            for m in members:
                last: dict[int, int] = {}
                for p, o, _v in m.consumed():
                    assert o > last.get(p, -1), (p, o)
                    last[p] = o
        finally:
            for m in members:
                m.stop()


# -- other clients --------------------------------------------------------------------


def test_kafka_python_group_consumer_commits_and_a_rejoin_resumes(tmp_path: Path) -> None:
    from kafka import KafkaConsumer

    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("kp", 2)
        for p in range(2):
            _append(broker.store, "kp", p, [b"%d-%d" % (p, i) for i in range(10)])

        def consumer() -> KafkaConsumer:
            c = KafkaConsumer(
                "kp",
                group_id="kpg",
                bootstrap_servers=broker.bootstrap_servers,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )
            # The topic's partitions are learnt before the first poll joins. Otherwise
            # the leader may assign before its metadata names them, and must rejoin
            # when it arrives; kafka-python 3.0.12 can drop that second join's result
            # when a poll's timeout ends while the join is in flight (the leader's
            # assignment makes need_rejoin() false before the poll collects it), so
            # the member never heartbeats, gets no partitions and expires.
            assert c.partitions_for_topic("kp") == {0, 1}
            return c

        got: list[bytes] = []
        c = consumer()
        deadline = time.monotonic() + 60
        while len(got) < 12 and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200, max_records=12 - len(got)).values():
                got.extend(r.value for r in records)
        c.commit()
        c.close()
        assert len(got) == 12
        c = consumer()
        rest: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) + len(rest) < 20 and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                rest.extend(r.value for r in records)
        c.close()
        assert sorted(got + rest) == sorted(b"%d-%d" % (p, i) for p in range(2) for i in range(10))
        assert not set(got) & set(rest), "the rejoined member resumed at the commits"


def test_aiokafka_group_consumer_commits_and_a_rejoin_resumes(tmp_path: Path) -> None:
    from aiokafka import AIOKafkaConsumer

    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("ak", 1)
        _append(broker.store, "ak", 0, [b"v%d" % i for i in range(20)])

        async def consume(n: int | None) -> list[bytes]:
            c = AIOKafkaConsumer(
                "ak",
                group_id="akg",
                bootstrap_servers=broker.bootstrap_servers,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=300,
            )
            await c.start()
            out: list[bytes] = []
            try:
                deadline = time.monotonic() + 60
                want = n if n is not None else 20
                while len(out) < want and time.monotonic() < deadline:
                    batches = await c.getmany(timeout_ms=200, max_records=want - len(out))
                    for records in batches.values():
                        out.extend(r.value for r in records)
                await c.commit()
            finally:
                await c.stop()
            return out

        first = asyncio.run(consume(8))
        rest = asyncio.run(consume(12))
        assert first == [b"v%d" % i for i in range(8)]
        assert rest == [b"v%d" % i for i in range(8, 20)]


def _static(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "static",
            "group.instance.id": "instance-1",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "auto.offset.reset": "earliest",
        }
    )


def _assigned(c: Consumer, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c.poll(0.1)
        if c.assignment():
            return sorted(tp.partition for tp in c.assignment())
    raise AssertionError("no assignment")


def test_a_restarted_static_member_keeps_the_generation(tmp_path: Path, kafka_schemas: dict) -> None:
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("st", 2)
        c = _static(broker.bootstrap_servers)
        c.subscribe(["st"])
        assert _assigned(c) == [0, 1]
        _wait(lambda: bool(_group_records(broker.store, kafka_schemas, "static")), 10, "a group record")
        before = _group_records(broker.store, kafka_schemas, "static")[-1]
        c.close()  # a static member does not leave: its instance id keeps its place
        c = _static(broker.bootstrap_servers)
        c.subscribe(["st"])
        assert _assigned(c) == [0, 1]
        after = _group_records(broker.store, kafka_schemas, "static")[-1]
        c.close()
    assert after.generation == before.generation, "no rebalance"
    assert [m.group_instance_id for m in after.members] == ["instance-1"]
    assert after.members[0].member_id != before.members[0].member_id, "the new incarnation's id"
    assert after.members[0].assignment == before.members[0].assignment


def test_offsets_committed_over_the_network_survive_a_broker_restart(
    tmp_path: Path, kafka_schemas: dict
) -> None:
    path = tmp_path / "store"
    conf = {
        "group.id": "restart",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
    }
    with seglog.Broker(path, **GROUP_KEYS) as broker:
        broker.store.create_topic("rt", 1)
        _append(broker.store, "rt", 0, [b"r%d" % i for i in range(10)])
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, **conf})
        c.subscribe(["rt"])
        seen = []
        deadline = time.monotonic() + 60
        while len(seen) < 4 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                seen.append(m.value())
                c.commit(message=m, asynchronous=False)
        c.close()
        assert seen == [b"r%d" % i for i in range(4)]
    with seglog.Broker(path, **GROUP_KEYS) as broker:
        c = Consumer({"bootstrap.servers": broker.bootstrap_servers, **conf})
        committed = c.committed([TopicPartition("rt", 0)], timeout=30)
        assert committed[0].offset == 4
        c.subscribe(["rt"])
        deadline = time.monotonic() + 60
        m = None
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                break
        c.close()
        assert m is not None and m.offset() == 4
        # An embedded reader of the store sees the same commit.
        assert seglog._groups.load_committed(broker.store._native, "restart")[("rt", 0)][0] == 4
        # The records are Kafka's: they parse with Kafka's schemas.
        records = _records(broker.store, kafka_schemas)
    offsets = [(k.group, k.topic, k.partition, v.offset) for kind, k, v in records if kind == "offset" and v]
    assert ("restart", "rt", 0, 4) in offsets
    groups = [v for kind, k, v in records if kind == "group" and k.group == "restart" and v is not None]
    assert groups and groups[-1].protocol_type == "consumer"
    assert {g.protocol for g in groups if g.members} <= {"range", "roundrobin"}


# -- bad input --------------------------------------------------------------------------


def test_bad_group_requests_get_kafkas_errors_and_the_broker_stays_up(tmp_path: Path) -> None:
    from kafka.protocol.consumer.group import (
        HeartbeatRequest,
        HeartbeatResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        SyncGroupRequest,
        SyncGroupResponse,
    )
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        addr = broker.bootstrap_servers
        broker.store.create_topic("bad", 1)
        assert _join(addr, "g", []).error_code == 23, "no protocols: INCONSISTENT_GROUP_PROTOCOL"
        assert _join(addr, "g", [("range", b"x" * (2 << 20))]).error_code == 42, "a huge blob"
        assert _join(addr, "x" * 256, [("range", b"")]).error_code == 24, "INVALID_GROUP_ID"
        assert _join(addr, "", [("range", b"")]).error_code == 24
        assert _join(addr, "g", [("range", b"")], session_timeout_ms=10).error_code == 26
        assert _join(addr, "g", [("range", b"")], member_id="nobody").error_code == 25
        # KIP-394: a v4+ first join gets its id with MEMBER_ID_REQUIRED.
        first = _join(addr, "g", [("range", b"m")])
        assert first.error_code == 79 and first.member_id
        joined = _join(addr, "g", [("range", b"m")], member_id=first.member_id)
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first.member_id)
        assert [m.member_id for m in joined.members] == [first.member_id]

        def heartbeat(member: str, generation: int) -> int:
            r = HeartbeatRequest(
                version=3, group_id="g", generation_id=generation, member_id=member, group_instance_id=None
            )
            return _call(addr, r, HeartbeatResponse, 3).error_code

        assert heartbeat(first.member_id, 1) == 0
        assert heartbeat(first.member_id, 9) == 22, "ILLEGAL_GENERATION"
        assert heartbeat("stranger", 1) == 25, "UNKNOWN_MEMBER_ID"
        sync = SyncGroupRequest(
            version=3,
            group_id="g",
            generation_id=7,
            member_id=first.member_id,
            group_instance_id=None,
            assignments=[],
        )
        assert _call(addr, sync, SyncGroupResponse, 3).error_code == 22
        commit = OffsetCommitRequest(
            version=7,
            group_id="elsewhere",
            generation_id_or_member_epoch=3,
            member_id="m",
            group_instance_id=None,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    version=7,
                    name="bad",
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            version=7, partition_index=0, committed_offset=1, committed_metadata=""
                        )
                    ],
                )
            ],
        )
        answer = _call(addr, commit, OffsetCommitResponse, 7)
        assert answer.topics[0].partitions[0].error_code == 22, "a generation of an unknown group"
        txn = FindCoordinatorRequest(version=2, key="t", key_type=1)
        assert _call(addr, txn, FindCoordinatorResponse, 2).error_code == 15
        group = FindCoordinatorRequest(version=2, key="g", key_type=0)
        found = _call(addr, group, FindCoordinatorResponse, 2)
        assert (found.error_code, found.node_id) == (0, broker.node_id)
        # Still serving.
        _produce(addr, "bad", ["after"], 1)
        assert broker.store.read("bad", 0, 0, max_records=1)[0].value == b"after"


def test_group_admin_apis_list_describe_and_delete(tmp_path: Path) -> None:
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.admin import KafkaAdminClient

    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("adm", 1)
        _append(broker.store, "adm", 0, [b"x"])
        c = Consumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "active",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
            }
        )
        c.subscribe(["adm"])
        _assigned(c)
        c.commit(offsets=[TopicPartition("adm", 0, 1)], asynchronous=False)
        c2 = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "idle"})
        c2.commit(offsets=[TopicPartition("adm", 0, 1)], asynchronous=False)
        c2.close()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            listed = {g["group_id"]: g for g in admin.list_groups()}
            assert {"active", "idle"} <= set(listed), listed
            assert listed["active"]["protocol_type"] == "consumer"
            described = admin.describe_groups(["active", "idle", "unknown"])
            assert described["active"]["group_state"] == "Stable", described
            assert len(described["active"]["members"]) == 1
            assert described["idle"]["group_state"] == "Empty"
            assert described["unknown"]["group_state"] == "Dead"
            offsets = admin.list_group_offsets("idle")["idle"]
            assert [(tp.topic, tp.partition, o.offset) for tp, o in offsets.items()] == [("adm", 0, 1)]
            refused = admin.delete_group_offsets("active", [KafkaTopicPartition("adm", 0)])
            assert [e.__name__ for e in refused.values()] == ["GroupSubscribedToTopicError"]
            assert admin.delete_groups(["idle", "active", "unknown"]) == {
                "idle": "OK",
                "active": "NonEmptyGroupError",
                "unknown": "GroupIdNotFoundError",
            }
            assert "idle" not in {g["group_id"] for g in admin.list_groups()}
        finally:
            admin.close()
            c.close()
