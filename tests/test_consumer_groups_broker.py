"""seglog's own Consumer and the broker's group coordinator: network consumers
(``bootstrap_servers=``) that split partitions and follow rebalances, an embedded
consumer that shares a group with a confluent-kafka member through a broker in
its process, one offsets store for both kinds, and a clear refusal of group
membership in another process than the broker's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition

import seglog

GROUP_KEYS: dict[str, Any] = {"group_min_session_timeout_ms": 1000, "group_initial_rebalance_delay_ms": 0}
# Short sessions and quick heartbeats: rebalances settle in about a second.
MEMBER_KEYS: dict[str, Any] = {
    "session_timeout_ms": 2000,
    "heartbeat_interval_ms": 100,
    "max_poll_interval_ms": 10000,
    "auto_offset_reset": "earliest",
}


def _wait(
    cond: Callable[[], bool], timeout: float, what: str, step: Callable[[], None] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if step is not None:
            step()
        else:
            time.sleep(0.05)


def _produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    p = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(30) == 0


class Polling:
    """A seglog Consumer polling in its own thread, committing each record
    synchronously after taking it (as the confluent member below does)."""

    def __init__(self, make: Callable[[], seglog.Consumer]) -> None:
        self.consumer: seglog.Consumer | None = None
        self.got: list[tuple[int, int, str]] = []
        self.assigned: set[int] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._make = make
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            c = self.consumer = self._make()
            while not self._stop.is_set():
                for tp, records in c.poll(100).items():
                    for r in records:
                        self.got.append((r.partition, r.offset, (r.value or b"").decode()))
                    c.commit({tp: records[-1].offset + 1})
                self.assigned = {tp.partition for tp in c.assignment()}
            c.close()
        except BaseException as e:
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self.error is None, self.error


def test_network_consumers_split_partitions_and_the_one_left_takes_over(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("t", 4)
        servers = broker.bootstrap_servers

        def make() -> seglog.Consumer:
            return seglog.Consumer(
                "t", group_id="g", bootstrap_servers=servers, enable_auto_commit=False, **MEMBER_KEYS
            )

        a, b = Polling(make), Polling(make)
        _wait(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 30, "a split")
        assert a.assigned | b.assigned == {0, 1, 2, 3}
        values = [f"v{i}" for i in range(40)]
        _produce(servers, "t", values, 4)
        _wait(lambda: len(a.got) + len(b.got) >= 40, 30, "every record")
        b.stop()  # closes: LeaveGroup
        _wait(lambda: a.assigned == {0, 1, 2, 3}, 30, "the survivor to take every partition")
        more = [f"w{i}" for i in range(20)]
        _produce(servers, "t", more, 4)
        _wait(lambda: len(a.got) + len(b.got) >= 60, 30, "the records after the leave")
        a.stop()
        seen = sorted(v for _, _, v in a.got + b.got)
        assert seen == sorted(values + more)  # each once: commits are synchronous
        assert {p for p, _, _ in b.got} <= {0, 1, 2, 3}


_MEMBER = r"""
import sys
from confluent_kafka import Consumer

bootstrap, group, topic, out = sys.argv[1:5]
f = open(out, "a", buffering=1)


def on_assign(consumer, partitions):
    f.write("A " + ",".join(str(p.partition) for p in partitions) + "\n")


def on_revoke(consumer, partitions):
    f.write("R\n")


c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 200,
    "partition.assignment.strategy": "range",
})
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
while True:
    m = c.poll(0.1)
    if m is None or m.error():
        continue
    f.write(f"M {m.partition()} {m.offset()} {m.value().decode()}\n")
    c.commit(message=m, asynchronous=False)
"""


def _lines(out: Path) -> list[list[str]]:
    try:
        return [line.split(" ") for line in out.read_text().split("\n") if line]
    except FileNotFoundError:
        return []


def _kafka_assignment(out: Path) -> set[int]:
    current: set[int] = set()
    for line in _lines(out):
        if line[0] == "A":
            current = {int(p) for p in line[1].split(",") if p} if len(line) > 1 else set()
        elif line[0] == "R":
            current = set()
    return current


def test_an_embedded_consumer_shares_a_group_with_a_confluent_member(tmp_path: Path) -> None:
    out = tmp_path / "member.txt"
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        store = broker.store
        store.create_topic("t", 4)
        # Embedded: reads the store in this process, joins through the broker.
        mine = seglog.Consumer(store, "t", group_id="shared", enable_auto_commit=False, **MEMBER_KEYS)
        got: list[tuple[int, int, str]] = []

        def step() -> None:
            for tp, records in mine.poll(100).items():
                got.extend((r.partition, r.offset, (r.value or b"").decode()) for r in records)
                mine.commit({tp: records[-1].offset + 1})

        proc = subprocess.Popen(
            [sys.executable, "-c", _MEMBER, broker.bootstrap_servers, "shared", "t", str(out)]
        )
        try:
            _wait(
                lambda: len(_kafka_assignment(out)) == 2 and len(mine.assignment()) == 2,
                60,
                "the two members to split the partitions",
                step,
            )
            ours = {tp.partition for tp in mine.assignment()}
            assert ours | _kafka_assignment(out) == {0, 1, 2, 3}
            assert not ours & _kafka_assignment(out)
            values = [f"v{i}" for i in range(40)]
            _produce(broker.bootstrap_servers, "t", values, 4)

            def theirs() -> list[str]:
                return [x[3] for x in _lines(out) if x[0] == "M"]

            _wait(lambda: len(got) + len(theirs()) >= 40, 60, "every record", step)
            for _ in range(5):
                step()
            assert sorted([v for _, _, v in got] + theirs()) == sorted(values)
            assert {p for p, _, _ in got} <= ours
        finally:
            proc.kill()
            proc.wait(10)
        mine.close()


def test_offsets_committed_by_a_kafka_client_are_the_embedded_consumers_and_the_reverse(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store"
    with seglog.open(path) as store:
        store.create_topic("t", 2)
        store.append("t", 0, [b"a", b"b", b"c"])
        store.append("t", 1, [b"d", b"e"])
        # Embedded, no broker: group "mine" commits to the store.
        with seglog.Consumer(store, group_id="mine", enable_auto_commit=False) as c:
            c.assign([("t", 0), ("t", 1)])
            c.commit({("t", 0): 2, ("t", 1): seglog.OffsetAndMetadata(1, "embedded")})
    with seglog.Broker(path, **GROUP_KEYS) as broker:
        k = KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "mine"})
        got = k.committed([KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)], timeout=10)
        assert [(x.partition, x.offset) for x in got] == [(0, 2), (1, 1)]
        assert got[1].metadata == "embedded"
        # A network client's commits, group "theirs".
        k2 = KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "theirs"})
        k2.commit(
            offsets=[KafkaTopicPartition("t", 0, 1), KafkaTopicPartition("t", 1, 2)], asynchronous=False
        )
        k2.close()
        k.close()
    with seglog.Consumer(
        path, "t", group_id="theirs", enable_auto_commit=False, consumer_timeout_ms=200
    ) as c:
        assert c.committed(("t", 0)) == 1
        assert c.committed(("t", 1)) == 2
        assert sorted((r.partition, r.value) for r in c) == [(0, b"b"), (0, b"c")]


def test_an_embedded_consumer_with_a_broker_in_its_process_commits_through_it(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        broker.store.create_topic("t", 2)
        broker.store.append("t", 0, [b"a", b"b"])
        with seglog.Consumer(broker.store, "t", group_id="g", enable_auto_commit=False, **MEMBER_KEYS) as c:
            _wait(lambda: bool(c.poll(100)) or len(c.assignment()) == 2, 30, "the join")
            c.commit({("t", 0): 2})
            # The coordinator has it: a network client of the group sees it at once.
            k = KafkaConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g"})
            assert k.committed([KafkaTopicPartition("t", 0)], timeout=10)[0].offset == 2
            k.close()
        # Closed: the member left, so a second embedded member can join at once.
        with seglog.Consumer(broker.store, "t", group_id="g", **MEMBER_KEYS) as c2:
            assert c2.committed(("t", 0)) == 2


_OTHER_PROCESS = r"""
import json, sys
import seglog

path = sys.argv[1]
out = {}
try:
    seglog.Consumer(path, "t", group_id="g")
except seglog.GroupsThroughBrokerError as e:
    out["error"] = str(e)
with seglog.Consumer(path, "t", auto_offset_reset="earliest", consumer_timeout_ms=0) as c:
    out["values"] = [r.value.decode() for r in c]
print(json.dumps(out))
"""


def test_in_another_process_a_group_is_refused_naming_the_broker(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with seglog.Broker(path, **GROUP_KEYS) as broker:
        broker.store.create_topic("t", 1)
        broker.store.append("t", 0, [b"x", b"y"])
        assert json.loads((path / ".broker.json").read_text())["pid"] == os.getpid()
        env = {**os.environ, "PYTHONPATH": str(Path(seglog.__file__).parent.parent)}
        run = subprocess.run(
            [sys.executable, "-c", _OTHER_PROCESS, str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert broker.bootstrap_servers in out["error"]
        assert f'bootstrap_servers="{broker.bootstrap_servers}"' in out["error"]
        assert out["values"] == ["x", "y"]
    assert not (path / ".broker.json").exists()


def test_a_stale_broker_file_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with seglog.open(path) as store:
        store.create_topic("t", 1)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (path / ".broker.json").write_text(json.dumps({"node_id": 0, "listener": "127.0.0.1:1", "pid": dead.pid}))
    with seglog.Consumer(path, "t", group_id="g") as c:
        assert c.assignment() == {seglog.TopicPartition("t", 0)}


def test_a_network_consumer_has_the_embedded_consumers_api(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        store = broker.store
        store.create_topic("t", 2)
        store.append("t", 0, [(None, b"a", None, 1000), (None, b"b", None, 2000), (None, b"c", None, 3000)])
        store.append("t", 1, [(None, b"d", None, 1500)])
        servers = broker.bootstrap_servers
        with seglog.Consumer(
            bootstrap_servers=servers, auto_offset_reset="earliest", consumer_timeout_ms=200
        ) as c:
            c.assign([("t", 0), ("t", 1)])
            tp0, tp1 = seglog.TopicPartition("t", 0), seglog.TopicPartition("t", 1)
            assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert c.end_offsets([tp0, tp1]) == {tp0: 3, tp1: 1}
            assert c.offsets_for_times({tp0: 1500}) == {tp0: seglog.OffsetAndTimestamp(1, 2000)}
            assert sorted(r.value for r in c) == [b"a", b"b", b"c", b"d"]
            assert c.position(tp0) == 3
            c.seek(tp0, 1)
            assert [r.value for r in c.poll(0)[tp0]] == [b"b", b"c"]
            c.seek_to_beginning(tp0)
            batch = c.poll_arrow(10)
            assert sorted(batch.column("value").to_pylist()) == [b"a", b"b", b"c"]
            c.seek_to_end()
            assert c.poll(50) == {}
            store.append("t", 1, [b"e"])
            got = c.poll(2000)
            assert [r.value for r in got[tp1]] == [b"e"]
        # A group through the coordinator: join in poll, commit with the generation.
        with seglog.Consumer(
            "t", group_id="api", bootstrap_servers=servers, enable_auto_commit=True, **MEMBER_KEYS
        ) as c:
            assert c.assignment() == set()  # joins in poll, as Kafka's consumers do
            seen: list[bytes | None] = []
            _wait(
                lambda: len(seen) >= 5,
                30,
                "the records",
                lambda: seen.extend(r.value for rs in c.poll(100).values() for r in rs),
            )
            assert c.assignment() == {tp0, tp1}
        # close() committed the positions (enable_auto_commit) and left.
        k = KafkaConsumer({"bootstrap.servers": servers, "group.id": "api"})
        assert [
            x.offset for x in k.committed([KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
        ] == [3, 2]
        k.close()
