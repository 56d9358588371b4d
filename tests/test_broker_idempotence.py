"""Idempotent producers through the broker: InitProducerId, sequence numbers checked per
producer and partition, a retried batch answered with its first copy's offsets (also after
a broker restart, from the producer state rebuilt from snapshots or from the log), and
Kafka's errors for gaps and fenced epochs."""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

import seglog
from kafka_proxy import CuttingProxy


def _values(store: seglog.Store, topic: str, partition: int = 0) -> list[bytes]:
    end = store.describe(topic).partitions[partition].log_end_offset
    return [r.value for r in store.read(topic, partition, 0, max_records=end + 1)]


def _batches(path: Path, topic: str, partition: int = 0) -> list[tuple[int, int, int, int]]:
    """(producer id, epoch, base sequence, record count) of each batch on disk, as
    kafka-python's own parser reads them."""
    from kafka.record.default_records import DefaultRecordBatch

    out = []
    for f in sorted((path / f"{topic}-{partition}").glob("*.log")):
        data = f.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            b = DefaultRecordBatch(data[pos : pos + 12 + length])
            out.append((b.producer_id, b.producer_epoch, b.base_sequence, len(list(b))))
            pos += 12 + length
    return out


def test_kafka_python_defaults_are_idempotent_and_land_with_producer_ids(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path) as broker:
        p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)  # 3.x: idempotent, acks=all
        futures = [p.send("idem", value=b"v%d" % i) for i in range(50)]
        p.flush()
        offsets = [f.get(timeout=10).offset for f in futures]
        p.close()
        assert offsets == list(range(50))
        assert _values(broker.store, "idem") == [b"v%d" % i for i in range(50)]
    batches = _batches(tmp_path, "idem")
    assert {pid for pid, *_ in batches} != {-1}, "batches carry the producer id InitProducerId gave"
    # Sequences run on without gaps from 0 across the batches.
    seq = 0
    for _pid, epoch, base_seq, count in batches:
        assert (epoch, base_seq) == (0, seq)
        seq += count


def test_producer_ids_are_never_handed_out_twice_across_restarts(tmp_path: Path) -> None:
    ids = []
    for _ in range(3):
        with seglog.Broker(tmp_path) as broker:
            p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
            p.send("ids", value=b"x").get(timeout=10)
            p.close()
        ids.append(_batches(tmp_path, "ids")[-1][0])
    assert len(set(ids)) == 3, ids


def _produce_through_cut(proxy: CuttingProxy, n: int, topic: str) -> list[tuple[int, bytes]]:
    """Produces ``n`` values one at a time through ``proxy`` with a confluent-kafka idempotent
    producer, cutting the connection after the broker took the 3rd; returns the
    (offset, value) of each delivery report."""
    delivered: list[tuple[int, bytes]] = []
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": proxy.address,
            "enable.idempotence": True,
            "linger.ms": 0,
            "retry.backoff.ms": 50,
            "reconnect.backoff.ms": 50,
        }
    )
    for i in range(n):
        if i == 2:
            proxy.cut_next_produce.set()
        p.produce(topic, value=b"value-%d" % i, partition=0, on_delivery=report)
        assert p.flush(30) == 0
    assert errors == []
    return delivered


def test_a_retried_batch_is_stored_once_and_answered_with_its_first_offsets(tmp_path: Path) -> None:
    proxy = CuttingProxy()
    try:
        with seglog.Broker(tmp_path, advertised_listeners=proxy.address) as broker:
            proxy.upstream = broker.bootstrap_servers
            delivered = _produce_through_cut(proxy, 6, "retry")
            assert proxy.cuts == 1, "the connection was cut after the broker appended"
            values = _values(broker.store, "retry")
        assert values == [b"value-%d" % i for i in range(6)], "one copy of the retried batch"
        assert sorted(delivered) == list(enumerate(values)), "each report names the offset the log holds"
    finally:
        proxy.close()


def test_a_retry_after_a_broker_restart_is_still_recognised(tmp_path: Path) -> None:
    """The broker is closed (and reopened on the same store) between the append and the
    client's retry: the producer state comes back from the snapshot written at close."""
    proxy = CuttingProxy()
    holder: dict[str, seglog.Broker] = {}

    def restart() -> None:
        holder["b"].close()
        holder["b"] = seglog.Broker(tmp_path, advertised_listeners=proxy.address)
        proxy.upstream = holder["b"].bootstrap_servers

    try:
        holder["b"] = seglog.Broker(tmp_path, advertised_listeners=proxy.address)
        proxy.upstream = holder["b"].bootstrap_servers
        proxy.on_cut = restart
        delivered = _produce_through_cut(proxy, 5, "restarted")
        values = _values(holder["b"].store, "restarted")
        assert values == [b"value-%d" % i for i in range(5)]
        assert sorted(delivered) == list(enumerate(values))
        assert list((tmp_path / "restarted-0").glob("*.snapshot")), "close wrote a producer snapshot"
    finally:
        holder["b"].close()
        proxy.close()


def _produce_request(topic: str, batch: bytes, acks: int = -1) -> bytes:
    """A Produce v3 request carrying ``batch`` for partition 0, framed."""
    name = topic.encode()
    body = struct.pack(">hhih", 0, 3, 7, -1)  # api key, version, correlation id, null client id
    body += struct.pack(">h", -1)  # transactional id: null
    body += struct.pack(">hi", acks, 10_000)
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", len(batch)) + batch
    return struct.pack(">i", len(body)) + body


def _produce_error(addr: str, topic: str, batch: bytes) -> tuple[int, int]:
    """Sends one Produce v3; returns (error code, base offset) of partition 0."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_produce_request(topic, batch))
        (size,) = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
        resp = s.recv(size, socket.MSG_WAITALL)
    # correlation id, topics[1]: name, partitions[1]: index, error, base offset
    pos = 4 + 4
    (name_len,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + name_len + 4
    _index, error, base_offset = struct.unpack_from(">ihq", resp, pos)
    return error, base_offset


def _batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    b.append(0, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(b.build())


@pytest.mark.parametrize(
    ("epoch", "sequence", "code"),
    [(0, 5, 45), (1, 3, 45), (0, 1, 0), (0, 0, 0)],
    ids=["gap", "new-epoch-not-at-zero", "duplicate-of-the-last", "duplicate-of-an-earlier"],
)
def test_sequence_gaps_and_fenced_epochs_get_kafkas_codes(
    tmp_path: Path, epoch: int, sequence: int, code: int
) -> None:
    with seglog.Broker(tmp_path) as broker:
        broker.store.create_topic("seq")
        addr = broker.bootstrap_servers
        for seq in range(2):
            assert _produce_error(addr, "seq", _batch(1000, 0, seq, b"v%d" % seq)) == (0, seq)
        err, base = _produce_error(addr, "seq", _batch(1000, epoch, sequence, b"again"))
        assert err == code
        if code == 0:
            assert base == sequence, "the duplicate is answered with the first copy's offset"
        assert _values(broker.store, "seq") == [b"v0", b"v1"]
        if code == 45:
            # The producer is not stuck: the next sequence in order still goes in.
            assert _produce_error(addr, "seq", _batch(1000, 0, 2, b"v2")) == (0, 2)


def test_an_older_epoch_is_fenced(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path) as broker:
        broker.store.create_topic("fence")
        addr = broker.bootstrap_servers
        assert _produce_error(addr, "fence", _batch(7, 3, 0, b"new")) == (0, 0)
        assert _produce_error(addr, "fence", _batch(7, 2, 0, b"old"))[0] == 47  # INVALID_PRODUCER_EPOCH
        assert _values(broker.store, "fence") == [b"new"]


def _serve(path: Path, advertised: str) -> tuple[subprocess.Popen[str], str]:
    """``seglog serve`` on a free port; returns the process and its address."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "seglog",
            "serve",
            "--store",
            str(path),
            "--listen",
            "127.0.0.1:0",
            "--advertised-listener",
            advertised,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("seglog: broker 0 listening on "):
        _stop(proc, signal.SIGKILL)
        raise AssertionError(f"seglog serve did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1].strip()


def _stop(proc: subprocess.Popen[str], sig: int) -> None:
    """Signals a ``_serve`` process, waits for it and closes its pipe (an unclosed
    pipe is a ResourceWarning when the collector finds it, perhaps in another test)."""
    try:
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait(30)
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_retry_after_a_broker_crash_is_still_recognised(tmp_path: Path) -> None:
    """kill -9 between the append and the retry: no snapshot was written at close, so the
    producer state is rebuilt from the log by recovery, and still knows the batch."""
    proxy = CuttingProxy()
    procs: list[subprocess.Popen[str]] = []

    def crash_and_restart() -> None:
        _stop(procs[-1], signal.SIGKILL)
        proc, addr = _serve(tmp_path, proxy.address)
        procs.append(proc)
        proxy.upstream = addr

    try:
        proc, addr = _serve(tmp_path, proxy.address)
        procs.append(proc)
        proxy.upstream = addr
        proxy.on_cut = crash_and_restart
        delivered = _produce_through_cut(proxy, 5, "crashed")
        assert proxy.cuts == 1 and len(procs) == 2
    finally:
        for p in procs:
            _stop(p, signal.SIGTERM)
        proxy.close()
    with seglog.open(tmp_path, read_only=True) as store:
        values = _values(store, "crashed")
    assert values == [b"value-%d" % i for i in range(5)]
    assert sorted(delivered) == list(enumerate(values))
