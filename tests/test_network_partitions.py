"""Network partitions: brokers cut off from ZooKeeper, from their clients and followers,
or from both, while they go on running, through the cuttable links of
``LocalCluster(zookeeper_links=True, listener_links=True)``. What a cut broker must still
answer and what it must refuse; and rounds of partitions mixed with kill -9 and SIGSTOP
under acks=all producers and consumers in both assign and subscribe modes, checked as
Jepsen's Kafka workload checks them: nothing acknowledged lost or duplicated, no poll
going back or skipping, no value read that the log does not hold, nothing unseen."""

from __future__ import annotations

import os
import random
import struct
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from broker_helpers import (
    connect,
    frame,
    init_producer_ids,
    parse_produce_v3,
    produce_request_v3,
    record_batch,
    recv_response,
)
from cluster_helpers import (
    NOT_LEADER_OR_FOLLOWER,
    BackgroundConsumer,
    BackgroundProducer,
    Zk,
    check_acknowledged,
    check_reads,
    consume_all,
    next_offsets,
    produce_and_report,
    producer,
    wait_for,
)
from cluster_helpers import assert_replicas_identical as replicas_identical
from seglog.testing import LocalCluster
from test_replication import (
    BROKERS,
    FAST,
    SESSION_MS,
    TOPIC,
    MakeCluster,
    host_port,
    offsets_partition,
    topic_with_full_isr,
    up,
)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

PRODUCE = 0
METADATA = 3
T = TypeVar("T")


def log_has(cluster: LocalCluster, n: int, since: int, event: str) -> bool:
    with open(cluster.log_path(n), "rb") as f:
        f.seek(since)
        return f"event={event} ".encode() in f.read()


class Reader:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.at = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.body, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        self.at += n
        return self.body[self.at - n : self.at].decode()

    def array(self, item: Callable[[], T]) -> list[T]:
        return [item() for _ in range(self.take(">i"))]


def metadata_from(address: str) -> tuple[set[int], dict[str, tuple[int, dict[int, int]]]]:
    """One broker's own answer to Metadata v1 for every topic: (its broker ids,
    {topic: (error code, {partition: leader})})."""
    s = connect(host_port(address)[1])
    try:
        s.sendall(frame(METADATA, 1, 1, struct.pack(">i", -1)))
        _, body = recv_response(s)
    finally:
        s.close()
    r = Reader(body)

    def broker() -> int:
        node = r.take(">i")
        r.string(), r.take(">i"), r.string()
        return node

    def partition() -> tuple[int, int]:
        r.take(">h")
        index, leader = r.take(">i"), r.take(">i")
        r.array(lambda: r.take(">i")), r.array(lambda: r.take(">i"))
        return index, leader

    def topic() -> tuple[str, tuple[int, dict[int, int]]]:
        code, name = r.take(">h"), r.string()
        r.take(">b")
        return str(name), (code, dict(r.array(partition)))

    brokers = set(r.array(broker))
    r.take(">i")
    return brokers, dict(r.array(topic))


def test_a_broker_cut_off_from_zookeeper_keeps_its_metadata_and_takes_no_writes(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """The leader of a partition loses ZooKeeper (its link cut well past the session
    timeout, so that its session expires on both sides). It goes on answering Metadata
    from its last view, as Kafka's metadata cache does, so clients asking it still find
    every topic; it takes no write while it cannot know whether it still leads; producers
    running throughout have every send acknowledged by the new leaders; once the link
    heals it rejoins, catches up and every acknowledged record is there."""
    cluster, zk = up(local_cluster, zk_of, config=FAST, zookeeper_links=True)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    cut = zk.leader(TOPIC, 0)
    address = cluster.address(cut)
    assert address is not None
    # The ISR in ZooKeeper is full from the topic's creation; the broker to be cut must
    # also have applied the states (it answers as their leader) before it loses them.
    states = {p: zk.leader(TOPIC, p) for p in parts}
    before = wait_for(
        f"broker {cut} answering Metadata with the partitions' leaders",
        lambda: (md := metadata_from(address))[1].get(TOPIC, (0, {}))[1] == states and md,
        30,
    )
    log_start = cluster.log_path(cut).stat().st_size

    cluster.cut_zookeeper(cut)
    zk.wait_until_gone(cut, timeout=SESSION_MS / 1000 + 20)
    wait_for(
        f"broker {cut} seeing its ZooKeeper session end",
        lambda: log_has(cluster, cut, log_start, "zookeeper_session_ended"),
        3 * SESSION_MS / 1000 + 20,
    )
    wait_for(f"a new leader of {TOPIC}-0", lambda: zk.leader(TOPIC, 0) not in (cut, -1), 30)

    # Its Metadata still names the topic, every partition and broker, as it last saw them.
    brokers, topics = metadata_from(address)
    assert brokers == BROKERS, brokers
    assert set(topics) == set(before[1]), topics
    code, leaders = topics[TOPIC]
    assert code == 0 and sorted(leaders) == parts, topics
    assert leaders[0] == cut, leaders

    # A write sent to it anyway (a client with the old leader) is refused, not taken.
    s = connect(host_port(address)[1])
    try:
        s.sendall(frame(PRODUCE, 3, 7, produce_request_v3(TOPIC, 0, record_batch([b"fenced"]))))
        _, body = recv_response(s)
    finally:
        s.close()
    assert [(t, p, code) for t, p, code, _, _ in parse_produce_v3(body)] == [
        (TOPIC, 0, NOT_LEADER_OR_FOLLOWER)
    ]
    # An idempotent producer asking it for a producer id gets one, from the block it took
    # when its session began; ZooKeeper handed that block to no other broker.
    [(error, pid, epoch)] = init_producer_ids(host_port(address)[1])
    assert (error, epoch) == (0, 0) and pid >= 0, (error, pid, epoch)
    other = next(n for n in BROKERS if n != cut)
    other_address = cluster.address(other)
    assert other_address is not None
    [(error, other_pid, _)] = init_producer_ids(host_port(other_address)[1])
    assert error == 0 and other_pid // 1000 != pid // 1000, (pid, other_pid)

    # Clients of the whole cluster go on: every send is acknowledged by the new leaders.
    p = producer(cluster.bootstrap_servers, enable_idempotence=True, message_timeout_ms=60000)
    acked, failed = produce_and_report(p, TOPIC, [(i % len(parts), f"cut-{i}".encode()) for i in range(300)])
    assert not failed, failed[:5]

    cluster.heal_zookeeper(cut)
    zk.wait_until_registered([cut], timeout=SESSION_MS / 1000 + 30)
    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=60)
    more, failed = produce_and_report(
        p, TOPIC, [(i % len(parts), f"healed-{i}".encode()) for i in range(300)]
    )
    assert not failed, failed[:5]
    acked += more
    consumed = consume_all(cluster.bootstrap_servers, TOPIC, parts, settle=next_offsets(acked))
    verdict = check_acknowledged(acked, consumed)
    assert verdict.ok, verdict
    assert b"fenced" not in {v for records in consumed.values() for v in records.values()}
    wait_for("the replicas' logs identical", lambda: replicas_identical(cluster, TOPIC, parts), 30, 0.5)


# ---------------------------------------------------------------- rounds of faults

FAULTS = ("kill", "pause", "cut-listener", "cut-zookeeper", "isolate")
TARGETS = ("leader", "controller", "coordinator")
GROUP = "chaos-readers"
SEEDS = [int(s) for s in os.environ.get("SEGLOG_CHAOS_SEEDS", "1,2").split(",")]
ROUNDS = int(os.environ.get("SEGLOG_CHAOS_ROUNDS", "10"))


def inject(cluster: LocalCluster, fault: str, n: int) -> Callable[[], None]:
    """Applies ``fault`` to broker ``n``; returns what undoes it."""
    if fault == "kill":
        cluster.kill(n)
        return lambda: cluster.start(n)
    if fault == "pause":
        cluster.pause(n)
        return lambda: cluster.resume(n)
    cut = {
        "cut-listener": ("listener",),
        "cut-zookeeper": ("zookeeper",),
        "isolate": ("listener", "zookeeper"),
    }
    for link in cut[fault]:
        getattr(cluster, f"cut_{link}")(n)

    def heal() -> None:
        for link in cut[fault]:
            getattr(cluster, f"heal_{link}")(n)

    return heal


@pytest.mark.parametrize("seed", SEEDS)
def test_rounds_of_partitions_kills_and_pauses_lose_nothing_acknowledged(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], seed: int
) -> None:
    """``ROUNDS`` rounds, each one fault on one broker (the leader of a partition, the
    controller, or the group's coordinator) held for 1 to 10 seconds, sometimes past the
    ZooKeeper session timeout: kill -9, SIGSTOP, cut off from clients and followers, cut
    off from ZooKeeper, or both; then healed, and the cluster back to full ISRs before the
    next. Idempotent acks=all producers and two consumers (one assigned, one a group
    member) run throughout. Unclean election is off and min.insync.replicas 2."""
    rng = random.Random(seed)
    cluster, zk = up(local_cluster, zk_of, config=FAST, zookeeper_links=True, listener_links=True)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    writer = BackgroundProducer(
        cluster.bootstrap_servers,
        TOPIC,
        len(parts),
        rate=200,
        enable_idempotence=True,
        message_timeout_ms=120000,
    )
    readers = [
        BackgroundConsumer(cluster.bootstrap_servers, TOPIC, len(parts)),
        BackgroundConsumer(cluster.bootstrap_servers, TOPIC, len(parts), group=GROUP),
    ]
    offsets = "__consumer_offsets"
    wait_for("the group's coordinator", lambda: zk.exists(f"/brokers/topics/{offsets}"), 60)
    coordinator_partition = offsets_partition(GROUP, len(zk.assignment(offsets)))
    zk.wait_until_isr(offsets, [coordinator_partition], BROKERS, timeout=60)
    done = []
    try:
        wait_for("first writes acknowledged", lambda: writer.acked_since(0.0), 30)
        for round_ in range(ROUNDS):
            fault, target = rng.choice(FAULTS), rng.choice(TARGETS)
            n = {
                "leader": lambda: zk.leader(TOPIC, rng.choice(parts)),
                "controller": zk.controller,
                "coordinator": lambda: zk.leader(offsets, coordinator_partition),
            }[target]()
            hold = rng.uniform(1.0, 10.0)
            undo = inject(cluster, fault, n)
            time.sleep(hold)  # the fault's length, part of the scenario
            undo()
            done.append(f"{fault} {target} {n} {hold:.1f}s")
            healed = time.monotonic()
            zk.wait_until_registered(BROKERS, timeout=SESSION_MS / 1000 + 60)
            zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=120)
            zk.wait_until_isr(offsets, [coordinator_partition], BROKERS, timeout=120)
            wait_for(
                f"round {round_}: writes acknowledged after healing",
                lambda t=healed: writer.acked_since(t),
                120,
            )
    finally:
        writer.stop(timeout=150)
    print(f"seed {seed}: {len(writer.acked)} acknowledged, {len(writer.failed)} failed; rounds: {done}")
    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=120)
    log = consume_all(cluster.bootstrap_servers, TOPIC, parts, timeout=120, settle=next_offsets(writer.acked))
    ends = {p: max(log[p], default=-1) + 1 for p in parts}
    try:
        for r in readers:
            wait_for("the readers at the end of the log", lambda r=r: r.caught_up(ends), 120)
    finally:
        for r in readers:
            r.stop()
    written = check_acknowledged(writer.acked, log)
    assert written.ok, f"seed {seed}, rounds {done}: {written}"
    read = check_reads(readers, writer.acked, log)
    assert read.ok, f"seed {seed}, rounds {done}: {read}"
    wait_for("the replicas' logs identical", lambda: replicas_identical(cluster, TOPIC, parts), 60, 0.5)
