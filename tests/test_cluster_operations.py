"""Operating a cluster as Kafka's operators do: a rolling restart with controlled shutdown
under load (SIGTERM hands every leadership over before the broker leaves), checked on
ZooKeeper's znodes (the order of the writes), on what the producers were told, and on the
logs; and consumers reading from the replica in their own rack (KIP-392)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from cluster_helpers import (
    BackgroundProducer,
    Zk,
    admin,
    check_acknowledged,
    consume_all,
    next_offsets,
    produce_and_report,
    producer,
    wait_for,
)
from seglog.testing import LocalCluster
from test_replication import BROKERS, FAST, TOPIC, MakeCluster, topic_with_full_isr, up

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


def state_path(p: int) -> str:
    return f"/brokers/topics/{TOPIC}/partitions/{p}/state"


def log_has(cluster: LocalCluster, n: int, since: int, event: str) -> bool:
    with open(cluster.log_path(n), "rb") as f:
        f.seek(since)
        return f"event={event} ".encode() in f.read()


def test_a_rolling_restart_with_controlled_shutdown_fails_no_send(
    local_cluster: MakeCluster,
    zk_of: Callable[[LocalCluster], Zk],
    record_property: Callable[[str, object], None],
) -> None:
    """Each broker in turn gets SIGTERM under acks=all idempotent load, is started again
    and rejoins every ISR before the next. Before a stopping broker's registration goes,
    the controller has moved every leadership it held and taken it out of every ISR (the
    state znodes were written before /brokers/ids changed); no send fails; every
    acknowledged record is read back at its offset."""
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, partitions=6, min_insync_replicas="2")
    writer = BackgroundProducer(
        cluster.bootstrap_servers,
        TOPIC,
        len(parts),
        rate=300,
        enable_idempotence=True,
        message_timeout_ms=60000,
    )
    try:
        wait_for("first writes acknowledged", lambda: writer.acked_since(0.0), 30)
        started = time.monotonic()
        for n in sorted(BROKERS):
            led = [p for p in parts if zk.leader(TOPIC, p) == n]
            log_start = cluster.log_path(n).stat().st_size
            assert cluster.terminate(n) == 0
            assert log_has(cluster, n, log_start, "controlled_shutdown_done"), (
                f"broker {n}: no controlled shutdown"
            )
            _, ids = zk.client.get("/brokers/ids")
            assert n not in zk.broker_ids()
            for p in parts:
                data, stat = zk.client.get(state_path(p))
                state = json.loads(data)
                assert state["leader"] != n and n not in state["isr"], (n, p, state)
                # Every partition was left before the registration went: its last state
                # write precedes the last change of /brokers/ids (broker n's leaving).
                assert stat.mzxid < ids.pzxid, (
                    f"broker {n} left /brokers/ids before {TOPIC}-{p} was handed over: {state}"
                )
            assert led, f"broker {n} led nothing to hand over"
            restart = time.monotonic()
            cluster.start(n)
            zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=60)
            wait_for(
                f"writes acknowledged after broker {n} returned", lambda t=restart: writer.acked_since(t), 30
            )
        stall, partition = writer.longest_stall(started)
    finally:
        writer.stop()
    record_property("longest_produce_stall_ms", round(stall * 1000))
    print(f"longest produce stall in the rolling restart: {stall * 1000:.0f} ms ({TOPIC}-{partition})")
    assert not writer.failed, writer.failed[:5]
    consumed = consume_all(
        cluster.bootstrap_servers, TOPIC, parts, timeout=120, settle=next_offsets(writer.acked)
    )
    verdict = check_acknowledged(writer.acked, consumed)
    assert verdict.ok, verdict


def test_a_consumer_reads_from_the_replica_in_its_rack(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """KIP-392 with replica.selector.class = Kafka's RackAwareReplicaSelector: a consumer
    with client.rack r2 is sent by the leader (broker 1, rack r1) to broker 2, the in-sync
    replica in r2, and reads every record from it; a consumer naming no rack reads from
    the leader. Measured by what each consumer received from each broker."""
    selector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    cluster, zk = up(local_cluster, zk_of, config={**FAST, "replica.selector.class": selector})
    topic = NewTopic(
        TOPIC,
        num_partitions=1,
        replication_factor=-1,
        replica_assignment=[[1, 2, 3]],
        config={"min.insync.replicas": "2"},
    )
    creator = admin(cluster.bootstrap_servers)
    creator.create_topics([topic])[TOPIC].result(30)
    zk.wait_until_isr(TOPIC, [0], BROKERS)
    payload = 300 * 1024
    values = [(0, f"{i:06d}".encode() + b"x" * 1018) for i in range(300)]
    acked, failed = produce_and_report(producer(cluster.bootstrap_servers), TOPIC, values)
    assert not failed and len(acked) == 300, failed[:3]
    assert zk.leader(TOPIC, 0) == 1

    def read_all(rack: str | None) -> dict[int, int]:
        """Reads the partition from the start; bytes received from each broker."""
        received: dict[int, int] = {}

        def stats(text: str) -> None:
            for b in json.loads(text)["brokers"].values():
                if b["nodeid"] >= 0:
                    received[b["nodeid"]] = max(received.get(b["nodeid"], 0), b["rxbytes"])

        conf = {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"rack-{rack}",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": stats,
            **({"client.rack": rack} if rack else {}),
        }
        c = Consumer(conf)
        try:
            c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            got: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(got) < len(values) and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(bytes(m.value() or b""))
            assert got == [v for _, v in values], f"read {len(got)} of {len(values)} records"
            # One more statistics round, so the last fetches are counted.
            end = time.monotonic() + 1
            while time.monotonic() < end:
                c.poll(0.1)
        finally:
            c.close()
        return received

    in_r2 = read_all("r2")
    assert in_r2.get(2, 0) > payload and in_r2.get(1, 0) < payload / 10, in_r2
    anywhere = read_all(None)
    assert anywhere.get(1, 0) > payload and anywhere.get(2, 0) < payload / 10, anywhere


def test_a_reassignment_written_to_the_admin_znode_is_carried_out_and_the_znode_deleted(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """The way before AlterPartitionReassignments (ZooKeeper-based tools and operators):
    `/admin/reassign_partitions` names t-0's new replicas; the controller moves them,
    broker 3 catches up into the ISR, broker 1 leaves it, and the znode goes once done."""
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    topic = NewTopic(TOPIC, num_partitions=1, replication_factor=-1, replica_assignment=[[1, 2]])
    creator = admin(cluster.bootstrap_servers)
    creator.create_topics([topic])[TOPIC].result(30)
    zk.wait_until_isr(TOPIC, [0], {1, 2})
    values = [(0, f"{i}".encode()) for i in range(200)]
    acked, failed = produce_and_report(producer(cluster.bootstrap_servers), TOPIC, values)
    assert not failed and len(acked) == 200, failed[:3]
    plan = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [2, 3]}]}
    zk.client.create("/admin/reassign_partitions", json.dumps(plan).encode(), makepath=True)
    wait_for(
        "the admin znode deleted once the move is done",
        lambda: not zk.exists("/admin/reassign_partitions"),
        60,
    )
    assert zk.assignment(TOPIC) == {0: [2, 3]}
    zk.wait_until_isr(TOPIC, [0], {2, 3})
    assert set(zk.isr(TOPIC, 0)) == {2, 3}
    consumed = consume_all(cluster.bootstrap_servers, TOPIC, [0], settle=next_offsets(acked))
    assert check_acknowledged(acked, consumed).ok
