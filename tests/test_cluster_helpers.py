"""The cluster tests' own instruments, tested where they need no cluster: the checker
finds what was lost, moved or written twice; the background producer and the reader
agree on a single broker; replicas' logs are read whole from their stores; the znode
readers understand Kafka's JSON."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

import seglog
from broker_helpers import assert_serves, connect, frame, recv_response
from cluster_helpers import (
    Ack,
    BackgroundConsumer,
    BackgroundProducer,
    Zk,
    assert_replicas_identical,
    check_acknowledged,
    check_reads,
    consume_all,
    create_topic,
    metadata,
    next_offsets,
    produce_and_report,
    producer,
    store_log,
    wait_for,
)
from seglog.testing import LocalCluster, ZooKeeper


def test_checker_passes_what_was_kept() -> None:
    acked = [Ack(0, 0, b"a"), Ack(0, 1, b"b"), Ack(1, 0, b"c")]
    verdict = check_acknowledged(acked, {0: {0: b"a", 1: b"b", 2: b"x"}, 1: {0: b"c"}})
    assert verdict.ok, verdict
    assert verdict.acked == 3
    assert verdict.unacked_present == 1  # b"x": written, its report never came


def test_checker_finds_lost_moved_and_duplicated_values() -> None:
    acked = [Ack(0, 0, b"a"), Ack(0, 1, b"b"), Ack(0, 2, b"c"), Ack(1, 0, b"d")]
    # b"b" is gone, b"c" sits at another offset, b"d" was written twice.
    consumed = {0: {0: b"a", 1: b"c", 2: b"y"}, 1: {0: b"d", 1: b"d"}}
    verdict = check_acknowledged(acked, consumed)
    assert not verdict.ok
    assert verdict.lost == [Ack(0, 1, b"b"), Ack(0, 2, b"c")]
    assert verdict.moved == [Ack(0, 2, b"c")]
    assert verdict.duplicates == {b"d": [(1, 0), (1, 1)]}
    assert "2 lost" in str(verdict)
    # Acknowledged without an offset: it must be somewhere in its partition, once.
    verdict = check_acknowledged([Ack(0, -1, b"a"), Ack(1, -1, b"a")], {0: {5: b"a"}, 1: {}})
    assert verdict.without_offset == [Ack(0, -1, b"a"), Ack(1, -1, b"a")]
    assert verdict.lost == [Ack(1, -1, b"a")]
    # A partition that is not there at all loses everything acknowledged on it.
    assert check_acknowledged(acked, {0: {0: b"a", 1: b"b", 2: b"c"}}).lost == [Ack(1, 0, b"d")]


def test_read_checker_finds_polls_back_skips_changed_values_and_unseen() -> None:
    from types import SimpleNamespace

    log = {0: {0: b"a", 1: b"b", 2: b"c", 3: b"d"}}
    acked = [Ack(0, o, v) for o, v in log[0].items()]
    good = SimpleNamespace(polled={0: [(0, b"a", 1), (1, b"b", 1), (2, b"c", 1), (3, b"d", 1)]})
    # A new assignment (generation 2) may go back to the committed offset.
    rebalanced = SimpleNamespace(
        polled={0: [(0, b"a", 1), (1, b"b", 1), (1, b"b", 2), (2, b"c", 2), (3, b"d", 2)]}
    )
    verdict = check_reads([good, rebalanced], acked, log)
    assert verdict.ok, verdict
    assert verdict.polled == 9
    # Reset to the start within one assignment, a skip, a value the log lost, one never read.
    bad = SimpleNamespace(polled={0: [(0, b"a", 1), (1, b"b", 1), (0, b"a", 1), (2, b"x", 1)]})
    verdict = check_reads([bad], acked, log)  # type: ignore[list-item]
    assert not verdict.ok
    assert verdict.nonmonotonic == [(0, 1, 0)]
    assert verdict.skipped == [(0, 0, 2)]
    assert verdict.inconsistent == [(0, 2, b"x", b"c")]
    assert verdict.unseen == [Ack(0, 2, b"c"), Ack(0, 3, b"d")]
    assert "1 polls went back" in str(verdict)


def test_store_log_reads_every_record_and_batch(store: seglog.Store) -> None:
    store.create_topic("t", partitions=1)
    for i in range(30):
        store.append("t", 0, [(f"k{i}-{j}".encode(), f"v{i}-{j}".encode()) for j in range(i % 4 + 1)])
    records, raw = store_log(store, "t", 0)
    end = store.offsets("t", 0)[1]
    assert [r[0] for r in records] == list(range(end))
    assert [r[2] for r in records] == [r.value for r in store.read("t", 0, 0, max_bytes=1 << 30)]
    assert raw == store.read_raw("t", 0, 0, max_bytes=1 << 30)


def test_background_producer_and_reader_agree(broker: seglog.Broker, store: seglog.Store) -> None:
    store.create_topic("t", partitions=3)
    writer = BackgroundProducer(broker.bootstrap_servers, "t", 3, rate=500, enable_idempotence=True)
    try:
        start = time.monotonic()
        wait_for("writes on every partition", lambda: writer.acked_since(start), 30)
        time.sleep(0.5)
    finally:
        writer.stop()
    assert not writer.failed
    assert {a.partition for a in writer.acked} == {0, 1, 2}
    consumed = consume_all(broker.bootstrap_servers, "t", range(3))
    verdict = check_acknowledged(writer.acked, consumed)
    assert verdict.ok and verdict.unacked_present == 0, verdict
    assert sum(len(c) for c in consumed.values()) == len(writer.acked)
    readers = [
        BackgroundConsumer(broker.bootstrap_servers, "t", 3),
        BackgroundConsumer(broker.bootstrap_servers, "t", 3, group="helpers"),
    ]
    ends = {p: len(consumed[p]) for p in range(3)}
    try:
        for r in readers:
            wait_for("the readers at the end", lambda r=r: r.caught_up(ends), 60)
    finally:
        for r in readers:
            r.stop()
    read = check_reads(readers, writer.acked, consumed)
    assert read.ok and read.polled == 2 * len(writer.acked), read


def test_znode_readers(zookeeper: ZooKeeper) -> None:
    zk = Zk(zookeeper.connect_string)
    try:
        c = zk.client
        c.create(
            "/brokers/ids/1",
            json.dumps({"host": "127.0.0.1", "port": 9092, "rack": "r1"}).encode(),
            makepath=True,
        )
        c.create("/controller", b'{"version":1,"brokerid":1,"timestamp":"0"}')
        c.create("/brokers/topics/t", b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1]}}', makepath=True)
        state = {"controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 0, "isr": [2, 3]}
        c.create("/brokers/topics/t/partitions/1/state", json.dumps(state).encode(), makepath=True)
        c.create("/config/topics/t", b'{"version":1,"config":{"min.insync.replicas":"2"}}', makepath=True)
        assert zk.broker_ids() == {1}
        assert zk.broker(1)["rack"] == "r1"
        assert zk.controller() == 1
        assert zk.assignment("t") == {0: [1, 2, 3], 1: [2, 3, 1]}
        assert (zk.leader("t", 1), zk.isr("t", 1)) == (2, [2, 3])
        assert zk.topic_config("t") == {"min.insync.replicas": "2"}
        zk.wait_until_isr("t", [1], {2, 3}, timeout=1)
        with pytest.raises(AssertionError, match=r"led with \[1, 2, 3\] in the ISR: not after"):
            zk.wait_until_isr("t", [1], {1, 2, 3}, timeout=0.3)
        c.delete("/brokers/ids/1")
        zk.wait_until_gone(1, timeout=5)
    finally:
        zk.close()


def test_wait_for_names_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"the moon: not after 0s \(last seen: 0\)"):
        wait_for("the moon", lambda: 0, 0.2, interval=0.05)

    def failing() -> int:
        raise ValueError("x")

    with pytest.raises(AssertionError, match=r"last seen: ValueError\('x'\)"):
        wait_for("a value", failing, 0.2)
    assert wait_for("three", lambda: 3, 1) == 3


class _SingleBrokers(LocalCluster):
    """LocalCluster's process control over brokers that serve alone (no --zookeeper), so it
    is tested whatever replication does."""

    def argv(self, n: int) -> list[str]:
        argv = super().argv(n)
        cut = argv.index("--rack")
        return argv[:cut]


def test_local_cluster_kills_pauses_and_restarts_brokers(tmp_path: Path, zookeeper_installed: None) -> None:
    with _SingleBrokers(tmp_path / "c", brokers=2) as cluster:
        assert cluster.zookeeper.mode(1) == "standalone"
        first = {n: cluster.address(n) for n in cluster.broker_ids}
        assert cluster.bootstrap_servers == f"{first[1]},{first[2]}"
        assert_serves(str(first[1]))

        cluster.kill(1)
        assert not cluster.alive(1) and cluster.returncode(1) == -signal.SIGKILL
        assert cluster.bootstrap_servers == first[2]
        cluster.start(1)
        assert cluster.alive(1) and cluster.store_path(1) == tmp_path / "c" / "b1"
        assert cluster.address(1) == first[1], "a restarted broker keeps its port"
        assert_serves(str(cluster.address(1)))

        cluster.pause(2)
        port = int(str(first[2]).rsplit(":", 1)[1])
        with connect(port) as s:
            s.sendall(frame(18, 0, 1, b""))
            s.settimeout(1.0)
            with pytest.raises(TimeoutError):
                s.recv(4)
            cluster.resume(2)
            s.settimeout(10)
            assert recv_response(s)[0] == 1
        cluster.pause(2)  # stop() resumes a paused broker before SIGTERM
    assert [cluster.returncode(n) for n in cluster.broker_ids] == [0, 0]
    assert cluster.zookeeper.pid(1) is None
    assert (tmp_path / "c" / "b1.log").read_text().count("==> ") == 2


def test_replicas_compared_record_for_record(tmp_path: Path, zookeeper_installed: None) -> None:
    cluster = LocalCluster(tmp_path / "c", brokers=3)  # never started: only its store paths are used
    records = [(f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")], 1_700_000_000_000 + i) for i in range(50)]
    for n in cluster.broker_ids:
        with seglog.open(cluster.store_path(n)) as store:
            store.create_topic("t", partitions=2)
            for i in range(0, 50, 10):
                store.append("t", 0, records[i : i + 10])
            store.append("t", 1, records[:1])
    logs = assert_replicas_identical(cluster, "t", [0, 1])
    assert [r[0] for r in logs[0]] == list(range(50))
    assert logs[0][3] == (3, b"k3", b"v3", 1_700_000_000_003, (("h", b"x"),))

    with seglog.open(cluster.store_path(3)) as store:
        store.truncate_to("t", 0, 40)
        store.append("t", 0, [(b"k", b"diverged", [], 1)])
    with pytest.raises(
        AssertionError, match=r"t/0: broker 1 has 50 records, broker 3 41; they differ from index 40"
    ):
        assert_replicas_identical(cluster, "t", [0, 1])
    # The same records in other batches: not what a follower copying batches as-is holds.
    with seglog.open(cluster.store_path(3)) as store:
        store.truncate_to("t", 0, 0)
        store.append("t", 0, records)
    with pytest.raises(
        AssertionError, match="t/0: brokers 1 and 3 hold the same records in different batches"
    ):
        assert_replicas_identical(cluster, "t", [0, 1])


def test_admin_and_produce_helpers_on_a_single_broker(broker: seglog.Broker) -> None:
    create_topic(broker.bootstrap_servers, "t", 2, 1, retention_ms="86400000")
    brokers, parts, controller = metadata(broker.bootstrap_servers, "t")
    assert controller == 0
    assert brokers == {0: ("127.0.0.1", broker.port)}
    assert sorted(parts) == [0, 1]
    assert all(p.leader == 0 and p.replicas == [0] and p.isr == [0] for p in parts.values())
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        create_topic(broker.bootstrap_servers, "t", 2, 1)
    acked, failed = produce_and_report(
        producer(broker.bootstrap_servers, retries=0), "t", [(1, b"a"), (1, b"b"), (0, b"c")]
    )
    assert not failed
    assert sorted(acked) == [Ack(0, 0, b"c"), Ack(1, 0, b"a"), Ack(1, 1, b"b")]
    assert next_offsets(acked) == {0: 1, 1: 2}
    consumed = consume_all(broker.bootstrap_servers, "t", [0, 1], settle=next_offsets(acked))
    assert consumed == {0: {0: b"c"}, 1: {0: b"a", 1: b"b"}}
