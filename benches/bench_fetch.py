"""Fetch sessions (KIP-227) and follower fetching (KIP-392), measured in one run.

    .venv/bin/python benches/bench_fetch.py [--partitions 1000] [--moving 10]
                                            [--fetches 200] [--runs 3] [--mib 16]

**Fetch sessions.** A consumer of a topic of 1,000 partitions, 10 of which get a record
before each of its fetches, fetches with Fetch v11 as Kafka's Java consumer does: without
a session (every request names every partition, every response answers each) and in a
session (a request names the partitions whose position moved, a response only those with
news). Against `seglog serve` and against a Kafka 3.9 broker (ZooKeeper mode, the JVM
settings of kafka-server-start.sh), each alone while it is measured: bytes per request,
bytes per response and the round trip per fetch (median over a run's fetches; median and
range over the runs), and the ratio in a session to without one.

**Follower fetching.** Three `seglog serve` brokers in racks r1..r3 on one ZooKeeper, a
topic of one partition led by broker 1 with replicas on all three; a librdkafka consumer
with `client.rack=r2` reads `--mib` MiB of it, with `replica.selector.class` the
rack-aware selector and without: the bytes it took from each broker (librdkafka's
statistics), the share that crossed racks, and its records/s.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.testing import LocalCluster, ZooKeeper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benches"))

from bench_kafka import kafka_brokers, seglog_serve, spread  # noqa: E402
from broker_helpers import fetch_request_v11, frame, parse_fetch_v11  # noqa: E402
from cluster_helpers import Zk  # noqa: E402

TOPIC = "wide"
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def fetches(bootstrap: str, partitions: int, moving: int, n: int, session: bool) -> dict[str, float]:
    """``n`` fetches of a consumer of every partition, ``moving`` of them written to
    before each: medians of request bytes, response bytes and round-trip ms."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    s = socket.create_connection((host, int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    position = dict.fromkeys(range(partitions), 0)
    named = dict(position)  # what the session last heard of each position
    session_id, epoch = 0, 0 if session else -1
    sizes_out, sizes_in, rtts = [], [], []
    for i in range(n + 1):
        for k in range(moving):
            producer.produce(TOPIC, b"v" * 100, partition=(i * moving + k) % partitions)
        assert producer.flush(30) == 0
        if session and session_id:
            wanted = [(TOPIC, p, o) for p, o in position.items() if named[p] != o]
        else:
            wanted = [(TOPIC, p, o) for p, o in position.items()]
        request = frame(1, 11, i, fetch_request_v11(session_id, epoch, wanted))
        t = time.perf_counter()
        s.sendall(request)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        body = recv_exact(s, size)
        rtt = time.perf_counter() - t
        error, sid, answered = parse_fetch_v11(body[4:])
        assert error == 0, error
        for _, p, err, hw, _ in answered:
            assert err == 0, (p, err)
            position[p] = hw
        if session:
            named.update({p: o for _, p, o in wanted})
            assert sid != 0, "no session was made"
            session_id, epoch = sid, epoch + 1
        if i:  # the first fetch of a session is a full one
            sizes_out.append(len(request))
            sizes_in.append(size + 4)
            rtts.append(rtt * 1000)
    s.close()
    return {
        "request_bytes": statistics.median(sizes_out),
        "response_bytes": statistics.median(sizes_in),
        "rtt_ms": statistics.median(rtts),
    }


def create(bootstrap: str, partitions: int, replicas: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, replicas)])[TOPIC].result()


def sessions_rows(root: Path, zk: ZooKeeper, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for r in range(args.runs):
        for side in ("kafka", "seglog"):
            where = root / f"sessions-{side}-{r}"
            broker = seglog_serve(where) if side == "seglog" else kafka_brokers(where, zk.connect_string, 1)
            with broker as (bootstrap, _):
                create(bootstrap, args.partitions)
                for session in (False, True):
                    row = f"{side} {'session' if session else 'no session'}"
                    got = fetches(bootstrap, args.partitions, args.moving, args.fetches, session)
                    for k, v in got.items():
                        out.setdefault(row, {}).setdefault(k, []).append(v)
            print(f"fetch sessions round {r + 1}/{args.runs}, {side}: done", flush=True)
    return out


@contextmanager
def racked_cluster(dir: Path, zk: ZooKeeper, selector: bool) -> Iterator[LocalCluster]:
    config = {"replica.selector.class": RACK_AWARE} if selector else {}
    with LocalCluster(dir, 3, racks=True, zookeeper=zk, config=config) as cluster:
        cluster.wait_until_ready()
        yield cluster


def read_through(bootstrap: str, topic: str, records: int, rx: dict[str, int]) -> float:
    """Reads ``records`` records of partition 0 as a consumer in rack r2; the seconds it
    took, and into ``rx`` the bytes received from each broker (librdkafka's statistics)."""

    def stats(text: str) -> None:
        for b in json.loads(text)["brokers"].values():
            if b.get("nodeid", -1) >= 0:
                rx[str(b["nodeid"])] = max(rx.get(str(b["nodeid"]), 0), b["rxbytes"])

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "client.rack": "r2",
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": stats,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    read, t = 0, time.perf_counter()
    while read < records:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            read += 1
    took = time.perf_counter() - t
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:  # the last statistics report
        c.poll(0.2)
    c.close()
    return took


def follower_rows(
    root: Path, zookeeper: ZooKeeper, args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    records = args.mib * 1024  # 1 KiB each
    for r in range(args.runs):
        for selector in (False, True):
            # One ZooKeeper for every cluster: a topic name of its own each time.
            topic = f"racks-{r}-{int(selector)}"
            with racked_cluster(root / topic, zookeeper, selector) as cluster:
                admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
                new = NewTopic(topic, num_partitions=1, replication_factor=-1, replica_assignment=[[1, 2, 3]])
                admin.create_topics([new])[topic].result()
                zk = Zk(cluster.zookeeper_connect)
                zk.wait_until_isr(topic, [0], {1, 2, 3})
                zk.close()
                p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
                for i in range(records):
                    while True:
                        try:
                            p.produce(topic, b"%1024d" % i, partition=0)
                            break
                        except BufferError:
                            p.poll(0.1)
                assert p.flush(60) == 0
                # Once untimed, so that the r2 replica's high watermark has caught up (a
                # follower learns it on its next fetch); then timed, with statistics.
                read_through(cluster.bootstrap_servers, topic, records, {})
                rx: dict[str, int] = {}
                took = read_through(cluster.bootstrap_servers, topic, records, rx)
            row = "rack-aware selector" if selector else "leader only"
            total = sum(rx.values())
            figures = {
                "records_per_s": records / took,
                "from_leader_b1_mib": rx.get("1", 0) / 2**20,
                "from_r2_replica_mib": rx.get("2", 0) / 2**20,
                "cross_rack_share": (total - rx.get("2", 0)) / total if total else 0.0,
            }
            for k, v in figures.items():
                out.setdefault(row, {}).setdefault(k, []).append(v)
            print(f"follower fetching round {r + 1}/{args.runs}, {row}: done", flush=True)
    return out


def report(title: str, rows: dict[str, dict[str, list[float]]], pairs: list[tuple[str, str]]) -> None:
    print(f"\n{title} (median and range over the runs)")
    keys = list(next(iter(rows.values())))
    print(f"{'':28}" + "".join(f"{k:>30}" for k in keys))
    for row, figures in rows.items():
        print(f"{row:28}" + "".join(f"{spread(figures[k]):>30}" for k in keys))
    for a, b in pairs:
        ratios = "  ".join(
            f"{k} {statistics.median(rows[a][k]) / statistics.median(rows[b][k]):.3f}x"
            for k in keys
            if statistics.median(rows[b][k])
        )
        print(f"{a} / {b}: {ratios}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--moving", type=int, default=10, help="partitions written to before each fetch")
    ap.add_argument("--fetches", type=int, default=200)
    ap.add_argument("--mib", type=int, default=16, help="MiB the rack-aware consumer reads")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ZooKeeper(Path(tmp) / "zookeeper") as zk:
        root = Path(tmp)
        sessions = sessions_rows(root, zk, args)
        racks = follower_rows(root, zk, args)
    report(
        f"Fetch sessions: {args.partitions} partitions, {args.moving} written to before each fetch",
        sessions,
        [
            ("seglog session", "seglog no session"),
            ("kafka session", "kafka no session"),
            ("seglog session", "kafka session"),
        ],
    )
    report(
        f"Follower fetching: a consumer in rack r2 reading {args.mib} MiB led in r1",
        racks,
        [("rack-aware selector", "leader only")],
    )


if __name__ == "__main__":
    main()
