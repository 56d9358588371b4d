"""seglog.Producer and seglog.Consumer with ``bootstrap_servers=``: the embedded API
over Kafka's protocol, against a broker in this process (and the broker's log read
back through its store)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog
from cluster_helpers import wait_for
from seglog import TopicPartition


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[seglog.Broker]:
    with seglog.Broker(tmp_path / "store") as b:
        yield b


def _producer_fields(raw: bytes) -> list[tuple[int, int]]:
    """(producerId, baseSequence) of each RecordBatch v2 in `raw` (Kafka's layout)."""
    out = []
    while len(raw) >= 61:
        (length,) = struct.unpack_from(">i", raw, 8)
        producer_id, _epoch, sequence = struct.unpack_from(">qhi", raw, 43)
        out.append((producer_id, sequence))
        raw = raw[12 + length :]
    return out


def _requests(broker: seglog.Broker, api: str) -> float:
    """How many requests of `api` the broker has handled (its Prometheus counter)."""
    for line in broker.metrics_text().splitlines():
        if not line.startswith("#") and "requests_total" in line and f'request="{api}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_network_producer_has_the_embedded_api(broker: seglog.Broker) -> None:
    broker.store.create_topic("t", partitions=3)
    with seglog.Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=1) as p:
        futures = [p.send("t", b"v%d" % i, key=b"k%d" % i, headers=[("h", b"x")]) for i in range(30)]
        timed = p.send("t", b"at", partition=1, timestamp=1234)
        p.flush()
        metadata = [f.get(timeout=10) for f in futures]
        assert timed.get(timeout=10).timestamp == 1234
    # Keys go where Kafka's partitioner puts them; offsets are the log's.
    for i, md in enumerate(metadata):
        assert md.topic == "t"
        assert md.partition == broker.store.partition_for_key("t", b"k%d" % i)
    stored = {p: [(r.key, r.value, r.headers) for r in broker.store.read("t", p, 0)] for p in range(3)}
    for i, md in enumerate(metadata):
        rec = broker.store.read("t", md.partition, md.offset, max_records=1)[0]
        assert (rec.key, rec.value, rec.headers) == (b"k%d" % i, b"v%d" % i, (("h", b"x"),))
    assert sum(len(v) for v in stored.values()) == 31


def test_acks_all_batches_are_idempotent_and_in_sequence(broker: seglog.Broker) -> None:
    broker.store.create_topic("idem")
    with seglog.Producer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=0) as p:
        for i in range(5):
            p.send("idem", b"%d" % i).get(timeout=10)
    batches = _producer_fields(broker.store._native.read_raw("idem", 0, 0))
    assert len(batches) == 5
    ids = {producer_id for producer_id, _ in batches}
    assert len(ids) == 1 and ids.pop() >= 0, "every batch carries the one producer id"
    assert [sequence for _, sequence in batches] == [0, 1, 2, 3, 4]


def test_acks_1_sends_without_a_producer_id(broker: seglog.Broker) -> None:
    broker.store.create_topic("plain")
    with seglog.Producer(bootstrap_servers=broker.bootstrap_servers, acks=1, linger_ms=0) as p:
        assert p.send("plain", b"x").get(timeout=10).offset == 0
    assert _producer_fields(broker.store._native.read_raw("plain", 0, 0)) == [(-1, -1)]


def test_send_batch_through_a_broker(broker: seglog.Broker) -> None:
    broker.store.create_topic("bulk", partitions=2)
    with seglog.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        spans = p.send_batch("bulk", [b"%d" % i for i in range(1000)], partition=1)
    assert spans == [(1, 0, 999)]
    assert [r.value for r in broker.store.read("bulk", 1, 998)] == [b"998", b"999"]


def test_what_the_broker_refuses_fails_the_future(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "s", config={"auto.create.topics.enable": False}) as broker:
        broker.store.create_topic("small", config={"max.message.bytes": 1000})
        with seglog.Producer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0) as p:
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                p.send("missing", b"x")
            big = p.send("small", b"x" * 5000)
            with pytest.raises(seglog.RecordTooLargeError):
                big.get(timeout=10)
            # The producer goes on.
            assert p.send("small", b"ok").get(timeout=10).offset == 0


def test_producer_arguments_are_checked(broker: seglog.Broker, tmp_path: Path) -> None:
    with pytest.raises(seglog.InvalidConfigError):
        seglog.Producer(tmp_path / "x", bootstrap_servers=broker.bootstrap_servers)
    with pytest.raises(seglog.InvalidConfigError, match="client_id"):
        seglog.Producer(tmp_path / "y", client_id="me")
    with pytest.raises(TypeError):
        seglog.Producer(bootstrap_servers=9092)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        seglog.Producer()
    with pytest.raises(OSError):
        seglog.Producer(bootstrap_servers="127.0.0.1:1", request_timeout_ms=500)


def test_a_poll_fetches_every_partition_of_a_broker_in_one_request(broker: seglog.Broker) -> None:
    broker.store.create_topic("many", partitions=8)
    for p in range(8):
        broker.store.append("many", p, [b"%d-%d" % (p, i) for i in range(10)])
    c = seglog.Consumer("many", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest")
    try:
        assert len(c.assignment()) == 8
        c.position(TopicPartition("many", 0))  # positions looked up before counting
        for tp in c.assignment():
            c.position(tp)
        before = _requests(broker, "Fetch")
        got = c.poll(timeout_ms=5000, max_records=1000)
        assert sum(len(v) for v in got.values()) == 80
        # The broker counts a request once its answer is written: wait for the
        # count to move, then check it moved by one (the consumer sends nothing
        # between polls).
        wait_for("the Fetch counted", lambda: _requests(broker, "Fetch") > before, 10)
        fetches = _requests(broker, "Fetch") - before
        assert fetches == 1, f"{fetches} Fetch requests for one poll of 8 partitions"
        assert {tp: c.position(tp) for tp in got} == {TopicPartition("many", p): 10 for p in range(8)}
    finally:
        c.close()


def test_records_fetched_for_other_partitions_wait_for_the_next_polls(broker: seglog.Broker) -> None:
    broker.store.create_topic("bounded", partitions=4)
    for p in range(4):
        broker.store.append("bounded", p, [b"%d" % i for i in range(50)])
    with seglog.Consumer(
        "bounded", bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest"
    ) as c:
        seen: list[tuple[int, int]] = []
        while len(seen) < 200:
            polled = c.poll(timeout_ms=5000, max_records=30)
            assert 0 < sum(len(v) for v in polled.values()) <= 30
            seen.extend((r.partition, r.offset) for rs in polled.values() for r in rs)
        # Every record exactly once, each partition in order.
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(50)]
        for p in range(4):
            assert [o for q, o in seen if q == p] == list(range(50))


def test_a_network_producer_and_consumer_round_trip_through_a_group(broker: seglog.Broker) -> None:
    broker.store.create_topic("rt", partitions=2)
    with seglog.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        for i in range(100):
            p.send("rt", b"%d" % i, key=b"%d" % (i % 7))
    with seglog.Consumer(
        "rt",
        bootstrap_servers=broker.bootstrap_servers,
        group_id="rt-group",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    ) as c:
        values = sorted(int(r.value) for r in c)
    assert values == list(range(100))
    with seglog.Consumer("rt", bootstrap_servers=broker.bootstrap_servers, group_id="rt-group") as c:
        # The close committed the positions: nothing is left.
        assert c.poll(timeout_ms=300) == {}
        assert sum(c.committed(tp) or 0 for tp in c.assignment()) == 100


@pytest.mark.parametrize("through", ["store", "broker"])
def test_topics_and_partitions_for_topic(broker: seglog.Broker, through: str) -> None:
    broker.store.create_topic("a", partitions=3)
    broker.store.create_topic("b")
    c = (
        seglog.Consumer(broker.store, read_only=False)
        if through == "store"
        else seglog.Consumer(bootstrap_servers=broker.bootstrap_servers)
    )
    with c:
        assert {"a", "b"} <= c.topics()
        assert c.partitions_for_topic("a") == {0, 1, 2}
        assert c.partitions_for_topic("b") == {0}
        assert c.partitions_for_topic("missing") is None
        with pytest.raises(TypeError):
            c.partitions_for_topic(5)  # type: ignore[arg-type]
