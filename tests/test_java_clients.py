"""Kafka's own Java clients (kafka-clients, each version in java/versions) against a
seglog broker: KafkaProducer with idempotence, every codec and headers; KafkaConsumer in
groups with each assignor; Admin through a tour of its calls. The Java side prints what
it sent, read and was answered (java/src/main/java/seglog/interop); these tests check it
against the store."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

import seglog
from cluster_helpers import Ack, Zk, check_acknowledged, consume_all, next_offsets, wait_for
from java_helpers import VERSIONS, Running, done, run
from kafka_reference import KafkaBroker
from seglog.testing import LocalCluster, ZooKeeper
from test_replication import FAST, SESSION_MS, TOPIC, MakeCluster, topic_with_full_isr, up

pytestmark = pytest.mark.java

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[seglog.Store, seglog.Broker]]:
    store = seglog.open(tmp_path / "store", num_partitions=3)
    with store, seglog.Broker(store) as broker:
        yield store, broker


def batches(store_path: Path, topic: str, partition: int) -> list[seglog._native.LogBatch]:
    found = []
    for log in sorted((store_path / f"{topic}-{partition}").glob("*.log")):
        fd = os.open(log, os.O_RDONLY)
        try:
            found += [b for b in seglog._native.walk_log(fd) if isinstance(b, seglog._native.LogBatch)]
        finally:
            os.close(fd)
    return found


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("codec", list(CODECS))
def test_producer_every_codec_keys_and_headers_land_as_seglog_would_put_them(
    served: tuple[seglog.Store, seglog.Broker], version: str, codec: str
) -> None:
    store, broker = served
    store.create_topic("j", partitions=3)
    out = run(
        version,
        "produce",
        bootstrap=broker.bootstrap_servers,
        topic="j",
        count=300,
        client_compression_type=codec,
        client_linger_ms=5,
    )
    *acks, closing = out
    assert closing == {"done": True, "count": 300}
    assert [a["i"] for a in acks] == list(range(300))
    assert not [a for a in acks if "error" in a], acks[:3]
    for a in acks:
        assert a["partition"] == store.partition_for_key("j", f"key-{a['i']}".encode()), a
    by_partition: dict[int, list[dict]] = {}
    for a in acks:
        by_partition.setdefault(a["partition"], []).append(a)
    for p, sent in by_partition.items():
        assert sorted(a["offset"] for a in sent) == list(range(len(sent)))
        stored = {r.offset: r for r in store.read("j", p, 0, max_bytes=1 << 24)}
        for a in sent:
            r = stored[a["offset"]]
            assert (r.key, r.value) == (f"key-{a['i']}".encode(), f"value-{a['i']}".encode())
            assert r.headers == (("i", str(a["i"]).encode()),)
            assert r.timestamp == a["timestamp"]
        written = batches(Path(store.path), "j", p)
        assert {b.attributes & 0x7 for b in written} == {CODECS[codec]}
        # Idempotence is the Java producer's default: every batch carries its producer id.
        assert all(b.producer_id >= 0 for b in written)


@pytest.mark.parametrize("version", VERSIONS)
def test_producer_acks_1_without_idempotence_and_records_near_the_size_limit(
    served: tuple[seglog.Store, seglog.Broker], version: str
) -> None:
    store, broker = served
    store.create_topic("big", partitions=1, config={"max.message.bytes": "200000"})
    common = dict(
        bootstrap=broker.bootstrap_servers,
        topic="big",
        count=3,
        headers="false",
        client_acks="1",
        client_enable_idempotence="false",
        client_max_request_size=4_000_000,
        client_batch_size=1,
    )
    *acks, _ = run(version, "produce", size=199_000, **common)
    assert [a["offset"] for a in acks] == [0, 1, 2]
    assert all(b.producer_id == -1 for b in batches(Path(store.path), "big", 0))
    assert [len(r.value) for r in store.read("big", 0, 0, max_bytes=1 << 24)] == [199_000] * 3
    *refused, _ = run(version, "produce", size=300_000, **common)
    assert {a.get("error") for a in refused} == {"RecordTooLargeException"}, refused
    assert store.read("big", 0, 3) == []


ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "roundrobin": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}


def append_round(store: seglog.Store, topic: str, partitions: int, round_: int, n: int) -> None:
    for p in range(partitions):
        store.append(topic, p, [(f"k{round_}".encode(), f"{round_}-{p}-{i}".encode()) for i in range(n)])


def covers(members: list[Running], partitions: int) -> bool:
    """The members' last assignments split the partitions between them, each one once."""
    assigned = [m.assignment() or [] for m in members]
    owned = sorted(p for a in assigned for p in a)
    return all(assigned) and owned == list(range(partitions))


def consumed(members: list[Running]) -> list[tuple[int, int]]:
    return [(r["partition"], r["offset"]) for m in members for r in m.records()]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("assignor", list(ASSIGNORS))
def test_consumer_group_shares_partitions_and_takes_over_on_leave_and_death(
    tmp_path: Path, version: str, assignor: str
) -> None:
    store = seglog.open(tmp_path / "store")
    config = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "2000"}
    with store, seglog.Broker(store, config=config) as broker:
        store.create_topic("g", partitions=6)
        member = dict(
            bootstrap=broker.bootstrap_servers,
            topic="g",
            group=f"g-{assignor}",
            client_partition_assignment_strategy=ASSIGNORS[assignor],
            client_session_timeout_ms=4000,
            client_heartbeat_interval_ms=300,
        )
        members = [Running(version, "consume", stop=tmp_path / f"stop{i}", **member) for i in range(3)]
        try:
            wait_for("three members sharing the six partitions", lambda: covers(members, 6), 60)
            append_round(store, "g", 6, 0, 50)
            wait_for("every record read", lambda: len(consumed(members)) >= 300, 60)
            for m in members:
                owned = set(m.assignment() or [])
                assert {r["partition"] for r in m.records()} <= owned
            # One leaves: it commits what it read and the other two take its partitions.
            (tmp_path / "stop0").touch()
            members[0].finish()
            wait_for("two members sharing the six partitions", lambda: covers(members[1:], 6), 60)
            append_round(store, "g", 6, 1, 50)
            wait_for("the second round read", lambda: len(set(consumed(members))) >= 600, 60)
            assert len(consumed(members)) == 600, "a record was read twice after a clean leave"
            # One dies: after its session times out the last member takes everything. What
            # the dead member read since its last commit may be read again (at least once).
            dead = set(members[1].assignment() or [])
            members[1].kill()
            wait_for("the last member owning all six", lambda: covers(members[2:], 6), 60)
            append_round(store, "g", 6, 2, 50)
            wait_for("the third round read", lambda: len(set(consumed(members))) >= 900, 60)
            seen = consumed(members)
            twice = {pr for pr in seen if seen.count(pr) > 1}
            assert {p for p, _ in twice} <= dead
            (tmp_path / "stop2").touch()
            last = done(members[2].finish())
        finally:
            for m in members:
                if m.proc.poll() is None:
                    m.kill()
        assert last["assignment"] == list(range(6))
        committed = sorted((c["partition"], c["offset"]) for c in last["committed"])
        assert committed == [(p, 150) for p in range(6)]
        # A new member of the group starts from the committed offsets.
        append_round(store, "g", 6, 3, 5)
        lines = run(version, "consume", count=30, commit="async", **member)
        records = [line for line in lines if "value" in line]
        assert sorted((r["partition"], r["offset"]) for r in records) == [
            (p, o) for p in range(6) for o in range(150, 155)
        ]
        assert sorted((c["partition"], c["offset"]) for c in done(lines)["committed"]) == [
            (p, 155) for p in range(6)
        ]
        # The Java consumer fetched in sessions (KIP-227): after the first, its requests
        # named only the partitions whose position moved, and what it read is whole.
        counts = dict(re.findall(r"^seglog_(\w+)_total (\d+)$", broker.metrics_text(), re.M))
        assert int(counts["fetch_sessions_opened"]) >= 4, counts
        assert int(counts["incremental_fetches"]) > int(counts["fetch_sessions_opened"]), counts


@pytest.mark.parametrize("version", VERSIONS)
def test_admin_calls_one_after_another(served: tuple[seglog.Store, seglog.Broker], version: str) -> None:
    _, broker = served
    tour = run(version, "admin", bootstrap=broker.bootstrap_servers, topic="a")
    steps = {line["op"]: line for line in tour}
    failed = {op: s for op, s in steps.items() if "error" in s}
    assert not failed, failed
    assert "a" in steps["listTopics"]["names"]
    assert steps["describeTopics"] == {
        "op": "describeTopics",
        "internal": False,
        "partitions": [{"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in range(2)],
    }
    cluster = steps["describeCluster"]
    assert (cluster["nodes"], cluster["controller"]) == ([0], 0) and cluster["clusterId"]
    entries = steps["describeConfigs"]["entries"]
    assert entries["retention.ms"]["value"] == "3600000"
    assert entries["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["cleanup.policy"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["segment.bytes"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    altered = steps["incrementalAlterConfigs"]["entries"]
    assert altered["retention.ms"] == {**entries["retention.ms"], "value": "7200000"}
    assert altered["cleanup.policy"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    assert [p["partition"] for p in steps["createPartitions"]["partitions"]] == [0, 1, 2]
    offsets = steps["listOffsets"]
    assert offsets["earliest"]["offset"] == 0
    assert offsets["latest"]["offset"] == 10
    assert (offsets["forTimestamp1005"]["offset"], offsets["forTimestamp1005"]["timestamp"]) == (5, 1005)
    assert offsets["forTimestamp5000"]["offset"] == -1
    assert (offsets["maxTimestamp"]["offset"], offsets["maxTimestamp"]["timestamp"]) == (8, 1009)
    deleted = steps["deleteRecords"]
    assert deleted["lowWatermark"] == 3
    assert deleted["after"]["earliest"]["offset"] == 3
    assert "interop-admin" in steps["listConsumerGroups"]["groups"]
    described = steps["describeConsumerGroups"]
    assert (described["state"], described["members"], described["coordinator"]) == ("Empty", 0, 0)
    assert steps["listConsumerGroupOffsets"]["offsets"] == {
        "a-0": {"offset": 5, "metadata": "five"},
        "a-1": {"offset": 0, "metadata": ""},
    }
    assert steps["deleteConsumerGroupOffsets"]["offsets"] == {"a-0": {"offset": 5, "metadata": "five"}}
    assert "interop-admin" not in steps["deleteConsumerGroups"]["groups"]
    [logdir] = steps["describeLogDirs"]["dirs"]
    assert logdir["broker"] == 0 and logdir["error"] is None
    assert set(logdir["sizes"]) == {"a-0", "a-1", "a-2"} and logdir["sizes"]["a-0"] > 0
    # One broker leads every partition, its only replica: no election is ever needed.
    needed_none = "ElectionNotNeededException"
    assert steps["electLeaders"]["preferred"] == {f"a-{p}": needed_none for p in range(3)}
    assert steps["electLeaders"]["unclean"] == {"a-0": needed_none}
    assert steps["electLeaders"]["missing"] == {"a-99": "UnknownTopicOrPartitionException"}
    assert steps["electLeaders"]["everyPartition"] == {}
    assert "a" not in steps["deleteTopics"]["names"]


def acknowledged(lines: list[dict]) -> list[Ack]:
    """What a streaming produce scenario's callbacks were told (values "value-<i>")."""
    return [Ack(a["partition"], a["offset"], f"value-{a['i']}".encode()) for a in lines if "offset" in a]


@pytest.mark.cluster
@pytest.mark.parametrize("version", VERSIONS)
def test_producer_loses_nothing_acknowledged_when_a_leader_is_killed(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], version: str
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    writer = Running(
        version,
        "produce",
        bootstrap=cluster.bootstrap_servers,
        topic=TOPIC,
        count=5000,
        rate=250,
        stream="true",
        headers="false",
        client_acks="all",
        client_linger_ms=5,
        client_delivery_timeout_ms=120_000,
    )
    try:
        writer.wait_for("first writes acknowledged", lambda lines: len(acknowledged(lines)) >= 250)
        victim = zk.leader(TOPIC, 0)
        cluster.kill(victim)
        zk.wait_until_gone(victim, timeout=SESSION_MS / 1000 + 20)
        before = len(acknowledged(writer.lines))
        writer.wait_for(
            "partition 0 written again after its leader died",
            lambda lines: any(a.partition == 0 for a in acknowledged(lines)[before:]),
            timeout=60,
        )
        cluster.start(victim)
        lines = writer.finish(timeout=120)
    finally:
        if writer.proc.poll() is None:
            writer.kill()
    assert done(lines) == {"done": True, "count": 5000}
    failed = [line for line in lines if "error" in line]
    acked = acknowledged(lines)
    assert not failed and len(acked) == 5000, failed[:5]
    consumed = consume_all(cluster.bootstrap_servers, TOPIC, parts, timeout=120, settle=next_offsets(acked))
    verdict = check_acknowledged(acked, consumed)
    assert verdict.ok and not verdict.without_offset, f"killed broker {victim}: {verdict}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_consumer_offsets_for_times_beginning_end_and_seek(
    served: tuple[seglog.Store, seglog.Broker], version: str, isolation: str
) -> None:
    # read_committed sees everything: no transactions are served, so the last stable
    # offset is the high watermark.
    store, broker = served
    store.create_topic("s", partitions=1)
    store.append("s", 0, [(None, f"v{i}".encode(), [], 1_000 + i) for i in range(10)])
    store.delete_records("s", 0, 2)
    bounds, end = run(
        version,
        "positions",
        bootstrap=broker.bootstrap_servers,
        topic="s",
        time=1005,
        **{"from": 6},
        count=3,
        client_isolation_level=isolation,
    )
    assert bounds == {"beginning": 2, "end": 10, "forTime": {"offset": 5, "timestamp": 1005}}
    assert end["read"][:3] == [6, 7, 8] and end["read"] == list(range(6, 6 + len(end["read"])))
    assert end["positions"] == {"afterSeekToBeginning": 2, "afterSeekToEnd": 10}


def admin_tour(version: str, bootstrap: str) -> dict[str, dict]:
    return {line["op"]: line for line in run(version, "admin", bootstrap=bootstrap, topic="a")}


@pytest.mark.parametrize("version", VERSIONS)
def test_admin_tour_answers_as_kafka_does(
    served: tuple[seglog.Store, seglog.Broker], zookeeper: ZooKeeper, tmp_path: Path, version: str
) -> None:
    _, broker = served
    with KafkaBroker(tmp_path / "kafka", zookeeper.connect_string) as kafka:
        theirs = admin_tour(version, kafka.bootstrap_servers)
    ours = admin_tour(version, broker.bootstrap_servers)
    assert list(ours) == list(theirs)
    for tour in (ours, theirs):
        tour["describeCluster"].pop("clusterId")
        for d in tour["describeLogDirs"]["dirs"]:
            d.pop("path")
    configs = {}
    for op in ("describeConfigs", "incrementalAlterConfigs"):
        configs[op] = (ours[op].pop("entries"), theirs[op].pop("entries"))
    differ = {op: (ours[op], theirs[op]) for op in ours if ours[op] != theirs[op]}
    assert not differ, differ
    for op, (mine, kafkas) in configs.items():
        assert set(mine) <= set(kafkas), f"{op}: keys Kafka does not have: {set(mine) - set(kafkas)}"
        unlike = {k: (v, kafkas[k]) for k, v in mine.items() if v != kafkas[k]}
        assert not unlike, f"{op}: {unlike}"


def topics_of(address: str | None) -> set[str]:
    """The topics one broker's Metadata names."""
    return set(AdminClient({"bootstrap.servers": address}).list_topics(timeout=5).topics)


@pytest.mark.cluster
@pytest.mark.parametrize("version", VERSIONS)
def test_admin_calls_on_a_three_broker_cluster(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], version: str
) -> None:
    cluster, _ = up(local_cluster, zk_of, config=FAST)
    steps = {
        line["op"]: line
        for line in run(version, "admin", bootstrap=cluster.bootstrap_servers, topic="a", replicas=3)
    }
    failed = {op: s for op, s in steps.items() if "error" in s}
    assert not failed, failed
    for created in (steps["describeTopics"], steps["createPartitions"]):
        for p in created["partitions"]:
            assert sorted(p["replicas"]) == [1, 2, 3] and p["leader"] in (1, 2, 3), p
    assert len(steps["createPartitions"]["partitions"]) == 3
    assert steps["describeCluster"]["nodes"] == [1, 2, 3]
    assert steps["describeConfigs"]["entries"]["retention.ms"]["value"] == "3600000"
    assert steps["incrementalAlterConfigs"]["entries"]["retention.ms"]["value"] == "7200000"
    assert steps["deleteRecords"]["lowWatermark"] == 3
    assert steps["listConsumerGroupOffsets"]["offsets"]["a-0"] == {"offset": 5, "metadata": "five"}
    dirs = steps["describeLogDirs"]["dirs"]
    assert sorted(d["broker"] for d in dirs) == [1, 2, 3]
    for d in dirs:
        assert set(d["sizes"]) == {"a-0", "a-1", "a-2"}, d
    # Fresh partitions are led by their preferred replicas: no election needed.
    elected = steps["electLeaders"]
    assert elected["preferred"] == {f"a-{p}": "ElectionNotNeededException" for p in range(3)}
    assert elected["unclean"] == {"a-0": "ElectionNotNeededException"}
    assert elected["missing"] == {"a-99": "UnknownTopicOrPartitionException"}
    assert elected["everyPartition"] == {}
    # The broker that took the delete answers once its own view has no "a"; the others
    # drop it as ZooKeeper's watch reaches them (as a Kafka broker's metadata cache
    # follows the controller's UpdateMetadata), so every broker is asked until it has.
    for b in cluster.broker_ids:
        wait_for(
            f"broker {b} to drop topic a", lambda b=b: "a" not in topics_of(cluster.address(b)), timeout=30
        )


@pytest.mark.cluster
@pytest.mark.parametrize("version", VERSIONS)
def test_consumer_group_on_a_three_broker_cluster(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], version: str, tmp_path: Path
) -> None:
    cluster, zk = up(local_cluster, zk_of, config={**FAST, "group.initial.rebalance.delay.ms": 0})
    parts = topic_with_full_isr(cluster, zk, partitions=4)
    bootstrap = cluster.bootstrap_servers
    member = dict(
        bootstrap=bootstrap,
        topic=TOPIC,
        group="on-a-cluster",
        client_partition_assignment_strategy=ASSIGNORS["cooperative-sticky"],
        client_session_timeout_ms=6000,
        client_heartbeat_interval_ms=500,
    )

    def produce() -> None:
        out = run(version, "produce", bootstrap=bootstrap, topic=TOPIC, count=200, client_acks="all")
        assert done(out) == {"done": True, "count": 200} and not [a for a in out if "error" in a]

    members = [Running(version, "consume", stop=tmp_path / f"stop{i}", **member) for i in range(2)]
    try:
        wait_for("two members sharing the four partitions", lambda: covers(members, 4), 60)
        produce()
        wait_for("every record read", lambda: len(set(consumed(members))) >= 200, 60)
        (tmp_path / "stop0").touch()
        members[0].finish()
        wait_for("the other member owning all four", lambda: covers(members[1:], 4), 60)
        produce()
        wait_for("the second round read", lambda: len(set(consumed(members))) >= 400, 60)
        assert len(consumed(members)) == 400, "a record was read twice after a clean leave"
        (tmp_path / "stop1").touch()
        last = done(members[1].finish())
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.kill()
    ends = {p: sum(1 for q, _ in consumed(members) if q == p) for p in parts}
    assert sorted((c["partition"], c["offset"]) for c in last["committed"]) == sorted(ends.items())
    assert sum(ends.values()) == 400
