"""seglog._native.RemoteClient, the Rust Kafka protocol client, against a broker in this
process: metadata, produce (idempotent, acks=all), fetch as records and as Arrow, list
offsets, and Kafka's errors as seglog's exceptions."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog
from seglog._native import RemoteClient


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[seglog.Broker]:
    with seglog.Broker(tmp_path / "store") as b:
        yield b


@pytest.fixture
def client(broker: seglog.Broker) -> RemoteClient:
    return RemoteClient(broker.bootstrap_servers, client_id="tests", timeout_ms=10_000)


def test_metadata_names_the_broker_and_the_topics(broker: seglog.Broker, client: RemoteClient) -> None:
    broker.store.create_topic("events", partitions=2)
    m = client.metadata()
    assert m["cluster_id"] == broker.cluster_id
    assert m["brokers"] == [
        {"node_id": broker.node_id, "host": broker.host, "port": broker.port, "rack": None}
    ]
    parts = m["topics"]["events"]["partitions"]
    assert [(p["partition"], p["leader"], p["error_code"]) for p in parts] == [(0, 0, 0), (1, 0, 0)]
    # Asking for a missing topic reports it and does not create it.
    assert client.metadata(["nope"])["topics"]["nope"]["error_code"] == 3
    assert "nope" not in broker.store.topics()


def test_produce_then_fetch_back(broker: seglog.Broker, client: RemoteClient) -> None:
    broker.store.create_topic("t")
    assert client.produce("t", 0, [b"a", (b"k", b"b", [("h", b"1")], 1234)], compression="zstd") == 0
    assert client.produce("t", 0, [(None, b"c")]) == 2
    recs = client.fetch("t", 0, 0)
    assert [(r.offset, r.key, r.value) for r in recs] == [(0, None, b"a"), (1, b"k", b"b"), (2, None, b"c")]
    assert recs[1].headers == (("h", b"1"),) and recs[1].timestamp == 1234
    assert recs[0].topic == "t" and recs[0].timestamp > 1_600_000_000_000  # now, as Kafka's producer
    # Whole batches come back; records before the offset are not returned.
    assert [r.offset for r in client.fetch("t", 0, 1, max_records=1)] == [1]
    # What the broker stored is what the store reads.
    assert [r.value for r in broker.store.read("t", 0, 0)] == [b"a", b"b", b"c"]
    assert client.fetch("t", 0, 3, max_wait_ms=10) == []


def test_fetch_arrow_equals_the_stores_read_arrow(broker: seglog.Broker, client: RemoteClient) -> None:
    pytest.importorskip("pyarrow")
    from seglog._arrow import columns_to_batch

    broker.store.create_topic("cols")
    for i in range(3):
        client.produce(
            "cols", 0, [(b"k%d" % j, b"v%d" % j, [("n", b"%d" % j)], 10 * j) for j in range(i * 4, i * 4 + 4)]
        )
    cols, next_offset = client.fetch_arrow("cols", 0, 2, max_records=7)
    remote = columns_to_batch(cols)
    local, nexts = broker.store.read_arrow([("cols", 0, 2)], max_records=7)
    assert next_offset == nexts[0] == 9
    assert remote.equals(local)
    assert remote.column("offset").to_pylist() == list(range(2, 9))


def test_list_offsets(broker: seglog.Broker, client: RemoteClient) -> None:
    broker.store.create_topic("times")
    client.produce("times", 0, [(None, b"x", None, t) for t in (100, 200, 300)])
    assert client.list_offsets("times", 0, -2) == 0
    assert client.list_offsets("times", 0, -1) == 3
    assert client.list_offsets("times", 0, 150) == 1
    assert client.list_offsets("times", 0, 301) is None


def test_kafka_errors_are_seglogs_exceptions(broker: seglog.Broker, client: RemoteClient) -> None:
    broker.store.create_topic("small", config={"max.message.bytes": 1000})
    with pytest.raises(seglog.RecordTooLargeError, match=r"max\.message\.bytes = 1000"):
        client.produce("small", 0, [b"x" * 5000])
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        client.fetch("absent", 0, 0)
    with pytest.raises(seglog.UnknownTopicOrPartitionError, match="no partition 4"):
        client.fetch("small", 4, 0)
    client.produce("small", 0, [b"ok"])
    with pytest.raises(seglog.OffsetOutOfRangeError):
        client.fetch("small", 0, 50)
    with pytest.raises(ValueError, match="compression_type"):
        client.produce("small", 0, [b"x"], compression="brotli")
    with pytest.raises(ValueError, match="HOST:PORT"):
        RemoteClient("no-port-here")


def test_an_unreachable_broker_is_an_oserror() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionRefusedError):
        RemoteClient(f"127.0.0.1:{port}", timeout_ms=2000)


def test_a_huge_response_frame_is_refused() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(1024)
            conn.sendall(b"\x7f\xff\xff\xff")
            conn.recv(1024)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with pytest.raises(OSError, match="frame size 2147483647"):
            RemoteClient(f"127.0.0.1:{listener.getsockname()[1]}", timeout_ms=2000)
    finally:
        listener.close()


def test_calls_release_the_gil(broker: seglog.Broker, client: RemoteClient) -> None:
    broker.store.create_topic("wait")
    got: list[int] = []
    # A long-polling fetch in one thread must not stop a produce in another.
    t = threading.Thread(
        target=lambda: got.extend(r.offset for r in client.fetch("wait", 0, 0, max_wait_ms=5000))
    )
    t.start()
    client.produce("wait", 0, [b"wake"])
    t.join(10)
    assert got == [0]
