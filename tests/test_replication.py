"""Replication, checked from outside as Kafka's own system tests check it: ZooKeeper and
three ``seglog serve --zookeeper`` brokers in racks r1, r2, r3 as real processes, Kafka's
clients writing and reading, faults injected with signals (kill -9, SIGSTOP), and the
invariants checked on what the clients were told, on ZooKeeper's znodes (Kafka's layout
and JSON) and on the replicas' own store directories."""

from __future__ import annotations

import re
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from broker_helpers import (
    connect,
    env,
    fetch_request_v4,
    frame,
    init_producer_ids,
    parse_fetch_v4,
    parse_produce_v3,
    produce_all,
    produce_request_v3,
    record_batch,
    recv_response,
)
from cluster_helpers import (
    NOT_ENOUGH_REPLICAS,
    BackgroundProducer,
    PartitionInfo,
    Record,
    Zk,
    check_acknowledged,
    consume_all,
    create_topic,
    group_resumes_at,
    metadata,
    next_offsets,
    produce_and_report,
    producer,
    wait_for,
)
from cluster_helpers import assert_replicas_identical as replicas_identical
from seglog.testing import LocalCluster

# Every wait below has its own deadline; their sum for one test may pass the default
# per-test timeout, whose thread method would end the whole run.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

TOPIC = "t"
BROKERS = {1, 2, 3}
SESSION_MS = 4000
# A broker's death shows in /brokers/ids this long after its last heartbeat.
FAST = {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": SESSION_MS}

MakeCluster = Callable[..., LocalCluster]


def up(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], **kwargs: object
) -> tuple[LocalCluster, Zk]:
    """Three brokers in racks r1, r2, r3, once all are registered in ZooKeeper and one
    is the controller."""
    cluster = local_cluster(brokers=3, **kwargs)
    zk = zk_of(cluster)
    zk.wait_until_registered(BROKERS)
    wait_for("a controller in /controller", lambda: zk.exists("/controller"), 30)
    return cluster, zk


def topic_with_full_isr(cluster: LocalCluster, zk: Zk, partitions: int = 3, **config: str) -> list[int]:
    create_topic(cluster.bootstrap_servers, TOPIC, partitions, 3, **config)
    parts = list(range(partitions))
    zk.wait_until_isr(TOPIC, parts, BROKERS)
    return parts


def identical_after_stop(cluster: LocalCluster, parts: list[int]) -> dict[int, list[Record]]:
    """The replicas' logs once they are the same: a follower back in the ISR may still be
    fetching the last records, so this first waits (reading the running brokers' stores
    read-only) until the logs agree, then stops the cluster and compares them again."""
    wait_for("the replicas' logs identical", lambda: replicas_identical(cluster, TOPIC, parts), 30, 0.5)
    cluster.stop()
    return replicas_identical(cluster, TOPIC, parts)


def bootstrap_without(cluster: LocalCluster, *excluded: int) -> str:
    return ",".join(
        str(cluster.address(n)) for n in cluster.broker_ids if n not in excluded and cluster.alive(n)
    )


def host_port(address: str | None) -> tuple[str, int]:
    assert address is not None
    host, port = address.rsplit(":", 1)
    return host, int(port)


# ---------------------------------------------------------------- a. placement, Metadata and znodes


def test_rack_aware_topic_in_metadata_and_znodes(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of)
    create_topic(cluster.bootstrap_servers, TOPIC, 3, 3, min_insync_replicas="2")

    def settled() -> tuple[dict[int, tuple[str, int]], dict[int, PartitionInfo], int] | None:
        brokers, parts, controller = metadata(cluster.bootstrap_servers, TOPIC)
        full = len(parts) == 3 and all(p.leader >= 0 and len(p.isr) == 3 for p in parts.values())
        return (brokers, parts, controller) if full else None

    brokers, parts, controller = wait_for("3 partitions led, 3 in each ISR in Metadata", settled, 60)
    assert brokers == {n: host_port(cluster.address(n)) for n in BROKERS}
    for p, info in parts.items():
        assert info.error is None, (p, info.error)
        assert sorted(info.replicas) == [1, 2, 3], (p, info)
        assert sorted(info.isr) == [1, 2, 3], (p, info)
        # A new partition is led by its preferred replica, the first of its assignment.
        assert info.leader == info.replicas[0], (p, info)
    assert {info.leader for info in parts.values()} == BROKERS, "leaders round-robin over the brokers"

    for n in BROKERS:
        registration = zk.broker(n)
        assert registration["rack"] == f"r{n}"
        assert (registration["host"], registration["port"]) == host_port(cluster.address(n))
    assert zk.controller() == controller
    assert int(zk.text("/controller_epoch")) >= 1
    assignment = zk.assignment(TOPIC)
    assert set(assignment) == {0, 1, 2}
    for p, replicas in assignment.items():
        assert replicas == parts[p].replicas, "Metadata lists replicas in assignment order"
        assert {cluster.rack(n) for n in replicas} == {"r1", "r2", "r3"}
        state = zk.state(TOPIC, p)
        assert {"controller_epoch", "leader", "leader_epoch", "isr"} <= set(state), state
        assert state["leader"] == parts[p].leader
        assert sorted(state["isr"]) == [1, 2, 3]
        assert isinstance(state["leader_epoch"], int) and state["leader_epoch"] >= 0
        assert isinstance(state["controller_epoch"], int) and state["controller_epoch"] >= 1
    assert zk.topic_config(TOPIC)["min.insync.replicas"] == "2"


# ---------------------------------------------------------------- b. acks=all, read back, identical replicas


def test_acks_all_writes_read_back_from_identical_replicas(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    base_ts = 1_700_000_000_000
    items = [
        {"partition": p, "key": f"k{i}".encode(), "value": f"v{p}-{i}".encode(), "timestamp": base_ts + i}
        for p in parts
        for i in range(200)
    ]
    reports = produce_all(producer(cluster.bootstrap_servers), TOPIC, items)
    told = {
        (m.partition(), m.offset()): (item["key"], item["value"], item["timestamp"])
        for item, m in zip(items, reports, strict=True)
    }
    assert len(told) == len(items)

    consumed = consume_all(cluster.bootstrap_servers, TOPIC, parts)
    assert {(p, o): v for p in parts for o, v in consumed[p].items()} == {k: v[1] for k, v in told.items()}

    # Every ISR member holds what acks=all acknowledged; with all three back in every
    # ISR and nothing more written, the three logs must be the same.
    zk.wait_until_isr(TOPIC, parts, BROKERS)
    logs = identical_after_stop(cluster, parts)
    for p in parts:
        assert [(r[0], r[1], r[2], r[3]) for r in logs[p]] == [
            (o, *told[(p, o)]) for o in sorted(o for (q, o) in told if q == p)
        ]


# ---------------------------------------------------------------- c. NOT_ENOUGH_REPLICAS


def test_not_enough_replicas_with_two_of_three_down(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    survivor = zk.leader(TOPIC, 0)
    dead = sorted(BROKERS - {survivor})
    for n in dead:
        cluster.kill(n)
    for n in dead:
        zk.wait_until_gone(n, timeout=SESSION_MS / 1000 + 20)
    # Every partition had the survivor in its ISR, so it leads them all, alone in the ISR.
    wait_for(
        f"broker {survivor} leading every partition with ISR [{survivor}]",
        lambda: all(
            zk.state(TOPIC, p)["leader"] == survivor and zk.isr(TOPIC, p) == [survivor] for p in parts
        ),
        30,
    )
    # And the survivor knows it: its Metadata says so only once its replicas act on it (an
    # append racing the ISR change would be refused after it, with _AFTER_APPEND, 20).
    wait_for(
        f"broker {survivor}'s Metadata showing ISR [{survivor}]",
        lambda: all(
            i.leader == survivor and i.isr == [survivor]
            for i in metadata(bootstrap_without(cluster, *dead), TOPIC)[1].values()
        ),
        30,
    )
    strict = producer(cluster.bootstrap_servers, retries=0, message_timeout_ms=5000, request_timeout_ms=5000)
    acked, failed = produce_and_report(strict, TOPIC, [(0, b"refused")], timeout=30)
    assert not acked, f"acks=all with an ISR of 1 < min.insync.replicas 2 was acknowledged: {acked}"
    [(_, err)] = failed
    assert err.code() == KafkaError.NOT_ENOUGH_REPLICAS == NOT_ENOUGH_REPLICAS, err

    # acks=1 does not ask for min.insync.replicas: the survivor takes it.
    acked, failed = produce_and_report(
        producer(cluster.bootstrap_servers, acks="1", retries=0), TOPIC, [(0, b"one")], timeout=30
    )
    assert not failed and len(acked) == 1, failed

    # A second replica back in the ISR: acks=all is taken again.
    cluster.start(dead[0])
    zk.wait_until_isr(TOPIC, [0], {survivor, dead[0]}, timeout=60)
    acked, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(0, b"again")], timeout=60
    )
    assert not failed and len(acked) == 1, failed


# ---------------------------------------------------------------- d. chaos: Kafka's replication_test


def bounce(cluster: LocalCluster, zk: Zk, victim: int, writer: BackgroundProducer, parts: list[int]) -> None:
    """A hard bounce: kill -9, wait until ZooKeeper has seen the broker go and every
    partition takes writes again, restart it on its store, wait until it is back in
    every ISR."""
    cluster.kill(victim)
    zk.wait_until_gone(victim, timeout=SESSION_MS / 1000 + 20)
    gone = time.monotonic()
    wait_for(
        f"writes acknowledged on {parts} after broker {victim} died",
        lambda: writer.acked_since(gone, parts),
        60,
    )
    cluster.start(victim)
    zk.wait_until_registered([victim], timeout=30)
    zk.wait_until_isr(TOPIC, parts, {victim}, timeout=90)


def test_acknowledged_writes_survive_leader_and_controller_bounces(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    writer = BackgroundProducer(
        cluster.bootstrap_servers,
        TOPIC,
        len(parts),
        rate=150,
        enable_idempotence=True,
        acks="all",
        message_timeout_ms=60000,
    )
    try:
        wait_for("first writes acknowledged", lambda: writer.acked_since(0.0), 30)
        victims = []
        for target in ("leader", "leader", "controller", "leader"):
            victim = zk.controller() if target == "controller" else zk.leader(TOPIC, 0)
            victims.append(victim)
            bounce(cluster, zk, victim, writer, parts)
        after = time.monotonic()
        wait_for("writes acknowledged after the last bounce", lambda: writer.acked_since(after), 30)
    finally:
        writer.stop()
    assert len(writer.acked) >= 500, f"only {len(writer.acked)} writes acknowledged"

    consumed = consume_all(
        cluster.bootstrap_servers, TOPIC, parts, timeout=120, settle=next_offsets(writer.acked)
    )
    verdict = check_acknowledged(writer.acked, consumed)
    assert verdict.ok, f"bounced {victims}: {verdict}; {len(writer.failed)} deliveries failed"
    # Kafka answers a retried duplicate of one of a producer's last five batches with the
    # offsets that batch first got, so every acknowledgement names its offset.
    assert not verdict.without_offset, f"bounced {victims}: {verdict}"

    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=90)
    logs = identical_after_stop(cluster, parts)
    for p in parts:
        assert {r[0]: r[2] for r in logs[p]} == consumed[p], f"{TOPIC}/{p}: the logs hold what consumers read"


# ---------------------------------------------------------------- e. the checker can fail


def test_checker_reports_loss_with_acks_1_and_unclean_election(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    # Followers stay in the ISR while stopped (lag limit 30 s), so the leader's death
    # hands the partition to one that never saw what acks=1 acknowledged.
    cluster, zk = up(
        local_cluster,
        zk_of,
        config={"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 30000},
    )
    parts = topic_with_full_isr(
        cluster, zk, partitions=1, min_insync_replicas="1", unclean_leader_election_enable="true"
    )
    acks_1 = producer(cluster.bootstrap_servers, acks="1", retries=0)
    acked, failed = produce_and_report(acks_1, TOPIC, [(0, f"before-{i}".encode()) for i in range(20)])
    assert not failed, failed
    leader = zk.leader(TOPIC, 0)
    followers = sorted(BROKERS - {leader})
    for n in followers:
        cluster.pause(n)
    try:
        # A stopped follower's kernel still takes the answer to the fetch it had waiting at
        # the leader, and reads it when it runs again. Those answers go out with the primer
        # records (or empty, after replica.fetch.wait.max.ms); a fetch can only be sent
        # again on resume, so nothing written after that can reach the followers.
        primer, failed = produce_and_report(acks_1, TOPIC, [(0, f"primer-{i}".encode()) for i in range(5)])
        assert not failed, failed
        time.sleep(1.0)
        alone, failed = produce_and_report(acks_1, TOPIC, [(0, f"alone-{i}".encode()) for i in range(200)])
        assert not failed, failed
        cluster.kill(leader)
    finally:
        for n in followers:
            cluster.resume(n)
    zk.wait_until_new_leader(TOPIC, 0, leader, timeout=SESSION_MS / 1000 + 30)
    after, failed = produce_and_report(
        producer(cluster.bootstrap_servers, acks="1"), TOPIC, [(0, f"after-{i}".encode()) for i in range(50)]
    )
    assert not failed, failed

    # acks=1: the high watermark follows the new leader's writes once its follower fetches.
    consumed = consume_all(cluster.bootstrap_servers, TOPIC, parts, settle=next_offsets(after))
    verdict = check_acknowledged(acked + primer + alone + after, consumed)
    assert not verdict.ok, f"the checker saw no loss: {verdict}"
    lost = {a.value for a in verdict.lost}
    assert {a.value for a in alone} <= lost, verdict
    assert lost <= {a.value for a in acked + primer + alone}, "only what the dead leader alone held is lost"
    assert "lost" in str(verdict)


# ---------------------------------------------------------------- no leader outside the ISR


def test_no_leader_outside_the_isr_without_unclean_election(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, partitions=1, min_insync_replicas="1")
    leader = zk.leader(TOPIC, 0)
    others = sorted(BROKERS - {leader})
    for n in others:
        cluster.kill(n)
    for n in others:
        zk.wait_until_gone(n, timeout=SESSION_MS / 1000 + 20)
    wait_for(f"ISR [{leader}]", lambda: zk.isr(TOPIC, 0) == [leader], 30)
    only_leader, failed = produce_and_report(
        producer(cluster.bootstrap_servers, acks="1"), TOPIC, [(0, f"only-{i}".encode()) for i in range(20)]
    )
    assert not failed, failed

    # The last ISR member (the last broker, so the controller too) dies; a replica that
    # lacks what it acknowledged comes back and becomes the controller. The partition
    # stays without a leader (Kafka writes leader -1 and keeps the ISR) rather than pass
    # to that replica.
    cluster.kill(leader)
    zk.wait_until_gone(leader, timeout=SESSION_MS / 1000 + 20)
    cluster.start(others[0])
    zk.wait_until_registered([others[0]], timeout=30)
    wait_for(f"broker {others[0]} controller", lambda: zk.controller() == others[0], 30)
    deadline = time.monotonic() + SESSION_MS / 1000
    while time.monotonic() < deadline:
        state = zk.state(TOPIC, 0)
        assert state["leader"] in (-1, leader), f"broker {others[0]}, outside the ISR, was elected: {state}"
        assert state["isr"] == [leader], state
        time.sleep(0.2)

    # The ISR member returns and leads again; nothing it acknowledged is lost.
    cluster.start(leader)
    wait_for(f"broker {leader} leading again", lambda: zk.leader(TOPIC, 0) == leader, SESSION_MS / 1000 + 30)
    zk.wait_until_isr(TOPIC, parts, {leader, others[0]}, timeout=60)
    consumed = consume_all(cluster.bootstrap_servers, TOPIC, parts, settle=next_offsets(only_leader))
    verdict = check_acknowledged(only_leader, consumed)
    assert verdict.ok, verdict


# ---------------------------------------------------------------- ISR shrink and expand, preferred leaders


def test_a_stalled_follower_leaves_the_isr_and_returns(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """A follower that stops fetching (SIGSTOP, its ZooKeeper session kept alive by the
    short pause) leaves the ISR after replica.lag.time.max.ms, written by the leader;
    writes go on with the smaller ISR; once it fetches again and catches up it returns."""
    lag_ms = 1500
    config = {"zookeeper.session.timeout.ms": 10000, "replica.lag.time.max.ms": lag_ms}
    cluster, zk = up(local_cluster, zk_of, config=config)
    parts = topic_with_full_isr(cluster, zk, partitions=1, min_insync_replicas="2")
    leader = zk.leader(TOPIC, 0)
    stalled = max(BROKERS - {leader})
    epoch = zk.state(TOPIC, 0)["leader_epoch"]
    cluster.pause(stalled)
    try:
        # Records the stalled follower lacks, so it is not caught up.
        p = producer(cluster.bootstrap_servers, acks="1")
        first, failed = produce_and_report(p, TOPIC, [(0, f"a-{i}".encode()) for i in range(50)])
        assert not failed, failed
        out = lambda: stalled not in zk.isr(TOPIC, 0)  # noqa: E731
        wait_for(f"broker {stalled} out of the ISR", out, lag_ms / 1000 + 15)
        state = zk.state(TOPIC, 0)
        assert (state["leader"], state["leader_epoch"]) == (leader, epoch), "the leader's own ISR change"
        assert stalled in zk.broker_ids(), "still registered: only its fetching stopped"
        # acks=all goes on with the two left (min.insync.replicas=2).
        all_acks = producer(cluster.bootstrap_servers, acks="all")
        more, failed = produce_and_report(all_acks, TOPIC, [(0, f"b-{i}".encode()) for i in range(50)])
        assert not failed, failed
    finally:
        cluster.resume(stalled)
    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=30)
    # The leader logs each ISR change once its write of the state znode is done,
    # which is after ZooKeeper's watchers (this test's wait above) may have seen it.
    leader_log = cluster.log_path(leader)
    for why in ("shrink", "expand"):
        event = f"event=isr_changed topic={TOPIC} partition=0 why={why}"
        wait_for(f"the leader's log line {event!r}", lambda e=event: e in leader_log.read_text(), 10)
    verdict = check_acknowledged(first + more, consume_all(cluster.bootstrap_servers, TOPIC, parts))
    assert verdict.ok, verdict
    identical_after_stop(cluster, parts)


def test_leadership_returns_to_the_preferred_replica(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """auto.leader.rebalance.enable: after its preferred leader (the first replica of its
    assignment) died and came back in sync, a partition is led by it again, in a newer
    leader epoch."""
    config = {**FAST, "leader.imbalance.check.interval.seconds": 1}
    cluster, zk = up(local_cluster, zk_of, config=config)
    parts = topic_with_full_isr(cluster, zk, partitions=1)
    preferred = zk.assignment(TOPIC)[0][0]
    assert zk.leader(TOPIC, 0) == preferred
    cluster.kill(preferred)
    successor = zk.wait_until_new_leader(TOPIC, 0, preferred, timeout=SESSION_MS / 1000 + 20)
    moved_epoch = zk.state(TOPIC, 0)["leader_epoch"]
    acked, failed = produce_and_report(
        producer(cluster.bootstrap_servers, acks="all"), TOPIC, [(0, f"v-{i}".encode()) for i in range(30)]
    )
    assert not failed, failed
    assert successor != preferred
    cluster.start(preferred)
    wait_for(
        f"broker {preferred} leading again",
        lambda: zk.leader(TOPIC, 0) == preferred and preferred in zk.isr(TOPIC, 0),
        60,
    )
    assert zk.state(TOPIC, 0)["leader_epoch"] > moved_epoch
    verdict = check_acknowledged(acked, consume_all(cluster.bootstrap_servers, TOPIC, parts))
    assert verdict.ok, verdict


# ---------------------------------------------------------------- f. fencing a paused leader


def test_paused_leader_is_fenced_and_truncates(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, partitions=1, min_insync_replicas="2")
    acked, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(0, f"before-{i}".encode()) for i in range(50)]
    )
    assert not failed, failed
    old = zk.leader(TOPIC, 0)
    epoch = zk.state(TOPIC, 0)["leader_epoch"]
    old_port = host_port(cluster.address(old))[1]

    cluster.pause(old)
    try:
        new = zk.wait_until_new_leader(TOPIC, 0, old, timeout=SESSION_MS / 1000 + 30)
        assert zk.state(TOPIC, 0)["leader_epoch"] > epoch
        assert old not in zk.isr(TOPIC, 0)
        during, failed = produce_and_report(
            producer(bootstrap_without(cluster, old)), TOPIC, [(0, f"during-{i}".encode()) for i in range(50)]
        )
        assert not failed, f"the two live replicas of min.insync.replicas 2 refused: {failed}"
        # Queued in the paused leader's socket, read the moment it runs again: before it
        # can have heard from ZooKeeper that it was replaced.
        zombie = connect(old_port, timeout=10)
        zombie.sendall(frame(0, 3, 77, produce_request_v3(TOPIC, 0, record_batch([b"zombie"]), acks=-1)))
    finally:
        cluster.resume(old)
    try:
        zombie.settimeout(30)
        corr, body = recv_response(zombie)
        [(_, _, err, base, _)] = parse_produce_v3(body)
        print(f"the replaced leader answered the queued produce with error {err}")
        assert corr == 77
        assert err != 0, f"the replaced leader {old} acknowledged an acks=all write at offset {base}"
    except (TimeoutError, ConnectionError) as e:
        print(f"the replaced leader did not answer the queued produce: {e!r}")  # no acknowledgement
    finally:
        zombie.close()

    # A client that knows only the old leader is sent to the new one: whatever it is
    # told was written must be where the new leader put it.
    redirected, _ = produce_and_report(
        producer(f"127.0.0.1:{old_port}", message_timeout_ms=30000),
        TOPIC,
        [(0, f"via-old-{i}".encode()) for i in range(10)],
    )
    # Back in the ISR: it has dropped what it alone held and caught up with the new leader.
    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=90)

    consumed = consume_all(
        cluster.bootstrap_servers, TOPIC, parts, settle=next_offsets(acked + during + redirected)
    )
    verdict = check_acknowledged(acked + during + redirected, consumed)
    assert verdict.ok, f"old leader {old}, new leader {new}: {verdict}"
    assert b"zombie" not in consumed[0].values()
    logs = identical_after_stop(cluster, parts)
    assert b"zombie" not in {r[2] for r in logs[0]}, "the old leader kept a write it had alone"


def test_a_fetch_between_the_high_watermark_and_the_log_end_is_not_out_of_range(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """Kafka answers OFFSET_OUT_OF_RANGE only outside [log start, log end]. With both
    followers paused (still in the ISR), acks=1 writes take the leader's log end past its
    high watermark; a consumer's fetch between the two (where a consumer that read from
    an old leader stands while a new leader's high watermark catches up) gets no records
    and no error, so the consumer is not reset; past the log end it is out of range."""
    slow = {"zookeeper.session.timeout.ms": 30000, "replica.lag.time.max.ms": 30000}
    cluster, zk = up(local_cluster, zk_of, config=slow)
    topic_with_full_isr(cluster, zk, partitions=1)
    _, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(0, b"%d" % i) for i in range(10)]
    )
    assert not failed, failed
    leader = zk.leader(TOPIC, 0)
    followers = [n for n in BROKERS if n != leader]
    s = connect(host_port(cluster.address(leader))[1], timeout=10)

    def fetch(offset: int) -> tuple[int, int, bytes]:
        s.sendall(frame(1, 4, offset, fetch_request_v4(TOPIC, 0, offset)))
        corr, body = recv_response(s)
        assert corr == offset
        [(_, _, err, hw, records)] = parse_fetch_v4(body)
        return err, hw, records

    wait_for("the high watermark at 10", lambda: fetch(0)[1] == 10, 30)
    for f in followers:
        cluster.pause(f)
    try:
        _, failed = produce_and_report(
            producer(str(cluster.address(leader)), acks=1), TOPIC, [(0, b"x%d" % i) for i in range(5)]
        )
        assert not failed, failed
        assert fetch(12) == (0, 10, b""), "between the high watermark and the log end: nothing yet"
        assert fetch(15)[:2] == (0, 10), "at the log end"
        assert fetch(16)[0] == 1, "past the log end: OFFSET_OUT_OF_RANGE"
        assert set(zk.isr(TOPIC, 0)) == set(BROKERS), "the followers were still in the ISR throughout"
    finally:
        for f in followers:
            cluster.resume(f)
        s.close()


# ---------------------------------------------------------------- g. a ZooKeeper node dies


def test_cluster_outlives_a_zookeeper_node(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST, zookeeper_nodes=3)
    parts = topic_with_full_isr(cluster, zk, min_insync_replicas="2")
    acked, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(p, f"before-{p}".encode()) for p in parts]
    )
    assert not failed, failed
    ensemble = cluster.zookeeper
    zk_leader = ensemble.leader()
    assert zk_leader is not None
    ensemble.kill(zk_leader)
    more, failed = produce_and_report(
        producer(cluster.bootstrap_servers),
        TOPIC,
        [(p, f"after-{p}-{i}".encode()) for p in parts for i in range(10)],
    )
    assert not failed, f"acks=all failed after ZooKeeper node {zk_leader} died: {failed}"
    # Past a session timeout the brokers' sessions (moved to the other nodes) hold.
    time.sleep(SESSION_MS / 1000 + 2)
    assert zk.broker_ids() == BROKERS
    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=30)
    late, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(p, f"late-{p}".encode()) for p in parts]
    )
    assert not failed, failed
    consumed = consume_all(cluster.bootstrap_servers, TOPIC, parts, settle=next_offsets(acked + more + late))
    verdict = check_acknowledged(acked + more + late, consumed)
    assert verdict.ok, verdict


# ---------------------------------------------------------------- seglog cluster


def test_seglog_cluster_command(tmp_path: Path, zookeeper_installed: None) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seglog",
            "cluster",
            "--dir",
            str(tmp_path / "c"),
            "--config",
            "zookeeper.session.timeout.ms=4000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    zk: Zk | None = None
    try:
        wait_for("the cluster's listening line", lambda: any("cluster listening on" in x for x in lines), 90)
        zk_line, cluster_line = lines[:2]
        connect_string = re.fullmatch(r"seglog: zookeeper listening on (127\.0\.0\.1:\d+)", zk_line)
        bootstrap = re.fullmatch(r"seglog: cluster listening on ((127\.0\.0\.1:\d+,?){3})", cluster_line)
        assert connect_string and bootstrap, lines
        zk = Zk(connect_string[1])
        zk.wait_until_registered(BROKERS)
        assert {n: zk.broker(n)["rack"] for n in BROKERS} == {1: "r1", 2: "r2", 3: "r3"}
        # The cluster's default replication factor is 3.
        create_topic(bootstrap[1], TOPIC, 3, -1)
        assignment = wait_for(f"/brokers/topics/{TOPIC}", lambda: zk.assignment(TOPIC), 30)
        assert sorted(assignment) == [0, 1, 2] and all(sorted(r) == [1, 2, 3] for r in assignment.values())
    finally:
        if zk is not None:
            zk.close()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(5)
            assert proc.stdout is not None and proc.stderr is not None
            err = proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
    assert code == 0, err
    assert "cluster stopped" in err
    for n in BROKERS:
        assert (tmp_path / "c" / f"b{n}").is_dir()
        assert (tmp_path / "c" / f"b{n}.log").is_file()


# ---------------------------------------------------------------- groups on a cluster


def offsets_partition(group: str, partitions: int) -> int:
    """Kafka's partitionFor: abs(Java's String.hashCode) % partitions."""
    h = 0
    for unit in struct.unpack(f">{len(group.encode('utf-16-be')) // 2}H", group.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def test_group_offsets_survive_a_kill_of_each_coordinator(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """Committed offsets live in ``__consumer_offsets``, replicated like any topic (RF 3),
    and a group's coordinator is the leader of its partition there. For a group
    coordinated by each broker in turn: the group commits, its coordinator is killed
    with -9, and a new member of the group, coordinated by the partition's new leader,
    resumes exactly at the committed offsets."""
    from confluent_kafka import Consumer, TopicPartition

    n_offsets = 6
    cluster, zk = up(
        local_cluster,
        zk_of,
        config={**FAST, "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": n_offsets},
    )
    parts = topic_with_full_isr(cluster, zk)
    _, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(i % 3, str(i).encode()) for i in range(90)]
    )
    assert not failed, failed

    def member(group: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )

    # The first FindCoordinator creates __consumer_offsets, placed over the three brokers;
    # the client retries through COORDINATOR_NOT_AVAILABLE and the partitions' loading.
    first = member("first")
    try:
        nothing = first.committed([TopicPartition(TOPIC, p) for p in parts], timeout=60)
        assert all(tp.offset < 0 and tp.error is None for tp in nothing), nothing
    finally:
        first.close()
    zk.wait_until_isr("__consumer_offsets", range(n_offsets), BROKERS, timeout=60)
    assert all(len(rs) == 3 for rs in zk.assignment("__consumer_offsets").values())

    for round_, broker in enumerate(BROKERS):
        # A group whose partition of __consumer_offsets this broker leads.
        group = next(
            g
            for g in (f"group-{round_}-{i}" for i in range(1000))
            if zk.leader("__consumer_offsets", offsets_partition(g, n_offsets)) == broker
        )
        c = member(group)
        try:
            c.subscribe([TOPIC])
            read = [0]

            def thirty_read(c: Consumer = c, read: list[int] = read) -> bool:
                m = c.poll(0.5)
                read[0] += m is not None and m.error() is None
                return read[0] >= 30

            wait_for("the group's member reading 30 records", thirty_read, 60, 0)
            want = {p: 5 + 7 * p + round_ for p in parts}
            c.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in want.items()], asynchronous=False)
        finally:
            c.close()
        cluster.kill(broker)
        group_resumes_at(cluster.bootstrap_servers, group, TOPIC, want)
        assert zk.leader("__consumer_offsets", offsets_partition(group, n_offsets)) != broker
        cluster.start(broker)
        zk.wait_until_isr("__consumer_offsets", range(n_offsets), BROKERS, timeout=60)
        zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=60)


def test_producer_ids_are_unique_across_the_cluster(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """Every broker hands out producer ids from blocks of 1000 that ZooKeeper gives to one
    broker only: 1500 asked of each broker in turns (each crossing into a second block,
    taken ahead of need) are 4500 distinct ids, none beyond the last block taken."""
    cluster, zk = up(local_cluster, zk_of)
    ports = {n: host_port(str(cluster.address(n)))[1] for n in BROKERS}
    ids: dict[int, list[int]] = {n: [] for n in BROKERS}
    for _ in range(3):
        for n, port in ports.items():
            answers = init_producer_ids(port, 500)
            assert {(error, epoch) for error, _, epoch in answers} == {(0, 0)}, answers[:3]
            ids[n] += [pid for _, pid, _ in answers]
    everything = [pid for n in BROKERS for pid in ids[n]]
    assert len(set(everything)) == len(everything) == 4500
    blocks = {n: {pid // 1000 for pid in ids[n]} for n in BROKERS}
    assert all(len(b) == 2 for b in blocks.values()), blocks
    assert len(set().union(*blocks.values())) == 6, f"no block is shared by two brokers: {blocks}"
    assert max(everything) <= int(zk.json("/latest_producer_id_block")["block_end"])


# ---------------------------------------------------------------- topic administration on a cluster


def test_topic_admin_goes_through_zookeeper(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """Config changes, new partitions and deletion reach every replica through ZooKeeper,
    whichever broker the admin request went to."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    cluster, zk = up(local_cluster, zk_of, config=FAST)
    topic_with_full_isr(cluster, zk, partitions=2, retention_ms="3600000")
    a = AdminClient({"bootstrap.servers": str(cluster.address(max(BROKERS)))})
    res = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    entry = ConfigEntry("segment.bytes", "2097152", incremental_operation=AlterConfigOpType.SET)
    a.incremental_alter_configs(
        [ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[entry])]
    )[res].result(30)
    want = {"retention.ms": "3600000", "segment.bytes": "2097152"}
    assert zk.topic_config(TOPIC) == want
    described = a.describe_configs([res])[res].result(30)
    assert described["segment.bytes"].value == "2097152"

    a.create_partitions([NewPartitions(TOPIC, 4)])[TOPIC].result(30)
    zk.wait_until_isr(TOPIC, range(4), BROKERS, timeout=30)
    _, parts, _ = metadata(cluster.bootstrap_servers, TOPIC)
    assert sorted(parts) == [0, 1, 2, 3]
    assert all(sorted(p.replicas) == sorted(BROKERS) for p in parts.values()), parts

    # Every replica took the overrides (read from the stores once the cluster stops).
    wait_for(
        "every replica's overrides",
        lambda: all(_overrides(cluster, n) == want for n in BROKERS),
        30,
        0.5,
    )
    a.delete_topics([TOPIC])[TOPIC].result(30)
    wait_for("the topic gone from ZooKeeper", lambda: not zk.exists(f"/brokers/topics/{TOPIC}"), 30)
    wait_for("every replica deleted", lambda: all(_overrides(cluster, n) is None for n in BROKERS), 30, 0.5)
    assert not zk.exists(f"/config/topics/{TOPIC}")


def test_manual_replica_assignments(local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]) -> None:
    """CreateTopics and CreatePartitions take each partition's replicas as given (the
    first is the preferred leader, and leads), and refuse what Kafka refuses with
    INVALID_REPLICA_ASSIGNMENT: an unknown broker, a broker twice, partitions of
    different sizes, new partitions of another replication factor than the topic's."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    cluster, zk = up(local_cluster, zk_of, config=FAST)
    a = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    given = [[2, 3], [3, 1], [1, 2]]
    a.create_topics([NewTopic(TOPIC, len(given), -1, replica_assignment=given)])[TOPIC].result(30)
    assert zk.assignment(TOPIC) == dict(enumerate(given))
    wait_for(
        "every partition led by its first replica",
        lambda: all(
            zk.exists(f"/brokers/topics/{TOPIC}/partitions/{p}/state") and zk.leader(TOPIC, p) == r[0]
            for p, r in enumerate(given)
        ),
        30,
    )
    a.create_partitions([NewPartitions(TOPIC, 5, replica_assignment=[[3, 2], [1, 3]])])[TOPIC].result(30)
    assert zk.assignment(TOPIC) == dict(enumerate([*given, [3, 2], [1, 3]]))
    zk.wait_until_isr(TOPIC, range(5), [], timeout=30)

    def refused(future: Any) -> KafkaError:
        with pytest.raises(KafkaException) as e:
            future.result(30)
        return e.value.args[0]

    for bad in ([[1, 9]], [[1, 1]], [[1, 2], [3]]):
        err = refused(a.create_topics([NewTopic("bad", len(bad), -1, replica_assignment=bad)])["bad"])
        assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, (bad, err)
    err = refused(a.create_partitions([NewPartitions(TOPIC, 6, replica_assignment=[[1]])])[TOPIC])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, err
    assert not zk.exists("/brokers/topics/bad")
    assert len(zk.assignment(TOPIC)) == 5


def _overrides(cluster: LocalCluster, n: int) -> dict[str, str] | None:
    """A broker's overrides of TOPIC as its store says (read-only, beside the broker),
    or None once it has no such topic."""
    import seglog

    with seglog.open(cluster.store_path(n), read_only=True) as store:
        if TOPIC not in store.topics():
            return None
        return dict(store.describe(TOPIC).overrides)


# ---------------------------------------------------------------- a replica behind its leader's log start


def test_a_replica_behind_the_leaders_log_start_starts_again_there(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk]
) -> None:
    """While a follower was down, DeleteRecords moved the leader's log start past the
    follower's log end: the follower starts its log again at the leader's log start
    (Kafka's truncateFullyAndStartAt), catches up and rejoins the ISR."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    cluster, zk = up(local_cluster, zk_of, config=FAST)
    parts = topic_with_full_isr(cluster, zk, partitions=1)
    leader = zk.leader(TOPIC, 0)
    away = max(BROKERS - {leader})
    _, failed = produce_and_report(producer(cluster.bootstrap_servers), TOPIC, [(0, b"early")] * 10)
    assert not failed, failed
    cluster.kill(away)
    zk.wait_until_gone(away, timeout=SESSION_MS / 1000 + 20)
    wait_for(f"broker {away} out of the ISR", lambda: away not in zk.isr(TOPIC, 0), 30)
    later, failed = produce_and_report(
        producer(cluster.bootstrap_servers), TOPIC, [(0, f"v-{i}".encode()) for i in range(200)]
    )
    assert not failed, failed
    cut = max(a.offset for a in later) - 50
    a = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    (done,) = a.delete_records([TopicPartition(TOPIC, 0, cut)]).values()
    assert done.result(30).low_watermark == cut
    cluster.start(away)
    zk.wait_until_isr(TOPIC, parts, BROKERS, timeout=60)
    cluster.stop()
    logs = {n: store_log_from(cluster, n, cut) for n in BROKERS}
    assert logs[away] == logs[leader], "the returning replica holds the leader's records from the cut on"
    assert [v for _, v in logs[away]] == [a.value for a in later if a.offset >= cut]
    import seglog

    with seglog.open(cluster.store_path(away), read_only=True) as store:
        start, end = store.offsets(TOPIC, 0)
    assert start == cut and end == max(a.offset for a in later) + 1


def store_log_from(cluster: LocalCluster, n: int, offset: int) -> list[tuple[int, bytes]]:
    """(offset, value) of broker n's partition 0 from ``offset`` on."""
    import seglog

    out: list[tuple[int, bytes]] = []
    with seglog.open(cluster.store_path(n), read_only=True) as store:
        at = offset
        while batch := store.read(TOPIC, 0, at, max_bytes=1 << 20):
            out += [(r.offset, bytes(r.value or b"")) for r in batch if r.offset >= offset]
            at = batch[-1].offset + 1
    return out
