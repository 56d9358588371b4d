"""Replication: a three-broker cluster on loopback (``seglog._cluster.LocalCluster``:
a standalone ZooKeeper from Debian's package, three ``seglog serve`` processes in
racks r1-r3), measured with confluent-kafka as the broker rows are.

- R1 RF 1, acks=all: one partition on one broker, the reference for the rows below.
- R2 RF 3, acks=all, min.insync.replicas=2: a write is acknowledged once both
  followers fetched it (two fetch round trips after the append). Kafka's 2014
  figures: synchronous 3x replication kept 51 % of RF 1's throughput.
- R3 RF 3, acks=1: the leader answers after its own append and the followers copy
  behind it (Kafka's "async" replication: 96 % of RF 1).
- R4 failover: kill -9 of the leader of a partition under a paced acks=all
  producer, timed to the first write acknowledged by its successor; target: under
  ``zookeeper.session.timeout.ms`` + 1 s (the session must expire before the
  controller may elect). The killed broker is restarted and rejoins the ISR between
  runs; the median over the runs.

Each throughput run creates a fresh topic (so every run starts from empty logs) in
one cluster that lives for the whole group; the ratio column is the row's rate over
R1's, measured in the same run.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness import Bench, Result, Target, rmtree

from .broker import PRODUCER

SESSION_TIMEOUT_MS = 4000
FAILOVER_RUNS = 3
CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS,
    "replica.lag.time.max.ms": 10000,
    # leadership stays where failover put it: R4 measures one election per run
    "auto.leader.rebalance.enable": "false",
}


def replication_group(b: Bench) -> None:
    try:
        from confluent_kafka import Producer  # noqa: F401
    except ImportError:
        print("replication: confluent-kafka not installed: no R rows", file=sys.stderr)
        return
    from seglog.testing import LocalCluster, ZooKeeperNotInstalledError

    n = b.data.n
    print(f"replication ({n:,} records; 3 brokers, racks r1-r3, ZooKeeper standalone)", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="replication-", dir=b.root))
    try:
        cluster = LocalCluster(root, 3, config=CLUSTER_CONFIG)
    except ZooKeeperNotInstalledError as e:
        print(f"replication: {e}: no R rows (make bench installs it)", file=sys.stderr)
        rmtree(root)
        return
    try:
        with cluster:
            _wait_for_brokers(cluster.bootstrap_servers, 3)
            throughput_rows(b, cluster.bootstrap_servers)
            failover_row(b, cluster)
    finally:
        rmtree(root)


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _wait_for_brokers(bootstrap: str, count: int, timeout: float = 60.0) -> None:
    admin = _admin(bootstrap)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=5)
        if len(md.brokers) >= count and md.controller_id >= 0:
            return
        time.sleep(0.2)
    raise RuntimeError(
        f"the cluster at {bootstrap} did not show {count} brokers and a controller in {timeout:g} s"
    )


def _create(bootstrap: str, topic: str, partitions: int, rf: int, config: dict[str, str]) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    fut = admin.create_topics([NewTopic(topic, partitions, rf, config=config)], request_timeout=30)[topic]
    fut.result(30)
    # Leaders elected and known to every broker: Metadata names one per partition.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        if (
            t is not None
            and t.error is None
            and all(p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values())
        ):
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} has no leaders with a full ISR after 30 s")


def throughput_rows(b: Bench, bootstrap: str) -> None:
    from confluent_kafka import Producer

    d, n = b.data, b.data.n
    counter = iter(range(1_000_000))
    rows = [
        ("R1", 1, "all", "RF 1, acks=all"),
        ("R2", 3, "all", "RF 3, acks=all, min.insync.replicas=2"),
        ("R3", 3, "1", "RF 3, acks=1 (followers copy behind the leader)"),
    ]
    shares = {"R2": 0.51, "R3": 0.96}
    for id, rf, acks, what in rows:

        def setup(_m: int, rf: int = rf) -> str:
            topic = f"bench-{next(counter)}"
            config = {"min.insync.replicas": "2"} if rf == 3 else {}
            _create(bootstrap, topic, 1, rf, config)
            return topic

        def body(topic: str, m: int, acks: str = acks) -> None:
            p = Producer({"bootstrap.servers": bootstrap, "acks": acks, **PRODUCER})
            produce, poll = p.produce, p.poll
            keys, values = d.keys, d.values
            for i in range(m):
                try:
                    produce(topic, values[i], keys[i])
                except BufferError:
                    poll(0.01)
                    produce(topic, values[i], keys[i])
            left = p.flush(120)
            if left:
                raise AssertionError(f"{left} records not delivered after flush(120)")

        def finish(topic: str, m: int) -> int:
            admin = _admin(bootstrap)  # held until the deletion is answered
            admin.delete_topics([topic], request_timeout=30)[topic].result(30)
            return sum(len(d.keys[i]) + len(d.values[i]) for i in range(m))

        target = Target("ratio_of", shares[id], "R1") if id in shares else None
        r = Result(
            id, "replication", "broker", f"confluent-kafka produce() per record, {what}", "records/s", n
        )
        r.vs_embedded = "R1" if id != "R1" else None
        r.target = target
        b.timed(r, setup, body, finish)


def failover_row(b: Bench, cluster: Any) -> None:
    """R4: kill -9 of a partition's leader to the first write its successor acknowledges."""
    from confluent_kafka import Producer

    bootstrap = cluster.bootstrap_servers
    topic = "bench-failover"
    _create(bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    r = Result(
        "R4",
        "replication",
        "broker",
        f"failover: kill -9 of the leader to the successor's first acks=all write "
        f"(zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS})",
        "us",
        FAILOVER_RUNS,
        target=Target("max_us", (SESSION_TIMEOUT_MS + 1000) * 1000.0),
    )
    admin = _admin(bootstrap)
    for _ in range(FAILOVER_RUNS):
        leader = admin.list_topics(topic, timeout=5).topics[topic].partitions[0].leader
        acked: list[tuple[float, int]] = []  # (time, offset) of each acknowledgement
        stop = threading.Event()

        def write(stop: threading.Event = stop, acked: list[tuple[float, int]] = acked) -> None:
            # A paced writer (1 record per ms) that retries until acknowledged.
            p = Producer(
                {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 60000}
            )

            def done(err: Any, msg: Any) -> None:
                if err is None:
                    acked.append((time.perf_counter(), msg.offset()))

            while not stop.is_set():
                p.produce(topic, b"x" * 100, callback=done)
                p.poll(0.001)
            p.flush(60)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        while not acked:
            time.sleep(0.01)
        time.sleep(0.5)
        killed_at = time.perf_counter()
        cluster.kill(leader)
        deadline = killed_at + 60
        while time.perf_counter() < deadline:
            after = [t for t, _ in acked if t > killed_at]
            md = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
            if after and md.leader not in (leader, -1):
                break
            time.sleep(0.01)
        stop.set()
        writer.join(60)
        # The first acknowledgement after the kill that the successor gave: the
        # old leader's last answers (sent before it died) arrive just before.
        first = min((t for t, _ in acked if t > killed_at + 0.05), default=None)
        if first is None:
            raise AssertionError("no write acknowledged within 60 s of the leader's kill")
        r.runs_us.append((first - killed_at) * 1e6)
        cluster.start(leader)
        _wait_full_isr(admin, topic, 3)
    b.report.add(r)


def _wait_full_isr(admin: Any, topic: str, rf: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
        if len(p.isrs) == rf and p.leader >= 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: the restarted broker did not rejoin the ISR in {timeout:g} s")
