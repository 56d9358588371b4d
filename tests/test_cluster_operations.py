"""Operating a cluster as Kafka's operators do, under load: a rolling restart with
controlled shutdown (SIGTERM hands every leadership over before the broker leaves), checked
on ZooKeeper's znodes (the order of the writes), on what the producers were told, and on
the logs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from cluster_helpers import BackgroundProducer, Zk, check_acknowledged, consume_all, next_offsets, wait_for
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
