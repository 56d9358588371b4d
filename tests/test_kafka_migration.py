"""A rolling migration under load: a three-broker Kafka 3.9 cluster on ZooKeeper is
replaced by seglog one broker at a time, and back again, while an idempotent acks=all
producer and a consumer group run throughout.

Each step stops one broker cleanly (a controlled shutdown through the controller), starts
the other kind on its ``log.dirs`` as the same broker id on the same port, and waits
until every partition of the topic and of ``__consumer_offsets`` is led by its preferred
replica with all three in its ISR: in the mixed phases seglog leaders have Kafka
followers and Kafka leaders seglog followers. The Kafka brokers run at
``inter.broker.protocol.version=2.6``, the protocol a mixed cluster speaks (see
docs/replication.md); while any Kafka broker is live, a Kafka broker is the controller.

At the end nothing acknowledged is missing or written twice, the consumer never read
back or skipped within an assignment, the group's committed offsets never went back, and
``kafka-dump-log`` and ``seglog dump-log`` agree on the segments written by both.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from cluster_helpers import (
    BackgroundConsumer,
    BackgroundProducer,
    Zk,
    admin,
    check_acknowledged,
    check_reads,
    consume_all,
    create_topic,
    next_offsets,
    wait_for,
)
from cluster_helpers import producer as plain_producer
from kafka_reference import REFERENCE_VERSION, KafkaBroker
from seglog.testing import ZooKeeper
from test_kafka_interchange import Serve
from test_kafka_tools import dumps_agree

pytestmark = pytest.mark.java

BROKERS = (1, 2, 3)
TOPIC = "t"
PARTITIONS = 3
GROUP = "migrating"
OFFSETS = "__consumer_offsets"
# Both kinds of broker: RF 3 everywhere, min.insync 2, and the preferred leaders taken
# back within seconds (so that each mixed phase has leaders of both kinds).
COMMON = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "leader.imbalance.check.interval.seconds": "2",
    "zookeeper.session.timeout.ms": "6000",
}
# Kafka moves leaders back only past an imbalance ratio; seglog whenever one is off.
KAFKA_ONLY = {"leader.imbalance.per.broker.percentage": "0"}


def kafka(tmp_path: Path, zookeeper: ZooKeeper, n: int) -> KafkaBroker:
    config = {k.replace(".", "_"): v for k, v in (COMMON | KAFKA_ONLY).items()}
    return KafkaBroker(
        tmp_path / f"b{n}",
        zookeeper.connect_string,
        broker_id=n,
        chroot="migration",
        log=True,
        inter_broker_protocol_version="2.6",
        **config,
    )


def seglog_broker(k: KafkaBroker) -> Serve:
    """seglog as broker ``k.broker_id`` on Kafka's log directory, znodes and port."""
    config = [f"{key}={value}" for key, value in COMMON.items()]
    return Serve(k.log_dir, k.zookeeper_connect, k.port, *config, node_id=k.broker_id)


def settled(zk: Zk, phase: str) -> dict[str, list[int]]:
    """Waits until every partition of the topic and of the offsets topic is led by its
    preferred replica with the three brokers in its ISR; returns the leaders."""

    def led() -> dict[str, list[int]] | None:
        leaders: dict[str, list[int]] = {}
        for topic in (TOPIC, OFFSETS):
            assignment = zk.assignment(topic)
            for p in range(PARTITIONS):
                s = zk.state(topic, p)
                if s["leader"] != assignment[p][0] or set(s["isr"]) != set(BROKERS):
                    return None
            leaders[topic] = [zk.leader(topic, p) for p in range(PARTITIONS)]
        return leaders

    return wait_for(f"{phase}: every partition led by its preferred replica, ISR full", led, 120)


def committed(bootstrap: str) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch, by a client that does not join)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        answer = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in answer}


def topic_deleted_through_seglog(zk: Zk, brokers: dict[int, KafkaBroker], seglog: Serve) -> None:
    """DeleteTopics sent to a seglog broker in a mixed cluster is carried out by the Kafka
    controller: every replica's log goes, the Kafka brokers' too."""
    bootstrap = ",".join(b.bootstrap_servers for b in brokers.values())
    create_topic(bootstrap, "doomed", 2, 3)
    p = plain_producer(bootstrap)
    for i in range(20):
        p.produce("doomed", value=str(i).encode(), partition=i % 2)
    assert p.flush(30) == 0
    client = admin(f"127.0.0.1:{seglog.port}")
    [future] = client.delete_topics(["doomed"], operation_timeout=30).values()
    future.result()

    def gone() -> bool:
        dirs = [d for b in brokers.values() for d in b.log_dir.glob("doomed-*") if "-delete" not in d.name]
        return not zk.exists("/brokers/topics/doomed") and not dirs

    wait_for("the deleted topic's logs gone from every broker", gone, 60)


def test_a_kafka_cluster_is_replaced_by_seglog_one_broker_at_a_time_and_back(
    tmp_path: Path, zookeeper: ZooKeeper
) -> None:
    brokers = {n: kafka(tmp_path, zookeeper, n) for n in BROKERS}
    seglogs: dict[int, Serve] = {}
    bootstrap = ",".join(b.bootstrap_servers for b in brokers.values())
    producer: BackgroundProducer | None = None
    consumer: BackgroundConsumer | None = None
    zk: Zk | None = None
    try:
        for b in brokers.values():
            b.start()
        zk = Zk(f"{zookeeper.connect_string}/migration")  # the chroot Kafka made
        create_topic(bootstrap, TOPIC, PARTITIONS, 3, min_insync_replicas="2")
        producer = BackgroundProducer(bootstrap, TOPIC, PARTITIONS, rate=200, enable_idempotence=True)
        consumer = BackgroundConsumer(bootstrap, TOPIC, PARTITIONS, group=GROUP)
        wait_for("the group committing", lambda: all(o > 0 for o in committed(bootstrap).values()), 90)
        history = [committed(bootstrap)]

        def step(phase: str) -> dict[str, list[int]]:
            """Settles, checks traffic flows on, and samples the group's offsets."""
            assert producer is not None and consumer is not None and zk is not None
            leaders = settled(zk, phase)
            since = time.monotonic()
            wait_for(
                f"{phase}: writes acknowledged on every partition", lambda: producer.acked_since(since), 60
            )
            ends = next_offsets(producer.acked)
            wait_for(f"{phase}: the group reading on", lambda: consumer.caught_up(ends), 90)
            now = committed(bootstrap)
            before = history[-1]
            assert all(now[p] >= before[p] for p in range(PARTITIONS)), (phase, before, now)
            history.append(now)
            return leaders

        step("all Kafka")
        mixed: list[tuple[set[int], list[int]]] = []  # (seglog brokers, the topic's leaders)
        for n in BROKERS:
            brokers[n].stop()
            zk.wait_until_gone(n)
            seglogs[n] = seglog_broker(brokers[n])
            leaders = step(f"broker {n} replaced by seglog")
            assert zk.broker(n).get("seglog_version"), zk.broker(n)
            if n != BROKERS[-1]:
                # Kafka is the controller while any Kafka broker is live.
                assert zk.controller() not in seglogs, zk.controller()
                mixed.append((set(seglogs), leaders[TOPIC]))
            if n == BROKERS[0]:
                topic_deleted_through_seglog(zk, brokers, seglogs[n])
        assert zk.controller() in seglogs
        for n in BROKERS:
            seglogs.pop(n).stop()
            zk.wait_until_gone(n)
            brokers[n].start()
            leaders = step(f"broker {n} back to Kafka")
            assert "seglog_version" not in zk.broker(n)
            assert zk.controller() not in seglogs, zk.controller()
            if seglogs:
                mixed.append((set(seglogs), leaders[TOPIC]))
        # Every mixed phase had leaders of both kinds, each with the other kind in its
        # ISR (every ISR is full).
        assert len(mixed) == 4, mixed
        for ours, leaders in mixed:
            assert {leader in ours for leader in leaders} == {True, False}, (ours, leaders)

        producer.stop()
        consumer.stop()
        log = consume_all(bootstrap, TOPIC, range(PARTITIONS), settle=next_offsets(producer.acked))
        verdict = check_acknowledged(producer.acked, log)
        assert verdict.ok, verdict
        assert not producer.failed, producer.failed[:5]
        reads = check_reads([consumer], producer.acked, log)
        assert reads.ok, reads
        stall, partition = producer.longest_stall()
        print(f"\n{verdict}; {reads}; longest produce stall {stall * 1000:.0f} ms on partition {partition}")
    finally:
        if producer is not None:
            producer._stop.set()
        if consumer is not None:
            consumer._stop.set()
        if zk is not None:
            zk.close()
        for s in seglogs.values():
            s.kill()
        for b in brokers.values():
            b.stop()
    # The segments of broker 1's directory were written by Kafka, then seglog, then
    # Kafka: both readers find the same records.
    for segment in sorted((brokers[1].log_dir / f"{TOPIC}-0").glob("*.log")):
        dumps_agree(REFERENCE_VERSION, segment)
