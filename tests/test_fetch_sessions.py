"""Fetch sessions (KIP-227) on the wire, seglog beside a Kafka 3.9 broker: the same Fetch
v11 requests — a new session, incremental fetches naming only what moved, a stale epoch,
an unknown id, a forgotten partition, the session closed — get the same answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import seglog
from broker_helpers import connect, fetch_request_v11, frame, parse_fetch_v11, recv_response
from kafka_reference import KafkaBroker
from seglog.testing import ZooKeeper

pytestmark = pytest.mark.java

TOPIC = "s"
FETCH = 1
NOT_FOUND, BAD_EPOCH = 70, 71


@pytest.fixture(params=["seglog", "kafka"])
def bootstrap(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A broker with topic ``s`` of three partitions: seglog's, or Kafka's."""
    if request.param == "seglog":
        with seglog.open(tmp_path / "store") as store, seglog.Broker(store) as broker:
            store.create_topic(TOPIC, partitions=3)
            yield broker.bootstrap_servers
        return
    zookeeper = request.getfixturevalue("zookeeper")
    assert isinstance(zookeeper, ZooKeeper)
    with KafkaBroker(tmp_path / "kafka", zookeeper.connect_string) as kafka:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result()
        yield kafka.bootstrap_servers


def produce(bootstrap: str, partition: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(TOPIC, b"x", partition=partition)
    assert p.flush(30) == 0


def test_fetch_sessions_answer_as_kafka_does(bootstrap: str) -> None:
    produce(bootstrap, 0)
    s = connect(int(bootstrap.rsplit(":", 1)[1]))
    correlation = 0

    def fetch(
        session: int,
        epoch: int,
        parts: list[tuple[int, int]],
        forget: list[int] = (),  # type: ignore[assignment]
    ) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        nonlocal correlation
        correlation += 1
        body = fetch_request_v11(
            session, epoch, [(TOPIC, p, o) for p, o in parts], [(TOPIC, p) for p in forget]
        )
        s.sendall(frame(FETCH, 11, correlation, body))
        got, answer = recv_response(s)
        assert got == correlation
        error, session_id, partitions = parse_fetch_v11(answer)
        return error, session_id, [(p, err, hw, size) for _, p, err, hw, size in partitions]

    # A new session: every partition, and an id.
    error, session, parts = fetch(0, 0, [(0, 0), (1, 0), (2, 0)])
    assert error == 0 and session != 0
    assert [(p, err, hw) for p, err, hw, _ in parts] == [(0, 0, 1), (1, 0, 0), (2, 0, 0)]
    assert parts[0][3] > 0, "partition 0's record"
    # Partition 0 moved on to offset 1; nothing else is new: an empty answer.
    assert fetch(session, 1, [(0, 1)]) == (0, session, [])
    # A record on partition 1: only it is answered, though not named.
    produce(bootstrap, 1)
    error, _, parts = fetch(session, 2, [])
    assert error == 0 and [(p, err, hw) for p, err, hw, _ in parts] == [(1, 0, 1)]
    assert parts[0][3] > 0
    # A stale epoch, an unknown session, a session that never was.
    assert fetch(session, 2, []) == (BAD_EPOCH, 0, [])
    assert fetch(session + 1, 3, []) == (NOT_FOUND, 0, [])
    assert fetch(0, 3, []) == (NOT_FOUND, 0, [])
    # Partition 1 forgotten (after moving on): a new record there is not answered.
    assert fetch(session, 3, [(1, 1)], forget=[1]) == (0, session, [])
    produce(bootstrap, 1)
    assert fetch(session, 4, []) == (0, session, [])
    # Epoch -1 closes the session: the request is answered whole, without one.
    error, closed, parts = fetch(session, -1, [(1, 1)])
    assert (error, closed, [(p, hw) for p, _, hw, _ in parts]) == (0, 0, [(1, 2)])
    assert fetch(session, 5, []) == (NOT_FOUND, 0, [])
    s.close()
