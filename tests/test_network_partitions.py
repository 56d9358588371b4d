"""Network partitions: a broker cut off from ZooKeeper while it goes on running and
serving its clients, through the cuttable links of ``LocalCluster(zookeeper_links=True)``.
What the cut broker must still answer, what it must refuse, and that nothing a client was
told is written goes missing once the link heals."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TypeVar

import pytest

from broker_helpers import connect, frame, parse_produce_v3, produce_request_v3, record_batch, recv_response
from cluster_helpers import (
    NOT_LEADER_OR_FOLLOWER,
    Zk,
    check_acknowledged,
    consume_all,
    next_offsets,
    produce_and_report,
    producer,
    wait_for,
)
from cluster_helpers import assert_replicas_identical as replicas_identical
from seglog.testing import LocalCluster
from test_replication import BROKERS, FAST, SESSION_MS, TOPIC, MakeCluster, host_port, topic_with_full_isr, up

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
    before = metadata_from(address)
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
