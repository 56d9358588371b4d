"""One log directory and one ZooKeeper, served in turn by a Kafka broker and by seglog.

Kafka 3.9 (ZooKeeper mode) writes idempotent producers' records, a compacted topic
with tombstones, a topic past retention and a group's committed offsets, and stops;
``seglog serve`` starts on its ``log.dirs`` and znodes as the same broker id, on the
same port, and must serve every record as Kafka served it, resume the group from
Kafka's offsets and take the same producers' next batches without a duplicate or an
OutOfOrderSequence. Then the reverse: seglog writes the mix, and Kafka starts on
seglog's directory and serves it, after a clean stop and after a ``kill -9``. Each
test ends with ``seglog verify`` and ``kafka-dump-log`` agreeing on every record.
"""

from __future__ import annotations

import base64
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster_helpers import Zk, group_resumes_at, wait_for
from java_helpers import VERSIONS, read_log_dir, tool
from kafka_reference import REFERENCE_VERSION, KafkaBroker
from seglog.testing import ZooKeeper
from test_kafka_tools import dumps_agree

pytestmark = pytest.mark.java

# The newest Kafka line built here (4.x, KRaft only), whose storage classes read what
# seglog writes as they would a directory of their own.
KAFKA_4 = max(VERSIONS, key=lambda v: tuple(map(int, v.split("."))))

HOUR_MS = 3_600_000
# Kafka's broker keys that make its cleaner and retention act within a test.
KAFKA_QUICK = {
    "log.cleaner.backoff.ms": "100",
    "log.retention.check.interval.ms": "200",
    "offsets.topic.num.partitions": "3",
}
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    "plain": (2, {}),
    "compacted": (
        1,
        {
            "cleanup.policy": "compact",
            "segment.bytes": "1024",
            "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": str(24 * HOUR_MS),
        },
    ),
    "expired": (1, {"retention.ms": str(HOUR_MS), "segment.bytes": "1024"}),
}

Record = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, bytes], ...]]


class Serve:
    """``seglog serve`` as its own process on ``store``, as broker ``node_id`` of the
    cluster at ``zookeeper`` (a chroot), listening on ``port``."""

    def __init__(self, store: Path, zookeeper: str, port: int, *config: str, node_id: int = 0) -> None:
        argv = [sys.executable, "-m", "seglog", "serve", "--store", str(store), "--node-id", str(node_id)]
        self.port = port
        argv += ["--listen", f"127.0.0.1:{port}", "--zookeeper", zookeeper]
        quick = ("log.retention.check.interval.ms=200", "offsets.topic.num.partitions=3")
        for c in (*quick, "offsets.topic.replication.factor=1", *config):
            argv += ["--config", c]
        self.log = store.parent / "seglog.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=out, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "listening on" in line, f"{line!r}\n{self.log.read_text()[-3000:]}"

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        self._close()
        assert code == 0, self.log.read_text()[-3000:]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)
        self._close()

    def _close(self) -> None:
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def kafka_dir(tmp_path: Path, zookeeper: ZooKeeper) -> Iterator[KafkaBroker]:
    """A Kafka 3.9 broker's configuration (not started): its log directory is the one
    both brokers serve, its chroot of the test's ZooKeeper the cluster both join."""
    kafka = KafkaBroker(tmp_path / "kafka", zookeeper.connect_string, log=True, **KAFKA_QUICK)
    yield kafka
    kafka.stop()


def create_topics(bootstrap: str, *, kafka_4_bounds: bool = False) -> None:
    """TOPICS on the broker at ``bootstrap``; where Kafka 4's bounds hold (seglog's
    broker), segments under 1 MiB are asked for as ``internal.segment.bytes``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def config(c: dict[str, str]) -> dict[str, str]:
        if kafka_4_bounds and "segment.bytes" in c:
            c = {("internal.segment.bytes" if k == "segment.bytes" else k): v for k, v in c.items()}
        return c

    wanted = [NewTopic(t, p, 1, config=config(c)) for t, (p, c) in TOPICS.items()]
    for f in admin.create_topics(wanted).values():
        f.result()


class Idempotent:
    """One idempotent producer (acks=all) kept across the broker change: its id,
    epoch and sequences must carry over, so a failed delivery or a fatal error
    (OutOfOrderSequence is fatal to an idempotent librdkafka producer) fails the test.
    Connection errors while no broker listens are expected and not kept."""

    def __init__(self, bootstrap: str) -> None:
        self.errors: list[Any] = []
        self.fatal: list[Any] = []
        self.delivered = 0
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "error_cb": lambda e: e.fatal() and self.fatal.append(e),
                "reconnect.backoff.max.ms": 200,
            }
        )

    def send(self, first: int, n: int) -> None:
        def report(err: Any, _msg: Any) -> None:
            if err is not None:
                self.errors.append(err)
            else:
                self.delivered += 1

        for i in range(first, first + n):
            self.producer.produce(
                "plain",
                f"value-{i}".encode(),
                key=f"key-{i % 13}".encode(),
                headers=[("n", str(i).encode()), ("empty", b"")],
                on_delivery=report,
            )
            self.producer.poll(0)
        assert self.producer.flush(60) == 0
        assert not self.errors and not self.fatal, (self.errors, self.fatal)


def write_the_mix(bootstrap: str, producer: Idempotent) -> dict[int, int]:
    """Writes every kind of data the interchange carries; returns the offsets committed
    for group ``g`` on ``plain``."""
    producer.send(0, 500)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for i in range(40):
        # Small flushes: many batches, so 1 KiB segments roll and the cleaner has work.
        for j in range(10):
            n = i * 10 + j
            plain.produce("compacted", f"v{n}".encode(), key=f"k{n % 10}".encode())
            plain.produce("expired", f"old-{n}".encode(), key=b"e", timestamp=old + n)
        plain.flush(30)
    for k in ("k0", "k1"):
        plain.produce("compacted", None, key=k.encode())
    for i in range(20):
        plain.produce("expired", f"new-{i}".encode(), key=b"e")
    plain.flush(30)
    committed = {0: 100, 1: 37}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("plain", p, o) for p, o in committed.items()], asynchronous=False)
    c.close()
    return committed


def offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def read_all(bootstrap: str) -> dict[tuple[str, int], list[Record]]:
    """Every record of every partition of TOPICS, as (offset, timestamp, key, value, headers)."""
    out: dict[tuple[str, int], list[Record]] = {}
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        for topic, (partitions, _) in TOPICS.items():
            for p in range(partitions):
                start, end = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                c.assign([TopicPartition(topic, p, start)])
                got: list[Record] = []
                deadline = time.monotonic() + 60
                while (not got or got[-1][0] < end - 1) and end > start:
                    assert time.monotonic() < deadline, f"{topic}-{p}: {len(got)} read, end {end}"
                    m = c.poll(0.5)
                    if m is None:
                        continue
                    assert m.error() is None, m.error()
                    headers = tuple((k, v) for k, v in (m.headers() or []))
                    got.append((m.offset(), m.timestamp()[1], m.key(), m.value(), headers))
                out[(topic, p)] = got
    finally:
        c.close()
    return out


def wait_until_led(bootstrap: str) -> None:
    """Until the broker's metadata gives every partition of TOPICS a leader (a broker
    answers before it has taken up its partitions)."""

    def led() -> bool:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
        parts = [
            p
            for t in TOPICS
            if t in md.topics and md.topics[t].error is None
            for p in md.topics[t].partitions.values()
        ]
        return len(parts) == sum(n for n, _ in TOPICS.values()) and all(
            p.leader == 0 and not p.error for p in parts
        )

    wait_for("every partition led", led, timeout=60)


def wait_for_cleaner_and_retention(bootstrap: str, log_dir: Path) -> None:
    """Until the broker has deleted ``expired``'s old segments and cleaned ``compacted``."""
    wait_for("retention", lambda: offsets(bootstrap, "expired", 0)[0] > 0, timeout=60)
    cleaned = log_dir / "cleaner-offset-checkpoint"

    def compacted() -> bool:
        return bool(cleaned.exists() and re.search(r"^compacted 0 [1-9]", cleaned.read_text(), re.M))

    wait_for("the cleaner", compacted, timeout=60)


def check_values_once(records: list[Record], total: int) -> None:
    """``plain`` holds value-0 .. value-(total-1) once each."""
    values = sorted(int(r[3].decode().split("-")[1]) for r in records if r[3] is not None)
    assert values == list(range(total))


def dump_and_verify_agree(log_dir: Path) -> int:
    """``seglog verify`` finds the directory sound, and Kafka's ``kafka-dump-log
    --deep-iteration`` reads the same records as ``seglog dump-log`` in every segment."""
    verify = subprocess.run(
        [sys.executable, "-m", "seglog", "verify", "--store", str(log_dir)], capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    logs = sorted(f for t in TOPICS for f in log_dir.glob(f"{t}-*/*.log"))
    for f in logs:
        dumps_agree(REFERENCE_VERSION, f)
    return len(logs)


def epochs(partition_dir: Path) -> list[tuple[int, int]]:
    lines = (partition_dir / "leader-epoch-checkpoint").read_text().split("\n")
    return [(int(e), int(o)) for e, o in (line.split() for line in lines[2:] if line)]


def epochs_carry_over(kafka: KafkaBroker, before: list[tuple[int, int]]) -> None:
    """``plain-0``'s leader-epoch checkpoint still starts with ``before`` (the other
    broker's), and its last batch carries the leader epoch ZooKeeper gives the partition."""
    part = kafka.log_dir / "plain-0"
    after = epochs(part)
    assert after[: len(before)] == before, (after, before)
    zk = Zk(kafka.zookeeper_connect)
    try:
        epoch = zk.json("/brokers/topics/plain/partitions/0/state")["leader_epoch"]
    finally:
        zk.close()
    assert after[-1][0] == epoch
    last = max(part.glob("*.log"))
    dumped = tool(REFERENCE_VERSION, "kafka-dump-log", "--files", str(last))
    assert re.findall(r"partitionLeaderEpoch: (\d+)", dumped.stdout)[-1] == str(epoch)


def kafka_4_reads(
    log_dir: Path, zookeeper: str, copy: Path, served: dict[tuple[str, int], list[Record]], clean: bool
) -> None:
    """Kafka 4's storage classes, as its broker opens a log directory, read a copy of
    ``log_dir``: meta.properties verified for broker 0 of ZooKeeper's cluster id; the
    clean-shutdown marker, there after a clean stop only; every checkpoint; and every
    partition, opened (and recovered after a kill -9) as a log, holds the records,
    topic id, log start, leader epochs and producer state seglog served and wrote."""
    shutil.copytree(log_dir, copy)
    zk = Zk(zookeeper)
    try:
        cluster_id = zk.json("/cluster/id")["id"]
        topic_ids = {t: zk.json(f"/brokers/topics/{t}")["topic_id"] for t in TOPICS}
    finally:
        zk.close()
    lines = read_log_dir(KAFKA_4, copy, cluster_id, 0)
    assert lines[0] == {"meta": {"version": 0, "cluster_id": cluster_id, "node_id": 0}}
    assert lines[1] == {"clean_shutdown": clean}
    checkpoints = {line["checkpoint"]: line["entries"] for line in lines if "checkpoint" in line}
    assert set(checkpoints) == {
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
    }
    partitions = {line["partition"]: line for line in lines if "partition" in line}
    assert sum(name.startswith("__consumer_offsets-") for name in partitions) == 3
    records: dict[str, list[Record]] = {}

    def data(b: str | None) -> bytes | None:
        return None if b is None else base64.b64decode(b)

    for line in lines:
        if "record" in line:
            headers = tuple((k, base64.b64decode(v)) for k, v in line["headers"])
            got = (line["offset"], line["timestamp"], data(line["key"]), data(line["value"]), headers)
            records.setdefault(line["record"], []).append(got)
    for (topic, p), want in served.items():
        name = f"{topic}-{p}"
        part = partitions[name]
        assert records.get(name, []) == want, name
        assert part["topic_id"] == topic_ids[topic]
        assert part["log_end"] == want[-1][0] + 1, "recovery cut nothing"
        assert part["log_start"] <= want[0][0]
        if clean:
            assert checkpoints["recovery-point-offset-checkpoint"][name] == part["log_end"]
            assert checkpoints["replication-offset-checkpoint"][name] == part["log_end"]
    assert partitions["expired-0"]["log_start"] == served[("expired", 0)][0][0] > 0
    assert [tuple(e) for e in partitions["plain-0"]["epochs"]] == epochs(log_dir / "plain-0")
    for p in (0, 1):
        # One idempotent producer wrote plain, its sequences from 0 in each partition.
        assert list(partitions[f"plain-{p}"]["producers"].values()) == [len(served[("plain", p)]) - 1]


@pytest.mark.parametrize("stop", ["clean", "kill -9 and a torn tail"])
def test_seglog_serves_a_log_directory_kafka_wrote(kafka_dir: KafkaBroker, stop: str) -> None:
    kafka = kafka_dir
    kafka.start()
    create_topics(kafka.bootstrap_servers)
    producer = Idempotent(kafka.bootstrap_servers)
    committed = write_the_mix(kafka.bootstrap_servers, producer)
    wait_for_cleaner_and_retention(kafka.bootstrap_servers, kafka.log_dir)
    served_by_kafka = read_all(kafka.bootstrap_servers)
    if stop == "clean":
        kafka.stop()
    else:
        # Killed mid-write: the last segment of plain-1 ends in half a batch, which
        # recovery must cut (as Kafka's own does) while keeping every whole one.
        assert kafka.proc is not None
        kafka.proc.kill()
        kafka.proc.wait(30)
        last = max((kafka.log_dir / "plain-1").glob("*.log"))
        whole = last.read_bytes()
        first_batch = whole[: 12 + int.from_bytes(whole[8:12], "big")]
        with last.open("ab") as f:
            f.write(first_batch[: len(first_batch) // 2])
        zk = Zk(kafka.zookeeper_connect)
        try:
            wait_for("Kafka's session to expire", lambda: not zk.exists("/brokers/ids/0"), timeout=60)
        finally:
            zk.close()
    kafka_epochs = epochs(kafka.log_dir / "plain-0")

    seglog_broker = Serve(kafka.log_dir, kafka.zookeeper_connect, kafka.port)
    try:
        bootstrap = kafka.bootstrap_servers  # the same address: clients carry on
        wait_until_led(bootstrap)
        assert read_all(bootstrap) == served_by_kafka
        assert served_by_kafka[("expired", 0)][0][0] > 0
        assert len(served_by_kafka[("compacted", 0)]) < 402
        assert offsets(bootstrap, "expired", 0)[0] == served_by_kafka[("expired", 0)][0][0]
        group_resumes_at(bootstrap, "g", "plain", committed)
        # Kafka's producer state, from its snapshots: the same producer's next
        # batches are taken in sequence, and nothing it sent before is duplicated.
        producer.send(500, 200)
        plain = read_all(bootstrap)
        check_values_once(plain[("plain", 0)] + plain[("plain", 1)], 700)
        for p in (0, 1):
            assert plain[("plain", p)][: len(served_by_kafka[("plain", p)])] == served_by_kafka[("plain", p)]
    finally:
        seglog_broker.stop()
    epochs_carry_over(kafka, kafka_epochs)
    assert dump_and_verify_agree(kafka.log_dir) >= 5


@pytest.mark.parametrize("stop", ["clean", "kill -9"])
def test_kafka_serves_a_log_directory_seglog_wrote(kafka_dir: KafkaBroker, stop: str, tmp_path: Path) -> None:
    kafka = kafka_dir
    kafka.log_dir.mkdir(parents=True)
    seglog_broker = Serve(
        kafka.log_dir, kafka.zookeeper_connect, kafka.port, "zookeeper.session.timeout.ms=6000"
    )
    bootstrap = kafka.bootstrap_servers
    try:
        create_topics(bootstrap, kafka_4_bounds=True)
        producer = Idempotent(bootstrap)
        committed = write_the_mix(bootstrap, producer)
        wait_for_cleaner_and_retention(kafka.bootstrap_servers, kafka.log_dir)
        served_by_seglog = read_all(bootstrap)
    finally:
        if stop == "clean":
            seglog_broker.stop()
        else:
            seglog_broker.kill()
    seglog_epochs = epochs(kafka.log_dir / "plain-0")
    if stop == "kill -9":
        # As for a Kafka broker killed so: its registration lasts until ZooKeeper
        # expires its session, and the next broker 0 cannot register before.
        zk = Zk(kafka.zookeeper_connect)
        try:
            wait_for("broker 0's session to expire", lambda: not zk.exists("/brokers/ids/0"), timeout=60)
        finally:
            zk.close()
    kafka_4_reads(
        kafka.log_dir, kafka.zookeeper_connect, tmp_path / "copy", served_by_seglog, stop == "clean"
    )

    kafka.start()
    wait_until_led(bootstrap)
    assert read_all(bootstrap) == served_by_seglog
    group_resumes_at(bootstrap, "g", "plain", committed)
    producer.send(500, 200)
    plain = read_all(bootstrap)
    check_values_once(plain[("plain", 0)] + plain[("plain", 1)], 700)
    kafka.stop()
    epochs_carry_over(kafka, seglog_epochs)
    said = kafka.server_log.read_text()
    # Kafka recovers what an unclean stop leaves as it does its own logs (rebuilding
    # the producer state past the last snapshot); it finds nothing corrupt to cut.
    recovered = "since no clean shutdown file was found" in said
    assert recovered == (stop == "kill -9"), "Kafka takes seglog's clean-shutdown marker as its own"
    for trouble in (
        "Found invalid",
        "CorruptRecordException",
        "InconsistentTopicId",
        "does not match the topic ID",
    ):
        assert trouble not in said, [line for line in said.splitlines() if trouble in line][:5]
    assert dump_and_verify_agree(kafka.log_dir) >= 5
