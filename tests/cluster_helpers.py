"""What the cluster tests share: ZooKeeper's znodes read with kazoo (Kafka's layout and
JSON), Metadata as confluent-kafka sees it, a background producer that remembers what it
was told, the checker of acknowledged writes, and the replicas' logs read from their
store directories. Every wait has a deadline: a test fails, it never hangs."""

from __future__ import annotations

import contextlib
import itertools
import json
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

import seglog
from seglog.testing import LocalCluster

T = TypeVar("T")

# Kafka's error codes.
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


def wait_for(what: str, check: Callable[[], T], timeout: float, interval: float = 0.1) -> T:
    """Polls ``check`` until it returns something true and returns that; fails the test
    after ``timeout`` seconds, naming ``what`` and the last value (or error) seen."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
            if value:
                return value
            last = value
        except Exception as e:  # a broker or ZooKeeper between states: try again
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f}s (last seen: {last!r})")
        time.sleep(interval)


# ---------------------------------------------------------------- ZooKeeper, read as Kafka's tools read it


class Zk:
    """A kazoo session on the cluster's ZooKeeper and readers of Kafka's znodes."""

    def __init__(self, connect: str) -> None:
        self.client = KazooClient(hosts=connect, timeout=10.0)
        self.client.start(timeout=30)

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def json(self, path: str) -> Any:
        data, _stat = self.client.retry(self.client.get, path)
        return json.loads(data.decode())

    def text(self, path: str) -> str:
        data, _stat = self.client.retry(self.client.get, path)
        return str(data.decode())

    def exists(self, path: str) -> bool:
        return self.client.retry(self.client.exists, path) is not None

    def broker_ids(self) -> set[int]:
        """The brokers registered now: the children of /brokers/ids."""
        try:
            return {int(c) for c in self.client.retry(self.client.get_children, "/brokers/ids")}
        except NoNodeError:
            return set()

    def broker(self, n: int) -> dict[str, Any]:
        """/brokers/ids/N: {"host", "port", "rack", "endpoints", ...}."""
        return dict(self.json(f"/brokers/ids/{n}"))

    def controller(self) -> int:
        """The broker id in /controller."""
        return int(self.json("/controller")["brokerid"])

    def assignment(self, topic: str) -> dict[int, list[int]]:
        """/brokers/topics/T: replicas per partition, in preferred order."""
        parts = self.json(f"/brokers/topics/{topic}")["partitions"]
        return {int(p): [int(r) for r in rs] for p, rs in parts.items()}

    def state(self, topic: str, partition: int) -> dict[str, Any]:
        """/brokers/topics/T/partitions/P/state: {"controller_epoch", "leader",
        "leader_epoch", "isr"}."""
        return dict(self.json(f"/brokers/topics/{topic}/partitions/{partition}/state"))

    def leader(self, topic: str, partition: int) -> int:
        return int(self.state(topic, partition)["leader"])

    def isr(self, topic: str, partition: int) -> list[int]:
        return [int(r) for r in self.state(topic, partition)["isr"]]

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.json(f"/config/topics/{topic}")["config"])

    # waits

    def wait_until_registered(self, ids: Iterable[int], timeout: float = 60) -> None:
        want = set(ids)
        wait_for(
            f"brokers {sorted(want)} registered in /brokers/ids", lambda: want <= self.broker_ids(), timeout
        )

    def wait_until_gone(self, n: int, timeout: float = 60) -> None:
        wait_for(f"broker {n} gone from /brokers/ids", lambda: n not in self.broker_ids(), timeout)

    def wait_until_isr(
        self, topic: str, partitions: Iterable[int], members: Iterable[int], timeout: float = 60
    ) -> None:
        """Until every partition has a leader and its ISR holds (at least) ``members``."""
        want = set(members)
        parts = list(partitions)

        def done() -> bool:
            states = [self.state(topic, p) for p in parts]
            return all(s["leader"] >= 0 and want <= set(s["isr"]) for s in states)

        wait_for(f"{topic} partitions {parts} led with {sorted(want)} in the ISR", done, timeout)

    def wait_until_new_leader(self, topic: str, partition: int, old: int, timeout: float = 60) -> int:
        """Until a broker other than ``old`` leads the partition; returns it."""

        def new() -> int | None:
            leader = self.leader(topic, partition)
            return leader if leader not in (old, -1) else None

        return wait_for(f"{topic}/{partition} led by another broker than {old}", new, timeout)


@contextlib.contextmanager
def zk_session(cluster: LocalCluster) -> Iterator[Zk]:
    zk = Zk(cluster.zookeeper_connect)
    try:
        yield zk
    finally:
        zk.close()


# ---------------------------------------------------------------- Kafka's clients


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, topic: str, partitions: int = 3, replication_factor: int = 3, **config: str
) -> None:
    """CreateTopics through confluent-kafka's AdminClient; topic keys with underscores
    (``min_insync_replicas="2"``) or dots. A retriable error (a cluster still settling) is
    retried for up to 30 s; TOPIC_ALREADY_EXISTS after a retry means an earlier try won."""
    conf = {k.replace("_", "."): v for k, v in config.items()}
    client = admin(bootstrap)
    deadline = time.monotonic() + 30
    tries = 0
    while True:
        tries += 1
        new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor, config=conf)
        future = client.create_topics([new], operation_timeout=30, request_timeout=60)[topic]
        try:
            future.result(timeout=90)
            return
        except KafkaException as e:
            err = e.args[0]
            if tries > 1 and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if not err.retriable() or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


@dataclass
class PartitionInfo:
    leader: int
    replicas: list[int]
    isr: list[int]
    error: object


def metadata(bootstrap: str, topic: str) -> tuple[dict[int, tuple[str, int]], dict[int, PartitionInfo], int]:
    """(brokers {id: (host, port)}, partitions {p: PartitionInfo}, controller id) from a
    Metadata request, as confluent-kafka gets it."""
    md = admin(bootstrap).list_topics(topic, timeout=10)
    brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
    t = md.topics[topic]
    if t.error is not None:
        raise AssertionError(f"metadata of {topic}: {t.error}")
    parts = {
        p.id: PartitionInfo(p.leader, list(p.replicas), list(p.isrs), p.error) for p in t.partitions.values()
    }
    return brokers, parts, md.controller_id


def producer(bootstrap: str, **conf: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "linger.ms": 5,
            "message.timeout.ms": 30000,
            **{k.replace("_", "."): v for k, v in conf.items()},
        }
    )


@dataclass(frozen=True, order=True)
class Ack:
    """What a producer was told: the record with ``value`` is at (partition, offset).
    Offset -1: the delivery report said it was written but gave no offset (librdkafka
    does so for a retried batch the broker answered with DUPLICATE_SEQUENCE_NUMBER, or
    with offset -1)."""

    partition: int
    offset: int
    value: bytes


NO_OFFSET = -1


def _ack(msg: Message) -> Ack:
    offset = msg.offset()
    return Ack(msg.partition(), NO_OFFSET if offset is None else offset, bytes(msg.value() or b""))


def produce_and_report(
    p: Producer, topic: str, items: Iterable[tuple[int, bytes]], timeout: float = 60
) -> tuple[list[Ack], list[tuple[bytes, KafkaError]]]:
    """Produces (partition, value) items, waits for every delivery report and returns
    (acknowledged, failed)."""
    acked: list[Ack] = []
    failed: list[tuple[bytes, KafkaError]] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked.append(_ack(msg))
        else:
            failed.append((bytes(msg.value() or b""), err))

    for partition, value in items:
        while True:
            try:
                p.produce(topic, value=value, partition=partition, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(timeout)
    assert left == 0, f"{left} delivery reports missing after {timeout}s"
    return acked, failed


class BackgroundProducer:
    """A confluent-kafka producer in a thread writing unique values (decimal ints) round
    robin over the partitions at about ``rate`` records a second, remembering every
    delivery report: Kafka's VerifiableProducer in replication_test."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float = 200, **conf: Any) -> None:
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.acked: list[Ack] = []
        self.failed: list[tuple[bytes, KafkaError]] = []
        self.last_ack: dict[int, float] = {}  # partition -> monotonic time of its last ack
        self.ack_times: dict[int, list[float]] = {}  # partition -> monotonic time of each ack
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producer = producer(bootstrap, **conf)
        self._thread = threading.Thread(target=self._run, name=f"producer-{topic}", daemon=True)
        self._thread.start()

    def _report(self, err: KafkaError | None, msg: Message) -> None:
        with self._lock:
            if err is None:
                self.acked.append(_ack(msg))
                now = time.monotonic()
                self.last_ack[msg.partition()] = now
                self.ack_times.setdefault(msg.partition(), []).append(now)
            else:
                self.failed.append((bytes(msg.value() or b""), err))

    def _run(self) -> None:
        try:
            i = 0
            while not self._stop.is_set():
                value = str(i).encode()
                try:
                    self._producer.produce(
                        self.topic, value=value, partition=i % self.partitions, on_delivery=self._report
                    )
                    i += 1
                except BufferError:
                    pass
                self._producer.poll(self.interval)
        except BaseException as e:
            self.error = e

    def acked_since(self, t: float, partitions: Iterable[int] | None = None) -> bool:
        """Whether every partition (or the ones given) had a write acknowledged after ``t``."""
        if self.error is not None:
            raise RuntimeError(f"producer thread failed: {self.error!r}")
        with self._lock:
            return all(self.last_ack.get(p, -1.0) > t for p in partitions or range(self.partitions))

    def longest_stall(self, since: float = 0.0) -> tuple[float, int]:
        """(seconds, partition): the longest time a partition went without an
        acknowledgement after ``since``, while the producer wrote to it."""
        with self._lock:
            worst = (0.0, -1)
            for p, times in self.ack_times.items():
                later = [t for t in times if t >= since]
                for a, b in itertools.pairwise(later):
                    worst = max(worst, (b - a, p))
            return worst

    def stop(self, timeout: float = 90) -> None:
        """Stops writing and waits for every outstanding delivery report."""
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "producer thread did not stop"
        left = self._producer.flush(timeout)
        assert left == 0, f"{left} delivery reports missing after {timeout}s"
        assert self.error is None, f"producer thread failed: {self.error!r}"


def next_offsets(acks: Iterable[Ack]) -> dict[int, int]:
    """{partition: the offset after its last acknowledged record}."""
    out: dict[int, int] = {}
    for a in acks:
        out[a.partition] = max(out.get(a.partition, 0), a.offset + 1)  # NO_OFFSET adds nothing
    return out


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: Iterable[int],
    timeout: float = 60,
    settle: Mapping[int, int] | None = None,
    settle_timeout: float = 30,
) -> dict[int, dict[int, bytes]]:
    """Every record of each partition from offset 0 up to its high watermark, as
    {partition: {offset: value}}, read by a confluent-kafka consumer with assign().

    A new leader's high watermark can trail what its predecessor acknowledged until the
    followers fetch from it: with ``settle`` ({partition: offset}, e.g. ``next_offsets``
    of the acknowledged records) the read waits up to ``settle_timeout`` seconds for each
    high watermark to reach its offset, then reads whatever is there (what is missing is
    for the checker to report)."""
    parts = list(partitions)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:

        def high_watermarks() -> dict[int, int]:
            return {p: int(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]) for p in parts}

        ends = wait_for(f"high watermarks of {topic}", high_watermarks, 30)
        if settle:
            deadline = time.monotonic() + settle_timeout
            while any(ends[p] < settle.get(p, 0) for p in parts) and time.monotonic() < deadline:
                time.sleep(0.2)
                with contextlib.suppress(Exception):
                    ends = high_watermarks()
        out: dict[int, dict[int, bytes]] = {p: {} for p in parts}
        todo = {p for p in parts if ends[p] > 0}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        deadline = time.monotonic() + timeout
        while todo:
            if time.monotonic() > deadline:
                got = {p: len(out[p]) for p in parts}
                raise AssertionError(f"read {got} records of {topic} up to {ends} in {timeout}s")
            m = c.poll(0.2)
            if m is None or m.error() is not None:
                continue
            p, offset = m.partition(), m.offset()
            if offset < ends[p]:
                out[p][offset] = bytes(m.value() or b"")
            if offset >= ends[p] - 1:
                todo.discard(p)
        return out
    finally:
        c.close()


# ---------------------------------------------------------------- the checker


@dataclass
class Verdict:
    """What the log holds against what producers were told."""

    acked: int
    lost: list[Ack] = field(default_factory=list)  # acknowledged, not at its partition and offset
    moved: list[Ack] = field(default_factory=list)  # of those, found at another position
    duplicates: dict[bytes, list[tuple[int, int]]] = field(default_factory=dict)  # one value, many places
    unacked_present: int = 0  # read back although no producer was told it was written
    # acknowledged without an offset: checked only to be in their partition
    without_offset: list[Ack] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.lost and not self.duplicates

    def __str__(self) -> str:
        return (
            f"{self.acked} acknowledged: {len(self.lost)} lost (e.g. {self.lost[:5]}), "
            f"{len(self.moved)} of them at another position (e.g. {self.moved[:5]}), "
            f"{len(self.duplicates)} values read more than once "
            f"(e.g. {list(self.duplicates.items())[:5]}), {self.unacked_present} unacknowledged present, "
            f"{len(self.without_offset)} acknowledged without an offset (e.g. {self.without_offset[:5]})"
        )


def check_acknowledged(acked: Iterable[Ack], consumed: Mapping[int, Mapping[int, bytes]]) -> Verdict:
    """Kafka's promise for acks=all: every acknowledged value is read back at the partition
    and offset its producer was told; with idempotent producers no value is written twice."""
    acks = list(acked)
    verdict = Verdict(acked=len(acks))
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p, records in consumed.items():
        for offset, value in records.items():
            where.setdefault(value, []).append((p, offset))
    verdict.duplicates = {v: places for v, places in where.items() if len(places) > 1}
    acked_values = set()
    for a in acks:
        acked_values.add(a.value)
        if a.offset == NO_OFFSET:
            verdict.without_offset.append(a)
            kept = any(p == a.partition for p, _ in where.get(a.value, ()))
        else:
            kept = consumed.get(a.partition, {}).get(a.offset) == a.value
        if not kept:
            verdict.lost.append(a)
            if a.value in where:
                verdict.moved.append(a)
    verdict.unacked_present = sum(1 for v in where if v not in acked_values)
    return verdict


class BackgroundConsumer:
    """A confluent-kafka consumer in a thread reading a topic for as long as it runs,
    remembering every record of every poll: with ``group`` it subscribes as a member of
    that group (committing as it goes), else it assigns every partition from offset 0.
    What the checker of Jepsen's Kafka workload looks at on the reading side."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, group: str | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.group = group
        # Per partition, in the order polled: (offset, value) and, for a member, its
        # assignment generation (a new assignment may go back to the committed offset).
        self.polled: dict[int, list[tuple[int, bytes, int]]] = {p: [] for p in range(partitions)}
        self.generation = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": group is not None,
            "auto.commit.interval.ms": 200,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "session.timeout.ms": 10000,
        }
        self._consumer = Consumer(conf)
        self._thread = threading.Thread(target=self._run, name=f"consumer-{topic}", daemon=True)
        self._thread.start()

    def _assigned(self, _consumer: Consumer, _partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.generation += 1

    def _run(self) -> None:
        try:
            if self.group is None:
                self._consumer.assign(
                    [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)]
                )
            else:
                self._consumer.subscribe([self.topic], on_assign=self._assigned)
            while not self._stop.is_set():
                m = self._consumer.poll(0.2)
                if m is None or m.error() is not None:
                    continue
                with self._lock:
                    self.polled[m.partition()].append((m.offset(), bytes(m.value() or b""), self.generation))
        except BaseException as e:
            self.error = e
        finally:
            self._consumer.close()

    def position(self, p: int) -> int:
        """The offset after the last record polled from partition ``p`` (0 before any)."""
        with self._lock:
            return self.polled[p][-1][0] + 1 if self.polled[p] else 0

    def caught_up(self, ends: Mapping[int, int]) -> bool:
        if self.error is not None:
            raise RuntimeError(f"consumer thread failed: {self.error!r}")
        return all(self.position(p) >= end for p, end in ends.items())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "consumer thread did not stop"
        assert self.error is None, f"consumer thread failed: {self.error!r}"


@dataclass
class ReadVerdict:
    """What consumers read against the log: Jepsen's Kafka anomalies on the reading side."""

    polled: int = 0
    # (partition, offset before, offset after): a poll went back, or skipped offsets,
    # without a new assignment (a position reset, as after OFFSET_OUT_OF_RANGE).
    nonmonotonic: list[tuple[int, int, int]] = field(default_factory=list)
    skipped: list[tuple[int, int, int]] = field(default_factory=list)
    # (partition, offset, value read, value in the log): the log changed under a reader.
    inconsistent: list[tuple[int, int, bytes, bytes | None]] = field(default_factory=list)
    # Acknowledged values no consumer ever polled.
    unseen: list[Ack] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.nonmonotonic or self.skipped or self.inconsistent or self.unseen)

    def __str__(self) -> str:
        return (
            f"{self.polled} records polled: {len(self.nonmonotonic)} polls went back "
            f"(e.g. {self.nonmonotonic[:5]}), {len(self.skipped)} skipped offsets (e.g. {self.skipped[:5]}), "
            f"{len(self.inconsistent)} read a value the log does not hold there "
            f"(e.g. {self.inconsistent[:5]}), "
            f"{len(self.unseen)} acknowledged values never read (e.g. {self.unseen[:5]})"
        )


def check_reads(
    consumers: Iterable[BackgroundConsumer], acked: Iterable[Ack], log: Mapping[int, Mapping[int, bytes]]
) -> ReadVerdict:
    """Every poll against the final log: offsets polled one after another within one
    assignment, with no gap and never back; each value where the log has it; every
    acknowledged value read by each consumer."""
    verdict = ReadVerdict()
    for c in consumers:
        seen: set[bytes] = set()
        for p, polls in c.polled.items():
            verdict.polled += len(polls)
            for (before, _, gen_a), (after, _, gen_b) in itertools.pairwise(polls):
                if gen_a != gen_b:
                    continue
                if after <= before:
                    verdict.nonmonotonic.append((p, before, after))
                elif after != before + 1:
                    verdict.skipped.append((p, before, after))
            for offset, value, _ in polls:
                seen.add(value)
                if log.get(p, {}).get(offset) != value:
                    verdict.inconsistent.append((p, offset, value, log.get(p, {}).get(offset)))
        verdict.unseen += [a for a in acked if a.value not in seen]
    return verdict


# ---------------------------------------------------------------- the replicas' logs, from their stores

Record = tuple[int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def store_log(store: seglog.Store, topic: str, partition: int) -> tuple[list[Record], bytes]:
    """Every record of one partition of a store (offset, key, value, timestamp, headers)
    and the raw batches they came from."""
    records: list[Record] = []
    start, end = store.offsets(topic, partition)
    offset = start
    while offset < end:
        got = store.read(topic, partition, offset)
        if not got:
            break
        records += [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got]
        offset = got[-1].offset + 1
    raw = bytearray()
    offset = start
    while offset < end:
        chunk = store.read_raw(topic, partition, offset)
        if not chunk:
            break
        pos = 0
        while pos + 61 <= len(chunk):
            base, length = struct.unpack_from(">qi", chunk, pos)
            if pos + 12 + length > len(chunk):
                break
            (last_delta,) = struct.unpack_from(">i", chunk, pos + 23)
            raw += chunk[pos : pos + 12 + length]
            offset = base + last_delta + 1
            pos += 12 + length
        if pos == 0:
            break
    return records, bytes(raw)


def replica_logs(
    cluster: LocalCluster, topic: str, partitions: Iterable[int]
) -> dict[int, dict[int, tuple[list[Record], bytes]]]:
    """{broker: {partition: (records, raw batches)}} read from each broker's store with
    ``read_only=True`` (the brokers may be stopped or running)."""
    parts = list(partitions)
    out: dict[int, dict[int, tuple[list[Record], bytes]]] = {}
    for n in cluster.broker_ids:
        with seglog.open(cluster.store_path(n), read_only=True) as store:
            out[n] = {p: store_log(store, topic, p) for p in parts}
    return out


def assert_replicas_identical(
    cluster: LocalCluster, topic: str, partitions: Iterable[int]
) -> dict[int, list[Record]]:
    """Every broker's log of each partition holds the same records, offset for offset,
    in the same batches byte for byte; returns {partition: records}."""
    logs = replica_logs(cluster, topic, partitions)
    first, *others = cluster.broker_ids
    out = {}
    for p, (records, raw) in logs[first].items():
        for n in others:
            theirs, their_raw = logs[n][p]
            if theirs != records:
                diverge = next(
                    (i for i, (a, b) in enumerate(zip(records, theirs, strict=False)) if a != b),
                    min(len(records), len(theirs)),
                )
                raise AssertionError(
                    f"{topic}/{p}: broker {first} has {len(records)} records, broker {n} {len(theirs)}; "
                    f"they differ from index {diverge}: {records[diverge : diverge + 2]} vs "
                    f"{theirs[diverge : diverge + 2]}"
                )
            assert their_raw == raw, (
                f"{topic}/{p}: brokers {first} and {n} hold the same records in different batches"
            )
        out[p] = records
    return out


def group_resumes_at(
    bootstrap: str, group: str, topic: str, committed: dict[int, int], timeout: float = 60
) -> None:
    """A new member of ``group`` is told ``committed`` as the group's offsets of ``topic``'s
    partitions and, subscribed, reads each partition first at its committed offset."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        told = c.committed([TopicPartition(topic, p) for p in committed], timeout=timeout)
        assert {tp.partition: tp.offset for tp in told} == committed
        c.subscribe([topic])
        first: dict[int, int] = {}

        def every_partition_read() -> bool:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                first.setdefault(m.partition(), m.offset())
            return len(first) == len(committed)

        wait_for(f"group {group} reading every partition of {topic}", every_partition_read, timeout, 0)
        assert first == committed
    finally:
        c.close()
