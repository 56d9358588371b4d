"""Replication throttles, Kafka's way: the dynamic broker configs
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate`` (per
broker and as the cluster's default) and the topic configs naming the throttled
replicas, as ``kafka-configs`` sets them and ``kafka-reassign-partitions --throttle``
uses them; compared with a Kafka 3.9 broker, and applied to a moving replica."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

import seglog
from cluster_helpers import Zk, replica_logs, wait_for
from java_helpers import tool
from kafka_reference import REFERENCE_VERSION, KafkaBroker
from seglog.testing import LocalCluster, ZooKeeper
from test_replication import FAST, TOPIC, MakeCluster

pytestmark = pytest.mark.java

LEADER = "leader.replication.throttled.rate"
FOLLOWER = "follower.replication.throttled.rate"
ALTER_DIRS = "replica.alter.log.dirs.io.max.bytes.per.second"


def configs(bootstrap: str, *args: str) -> str:
    """What ``kafka-configs`` prints (stdout, or the cause of a failure), less log4j's notes."""
    p = tool(REFERENCE_VERSION, "kafka-configs", "--bootstrap-server", bootstrap, *args, check=False)
    if p.returncode != 0:
        causes = re.findall(r"^Caused by: (.*)$", p.stderr, re.M)
        return "FAILED: " + (causes[-1] if causes else p.stderr.strip().splitlines()[-1])
    return "\n".join(line for line in p.stdout.splitlines() if line.strip())


def session(bootstrap: str, broker_id: int) -> list[str]:
    """The same operator session run against a broker of id ``broker_id``."""
    b = ["--entity-type", "brokers", "--entity-name", str(broker_id)]
    default = ["--entity-type", "brokers", "--entity-default"]
    topic = ["--entity-type", "topics", "--entity-name", "t"]
    tool(REFERENCE_VERSION, "kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", "t")
    out = [
        configs(bootstrap, "--describe", *b),
        configs(bootstrap, "--alter", *b, "--add-config", f"{LEADER}=1000,{FOLLOWER}=2000"),
        configs(bootstrap, "--alter", *default, "--add-config", f"{FOLLOWER}=3000,{ALTER_DIRS}=5"),
        configs(bootstrap, "--describe", *b),
        configs(bootstrap, "--describe", *default),
        configs(bootstrap, "--alter", *b, "--add-config", f"{LEADER}=-1"),
        configs(bootstrap, "--alter", *b, "--add-config", f"{LEADER}=abc"),
        configs(bootstrap, "--alter", *b, "--delete-config", LEADER),
        configs(bootstrap, "--alter", *default, "--delete-config", f"{ALTER_DIRS},{LEADER}"),
        configs(bootstrap, "--describe", *b),
        configs(bootstrap, "--describe", *default),
    ]
    for value in ["*", "0:0,1:0", "x", "0:a", "*,0:1"]:
        out.append(
            configs(
                bootstrap,
                "--alter",
                *topic,
                "--add-config",
                f"leader.replication.throttled.replicas=[{value}]",
            )
        )
    out.append(
        configs(
            bootstrap, "--alter", *topic, "--add-config", "follower.replication.throttled.replicas=[0:0,]"
        )
    )
    out.append(configs(bootstrap, "--describe", *topic))
    return out


def test_throttle_configs_as_kafka_takes_and_shows_them(zookeeper: ZooKeeper, tmp_path: Path) -> None:
    """kafka-configs sets, shows, refuses and deletes the throttle rates (per broker and
    the cluster's default) and the throttled-replica lists exactly as on a Kafka 3.9
    broker; a single seglog broker keeps its dynamic configs across a restart."""
    with KafkaBroker(tmp_path / "kafka", zookeeper.connect_string) as kafka:
        expected = session(kafka.bootstrap_servers, kafka.broker_id)
    store = seglog.open(tmp_path / "store")
    with store, seglog.Broker(store) as broker:
        got = session(broker.bootstrap_servers, broker.node_id)
    for want, have in zip(expected, got, strict=True):
        assert have == want
    # What the session left is there after a restart.
    store = seglog.open(tmp_path / "store")
    with store, seglog.Broker(store) as broker:
        assert (
            configs(broker.bootstrap_servers, "--describe", "--entity-type", "brokers", "--entity-default")
            == (got[-8])
        )
        assert (
            configs(broker.bootstrap_servers, "--describe", "--entity-type", "brokers", "--entity-name", "0")
            == got[-9]
        )


def throttle_configs(admin: AdminClient, brokers: list[int]) -> dict[str, dict[str, str]]:
    """Each broker's throttle rates and the topic's throttled-replica lists, as set."""
    resources = [ConfigResource("BROKER", str(b)) for b in brokers] + [ConfigResource("TOPIC", TOPIC)]
    out: dict[str, dict[str, str]] = {}
    for resource in resources:  # librdkafka takes one BROKER resource per call
        for res, future in admin.describe_configs([resource]).items():
            out[res.name] = {
                k: e.value
                for k, e in future.result().items()
                if "throttled" in k and e.value and e.source != 5  # 5: DEFAULT_CONFIG
            }
    return out


@pytest.mark.cluster
def test_reassignment_with_a_throttle_copies_within_it(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], tmp_path: Path
) -> None:
    """kafka-reassign-partitions --throttle moves t-0 from {1,2,3} to {1,2,4}: it sets
    the rates on the brokers and the throttled replicas on the topic, the new replica
    copies while it leaves the partition out of its own fetches, nothing is lost, and
    --verify removes every throttle once the move is done. Moving back to {1,2,3} with
    a leader-side throttle alone (set with kafka-configs) has the leader hold records
    back from the new replica instead."""
    cluster = local_cluster(brokers=4, config=FAST, metrics=True)
    zk = zk_of(cluster)
    zk.wait_until_registered({1, 2, 3, 4})
    bs = ["--bootstrap-server", cluster.bootstrap_servers]
    tool(
        REFERENCE_VERSION, "kafka-topics", *bs, "--create", "--topic", TOPIC, "--replica-assignment", "1:2:3"
    )
    zk.wait_until_isr(TOPIC, [0], {1, 2, 3})
    # 16 MiB: well past what the rates' burst allowance (ten windows' worth) lets by.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20})
    value = bytes(range(256)) * 64
    for i in range(1024):
        producer.produce(TOPIC, value=value, key=str(i).encode())
        producer.poll(0)
    assert producer.flush(60) == 0
    size = 1024 * len(value)

    rate = 400_000
    plan = tmp_path / "move.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2, 4]}]})
    )
    reassign = ["kafka-reassign-partitions", *bs, "--reassignment-json-file", str(plan)]
    started = time.monotonic()
    out = tool(REFERENCE_VERSION, *reassign, "--execute", "--throttle", str(rate)).stdout
    assert f"Successfully started partition reassignment for {TOPIC}-0" in out, out
    assert "The inter-broker throttle limit was set to 400000 B/s" in out, out

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    set_now = throttle_configs(admin, [1, 2, 3, 4])
    for b in ("1", "2", "3", "4"):
        assert set_now[b] == {
            "leader.replication.throttled.rate": str(rate),
            "follower.replication.throttled.rate": str(rate),
        }, set_now
    assert set_now[TOPIC] == {
        "leader.replication.throttled.replicas": "0:1,0:2,0:3",
        "follower.replication.throttled.replicas": "0:4",
    }, set_now

    def verified() -> str | None:
        out = tool(REFERENCE_VERSION, *reassign, "--verify").stdout
        return out if f"Reassignment of partition {TOPIC}-0 is completed" in out else None

    done = wait_for(f"{TOPIC}-0 moved to [1, 2, 4]", verified, 300, 1.0)
    elapsed = time.monotonic() - started
    assert "Clearing broker-level throttles on brokers 1,2,3,4" in done, done
    assert f"Clearing topic-level throttles on topic {TOPIC}" in done, done
    zk.wait_until_isr(TOPIC, [0], {1, 2, 4})

    leader = cluster.metrics(1)
    follower = cluster.metrics(4)
    print(
        f"\n{size / 2**20:.0f} MiB copied to broker 4 in {elapsed:.1f} s "
        f"({size / elapsed / 1e3:.0f} kB/s under a {rate / 1e3:.0f} kB/s throttle); "
        f"leader held back {leader['leader_replication_held_back_total']:.0f} times, "
        f"follower {follower['follower_replication_held_back_total']:.0f} times"
    )
    # Both sides counted the moving replica's bytes against their rate and held it back.
    assert follower["follower_replication_throttled_bytes_total"] >= size
    assert leader["leader_replication_throttled_bytes_total"] >= size
    assert leader["leader_replication_held_back_total"] + follower["follower_replication_held_back_total"] > 0
    # The ISR's replicas were never held back: they are in sync.
    for b in (2, 3):
        assert cluster.metrics(b)["follower_replication_held_back_total"] == 0

    # --verify cleared the rates on every broker and the lists on the topic.
    cleared = throttle_configs(admin, [1, 2, 3, 4])
    assert all(v == {} for v in cleared.values()), cleared
    assert zk.json("/config/brokers/4")["config"] == {}

    # The new replica holds every record, in order.
    keys = [str(i).encode() for i in range(1024)]
    assert [r[1] for r in replica_logs(cluster, TOPIC, [0])[4][0][0]] == keys

    # Back to {1,2,3}, throttled at the leader only.
    leader_id = zk.leader(TOPIC, 0)
    before = cluster.metrics(leader_id)["leader_replication_held_back_total"]
    to_leader = ["--entity-type", "brokers", "--entity-name", str(leader_id)]
    set_rate = configs(cluster.bootstrap_servers, "--alter", *to_leader, "--add-config", f"{LEADER}={rate}")
    assert set_rate == f"Completed updating config for broker {leader_id}.", set_rate
    to_topic = ["--entity-type", "topics", "--entity-name", TOPIC]
    every = "leader.replication.throttled.replicas=[*]"
    set_list = configs(cluster.bootstrap_servers, "--alter", *to_topic, "--add-config", every)
    assert set_list == f"Completed updating config for topic {TOPIC}.", set_list
    # Broker 3 left the replicas: it empties its copy, so all of it is copied back.
    wait_for("broker 3 without t-0", lambda: not replica_logs(cluster, TOPIC, [0])[3][0][0], 30, 0.5)
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2, 3]}]})
    )
    started = time.monotonic()
    out = tool(REFERENCE_VERSION, *reassign, "--execute").stdout
    assert f"Successfully started partition reassignment for {TOPIC}-0" in out, out
    wait_for(f"{TOPIC}-0 moved back to [1, 2, 3]", verified, 300, 1.0)
    elapsed = time.monotonic() - started
    held_back = cluster.metrics(leader_id)["leader_replication_held_back_total"] - before
    print(
        f"back to broker 3 in {elapsed:.1f} s; leader {leader_id} alone throttling "
        f"held back {held_back:.0f} times"
    )
    assert held_back > 0
    assert cluster.metrics(3)["follower_replication_held_back_total"] == 0
    assert [r[1] for r in replica_logs(cluster, TOPIC, [0])[3][0][0]] == keys
