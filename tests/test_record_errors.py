"""Per-record produce errors (KIP-467): a batch some of whose records break a rule of
their own (no key on a compacted topic, a timestamp out of bounds) is refused whole,
with ``record_errors`` naming each bad record and why. librdkafka then fails those with
the broker's error and message, and the others with ``_INVALID_DIFFERENT_RECORD`` (not
their fault: the application may send them again). Compared with a Kafka 3.9 broker."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatchBuilder

import seglog
from broker_helpers import connect, frame, produce_request_v3, recv_response
from kafka_reference import KafkaBroker
from seglog.testing import ZooKeeper

BAD = set(range(3, 100, 10))  # ten of the hundred


def send_hundred(bootstrap: str, topic: str, config: dict[str, str]) -> list[tuple[int, str | None, str]]:
    """Creates ``topic`` with ``config`` and sends 100 records in one batch, those in
    BAD without a key: each record's (index, error name or None, error text)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
    outcomes: list[tuple[int, str | None, str]] = []

    def report(i: int):
        def on_delivery(err: KafkaError | None, _msg: object) -> None:
            outcomes.append((i, err.name() if err else None, err.str() if err else ""))

        return on_delivery

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "batch.num.messages": 1000})
    for i in range(100):
        key = None if i in BAD else b"k%d" % i
        p.produce(topic, b"v%d" % i, key=key, partition=0, on_delivery=report(i))
    assert p.flush(60) == 0
    return sorted(outcomes)


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "r", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 90 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            values.append(m.value())
    c.close()
    return values


def test_a_batch_with_keyless_records_fails_only_those(tmp_path: Path) -> None:
    """On a compacted topic, a batch of 100 with 10 keyless records: exactly those 10
    fail with INVALID_RECORD, the 90 others as refused for another record's fault; sent
    again, the 90 are delivered and read back in order. On the wire (Produce v8) each
    keyless record is named with Kafka's message."""
    with seglog.Broker(tmp_path / "store") as broker:
        outcomes = send_hundred(broker.bootstrap_servers, "c", {"cleanup.policy": "compact"})
        failed = {i for i, name, _ in outcomes if name == "INVALID_RECORD"}
        assert failed == BAD, outcomes
        others = [name for i, name, _ in outcomes if i not in BAD]
        assert others == ["_INVALID_DIFFERENT_RECORD"] * 90, outcomes
        resend = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(100):
            if i not in BAD:
                resend.produce("c", b"v%d" % i, key=b"k%d" % i, partition=0)
        assert resend.flush(30) == 0
        assert read_values(broker.bootstrap_servers, "c") == [b"v%d" % i for i in range(100) if i not in BAD]
        answer = produce_v8(broker.bootstrap_servers, "c", [b"a", None], int(time.time() * 1000))
        why = "Compacted topic cannot accept message without key in topic partition c-0"
        assert answer == {
            "error_code": 87,
            "record_errors": [(1, why)],
            "error_message": "One or more records have been rejected due to 1 record errors in total, and "
            f"only showing the first three errors at most: [RecordError(batchIndex=1, message='{why}')]",
        }


def produce_v8(bootstrap: str, topic: str, keys: list[bytes | None], timestamp: int) -> dict[str, object]:
    """One Produce v8 of a batch with these keys: the partition's error code, record
    errors and error message as the broker answered them."""
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    for i, key in enumerate(keys):
        b.append(i, timestamp=timestamp, key=key, value=b"v", headers=[])
    port = int(bootstrap.rsplit(":", 1)[1])
    with connect(port) as s:
        s.sendall(frame(0, 8, 7, produce_request_v3(topic, 0, bytes(b.build()))))
        _, body = recv_response(s)
    pos = 4  # one topic
    (n,) = struct.unpack_from(">h", body, pos)
    pos += 2 + n + 4  # its name, one partition
    _index, code, _base, _append_time, _start = struct.unpack_from(">ihqqq", body, pos)
    pos += 30
    (count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    record_errors = []
    for _ in range(count):
        index, length = struct.unpack_from(">ih", body, pos)
        pos += 6
        record_errors.append((index, body[pos : pos + length].decode() if length >= 0 else None))
        pos += max(length, 0)
    (length,) = struct.unpack_from(">h", body, pos)
    message = body[pos + 2 : pos + 2 + length].decode() if length >= 0 else None
    return {"error_code": code, "record_errors": record_errors, "error_message": message}


@pytest.mark.java
def test_record_errors_as_kafka_gives_them(zookeeper: ZooKeeper, tmp_path: Path) -> None:
    """The same batch on a Kafka 3.9 broker and on seglog: librdkafka fails and
    delivers the same records with the same errors; on the wire, Produce v8 answers
    the same record errors and message for keyless records on a compacted topic, and
    the same code and record indexes for timestamps out of bounds."""

    def session(bootstrap: str) -> tuple[object, ...]:
        delivered = send_hundred(bootstrap, "c", {"cleanup.policy": "compact"})
        keyless = produce_v8(bootstrap, "c", [b"a", None, b"b", None, None], int(time.time() * 1000))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        bounded = {"message.timestamp.before.max.ms": "60000"}
        admin.create_topics([NewTopic("ts", 1, 1, config=bounded)])["ts"].result(30)
        stale = produce_v8(bootstrap, "ts", [b"a", b"b"], int(time.time() * 1000) - 3_600_000)
        return delivered, keyless, stale

    with KafkaBroker(tmp_path / "kafka", zookeeper.connect_string) as kafka:
        expected = session(kafka.bootstrap_servers)
    with seglog.Broker(tmp_path / "store") as broker:
        got = session(broker.bootstrap_servers)
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    assert got[1]["error_code"] == 87 and [i for i, _ in got[1]["record_errors"]] == [1, 3, 4], got[1]

    # The timestamp's own message names the times involved: compared by code and index.
    def shape(r: dict[str, object]) -> tuple[object, ...]:
        return r["error_code"], [i for i, _ in r["record_errors"]], r["error_message"]

    assert shape(got[2]) == shape(expected[2])
    assert got[2]["error_code"] == 32, got[2]
