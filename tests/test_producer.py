"""The Producer: send/send_batch, partitioning, batching, delivery reports, and a clear error per misuse."""

from __future__ import annotations

import ast
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import seglog

WAIT = 30  # seconds: an upper bound for things that should happen at once (never asserted on)


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter: a separate process, as another program would be."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )


def batch_headers(store: seglog.Store, topic: str, partition: int) -> list[dict[str, int]]:
    """The header fields of every RecordBatch in a partition, parsed from the raw log bytes."""
    out: list[dict[str, int]] = []
    offset, end = store.offsets(topic, partition)
    while offset < end:
        raw = store.read_raw(topic, partition, offset)
        pos = 0
        while pos < len(raw):
            base, length = struct.unpack_from(">qi", raw, pos)
            (attributes,) = struct.unpack_from(">h", raw, pos + 21)
            (last_delta,) = struct.unpack_from(">i", raw, pos + 23)
            (count,) = struct.unpack_from(">i", raw, pos + 57)
            out.append(
                {
                    "base": base,
                    "count": count,
                    "codec": attributes & 7,
                    "size": 12 + length,
                    "last": base + last_delta,
                }
            )
            pos += 12 + length
        offset = out[-1]["last"] + 1
    return out


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seglog.Store]:
    """One store for the many quick misuse cases, with an empty topic "t"."""
    s = seglog.open(tmp_path_factory.mktemp("shared") / "store")
    s.create_topic("t")
    yield s
    s.close()


# -- send and its delivery reports --------------------------------------------------


def test_send_keyed_records_go_to_the_key_partition_in_order(store: seglog.Store) -> None:
    store.create_topic("t", partitions=4)
    with seglog.Producer(store, linger_ms=0) as producer:
        before = int(time.time() * 1000)
        sent = []
        for i in range(60):
            key = b"user-%d" % (i % 7)
            headers = [("i", str(i).encode()), ("empty", None)]
            sent.append((key, i, producer.send("t", b"v%d" % i, key=key, headers=headers)))
        explicit = producer.send("t", b"at-ts", key=b"user-0", timestamp=1_234_567)
        producer.flush()
        after = int(time.time() * 1000)
        next_offset = [0, 0, 0, 0]
        for key, i, future in sent:
            assert future.is_done and future.succeeded() and not future.failed()
            assert future.exception is None
            md = future.get()
            assert isinstance(md, seglog.RecordMetadata)
            assert md.topic == "t" and md.partition == store.partition_for_key("t", key)
            # Offsets per partition are consecutive, in send order.
            assert md.offset == next_offset[md.partition]
            next_offset[md.partition] += 1
            assert before <= md.timestamp <= after and md.timestamp_type == 0
            (r,) = [r for r in store.read("t", md.partition, md.offset) if r.offset == md.offset]
            assert (r.key, r.value, r.timestamp) == (key, b"v%d" % i, md.timestamp)
            assert r.headers == (("i", str(i).encode()), ("empty", None))
        md = explicit.get(timeout=WAIT)
        assert (md.partition, md.offset, md.timestamp) == (
            store.partition_for_key("t", b"user-0"),
            next_offset[md.partition],
            1_234_567,
        )
        assert "delivered" in repr(explicit)
        assert [store.offsets("t", p)[1] for p in range(4)] == [
            n + (p == md.partition) for p, n in enumerate(next_offset)
        ]


def test_send_to_an_explicit_partition_and_null_key_value(store: seglog.Store) -> None:
    store.create_topic("t", partitions=3)
    with seglog.Producer(store, linger_ms=0) as producer:
        mds = [producer.send("t", None, partition=2).get(WAIT), producer.send("t", partition=2).get(WAIT)]
        mds.append(producer.send("t", bytearray(b"ba"), key=b"", partition=2).get(WAIT))
    assert [(m.partition, m.offset) for m in mds] == [(2, 0), (2, 1), (2, 2)]
    assert [(r.key, r.value) for r in store.read("t", 2, 0)] == [(None, None), (None, None), (b"", b"ba")]


def test_log_append_time_topic_reports_the_append_time(store: seglog.Store) -> None:
    store.create_topic("lat", config={"message.timestamp.type": "LogAppendTime"})
    with seglog.Producer(store, linger_ms=0) as producer:
        before = int(time.time() * 1000)
        md = producer.send("lat", b"x", timestamp=1000).get(WAIT)
    (r,) = store.read("lat", 0, 0)
    assert r.timestamp_type == 1 and md.timestamp_type == 1
    assert md.timestamp == r.timestamp >= before, "the log's append time, not the CreateTime given"


def test_linger_holds_records_until_flush(store: seglog.Store) -> None:
    store.create_topic("t")
    with seglog.Producer(store, linger_ms=600_000) as producer:
        futures = [producer.send("t", b"%d" % i) for i in range(20)]
        time.sleep(0.05)
        assert not any(f.is_done for f in futures), "lingering for 10 minutes"
        assert "pending" in repr(futures[0])
        with pytest.raises(seglog.SeglogTimeoutError) as e:
            futures[0].get(timeout=0.01)
        assert isinstance(e.value, TimeoutError)
        with pytest.raises(ValueError, match="timeout"):
            futures[0].get(timeout=-1)
        assert store.offsets("t", 0) == (0, 0), "nothing appended yet"
        producer.flush(timeout=WAIT)
        assert all(f.is_done for f in futures)
        assert [f.get().offset for f in futures] == list(range(20))
    # One batch: the 20 records waited for each other.
    assert [(b["base"], b["count"]) for b in batch_headers(store, "t", 0)] == [(0, 20)]


def test_close_delivers_what_is_pending(store: seglog.Store) -> None:
    store.create_topic("t")
    producer = seglog.Producer(store, linger_ms=600_000)
    futures = [producer.send("t", b"%d" % i) for i in range(5)]
    assert not producer.closed
    producer.close()
    assert producer.closed
    assert [f.get(timeout=0).offset for f in futures] == list(range(5))
    assert [r.value for r in store.read("t", 0, 0)] == [b"0", b"1", b"2", b"3", b"4"]
    producer.close()  # twice is fine
    assert not store.closed, "a Store passed in stays the caller's"


@pytest.mark.parametrize("acks", ["all", -1, "-1"])
def test_acks_all_means_fsynced_when_get_returns(store: seglog.Store, acks: Any) -> None:
    store.create_topic("t", partitions=2)
    with seglog.Producer(store, acks=acks, linger_ms=1) as producer:
        for i in range(20):
            md = producer.send("t", b"x" * 100, partition=i % 2).get(WAIT)
            assert store.describe("t").partitions[md.partition].recovery_point > md.offset
        [(p, first, last)] = producer.send_batch("t", [b"y" * 100] * 500, partition=1)
        assert (p, first, last) == (1, 10, 509)
        assert store.describe("t").partitions[1].recovery_point > last


@pytest.mark.parametrize("acks", [0, 1, "0", "1"])
def test_acks_0_and_1_deliver(store: seglog.Store, acks: Any) -> None:
    with seglog.Producer(store, acks=acks, linger_ms=0) as producer:
        assert producer.send("t", b"x").get(WAIT).offset == 0
        assert producer.send_batch("t", [b"y", b"z"]) == [(0, 1, 2)]
    assert [r.value for r in store.read("t", 0, 0)] == [b"x", b"y", b"z"]


# -- batching, compression, partitioning ------------------------------------------


def test_small_batch_size_makes_several_batches(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    with seglog.Producer(store, linger_ms=600_000, batch_size=300) as small:
        futures = [small.send("t", b"%02d" % i + b"y" * 48, partition=0) for i in range(40)]
        small.flush()
        assert [f.get().offset for f in futures] == list(range(40))
    with seglog.Producer(store, linger_ms=600_000, batch_size=1 << 20) as big:
        for i in range(40):
            big.send("t", b"%02d" % i + b"y" * 48, partition=1)
    small_batches = batch_headers(store, "t", 0)
    assert len(small_batches) > 5
    assert sum(b["count"] for b in small_batches) == 40
    assert all(b["size"] <= 300 for b in small_batches), "no batch grows past batch_size"
    assert [b["base"] for b in small_batches] == [0] + [b["last"] + 1 for b in small_batches[:-1]]
    assert [(b["base"], b["count"]) for b in batch_headers(store, "t", 1)] == [(0, 40)]
    # Either way the records are the same, in order.
    for p in (0, 1):
        assert [r.value[:2] for r in store.read("t", p, 0)] == [b"%02d" % i for i in range(40)]


def test_send_batch_splits_into_batches(store: seglog.Store) -> None:
    store.create_topic("t")
    with seglog.Producer(store, batch_size=16384) as producer:
        assert producer.send_batch("t", [b"%04d" % i + b"z" * 1000 for i in range(400)]) == [(0, 0, 399)]
    batches = batch_headers(store, "t", 0)
    assert len(batches) > 3 and sum(b["count"] for b in batches) == 400
    assert [r.value[:4] for r in store.read("t", 0, 0, max_bytes=1 << 30)] == [
        b"%04d" % i for i in range(400)
    ]


@pytest.mark.parametrize(
    ("compression", "codec"), [(None, 0), ("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)]
)
def test_compression_type_is_in_the_batch_attributes(
    store: seglog.Store, compression: str | None, codec: int
) -> None:
    store.create_topic("t")
    values = [b"record %d " % i * 20 for i in range(300)]
    with seglog.Producer(store, compression_type=compression, batch_size=4096, linger_ms=600_000) as producer:
        for v in values[:100]:
            producer.send("t", v, key=b"k")
        producer.flush()
        producer.send_batch("t", values[100:], partition=0)
    batches = batch_headers(store, "t", 0)
    assert len(batches) >= 2
    assert [b["codec"] for b in batches] == [codec] * len(batches)
    if codec:
        assert sum(b["size"] for b in batches) < sum(map(len, values)) / 2, "really compressed"
    assert [r.value for r in store.read("t", 0, 0, max_bytes=1 << 30)] == values


def test_unkeyed_records_stick_to_one_partition_at_a_time(store: seglog.Store) -> None:
    store.create_topic("t", partitions=8)
    with seglog.Producer(store, linger_ms=600_000, batch_size=1 << 20) as producer:
        futures = [producer.send("t", b"%d" % i) for i in range(50)]
        producer.flush()
        mds = [f.get() for f in futures]
    (p,) = {md.partition for md in mds}
    assert [md.offset for md in mds] == list(range(50))
    assert [(b["base"], b["count"]) for b in batch_headers(store, "t", p)] == [(0, 50)], (
        "one batch took them all"
    )
    with seglog.Producer(store, linger_ms=600_000, batch_size=250) as producer:
        futures = [producer.send("t", b"s%03d" % i + b"-" * 40) for i in range(300)]
        producer.flush()
        mds = [f.get() for f in futures]
    assert len({md.partition for md in mds}) > 1, "the sticky partition moves on when a batch is done"
    for q in range(8):
        seqs = [
            int(r.value[1:4]) for r in store.read("t", q, 0, max_bytes=1 << 30) if r.value.startswith(b"s")
        ]
        assert seqs == sorted(seqs)


def test_sticky_batches_are_runs_of_consecutive_sends(store: seglog.Store) -> None:
    store.create_topic("t", partitions=8)
    with seglog.Producer(store, linger_ms=600_000, batch_size=250) as producer:
        for i in range(300):
            producer.send("t", b"s%03d" % i + b"-" * 40)
    for q in range(8):
        seq = {r.offset: int(r.value[1:4]) for r in store.read("t", q, 0, max_bytes=1 << 30)}
        for b in batch_headers(store, "t", q):
            run = [seq[o] for o in range(b["base"], b["last"] + 1)]
            assert run == list(range(run[0], run[0] + len(run))), f"partition {q}: batch {run}"


# -- send_batch -----------------------------------------------------------------------


def test_send_batch_with_keys_partitions_like_send(store: seglog.Store) -> None:
    store.create_topic("t", partitions=4)
    keys = [b"key-%d" % (i % 50) for i in range(2000)]
    values = [b"value-%d" % i for i in range(2000)]
    with seglog.Producer(store) as producer:
        result = producer.send_batch("t", values, keys=keys, timestamp=42_000)
        assert producer.send_batch("t", []) == []
    assert sorted(p for p, _, _ in result) == [0, 1, 2, 3]
    assert sum(last - first + 1 for _, first, last in result) == 2000
    for p, first, last in result:
        assert (first, last + 1) == store.offsets("t", p)
        records = store.read("t", p, 0, max_bytes=1 << 30)
        assert len(records) == last - first + 1
        seqs = [int(r.value.split(b"-")[1]) for r in records]
        assert seqs == sorted(seqs), "order kept within the partition"
        for r in records:
            assert r.key == keys[int(r.value.split(b"-")[1])]
            assert store.partition_for_key("t", r.key) == p
            assert r.timestamp == 42_000


def test_send_batch_unkeyed_and_to_an_explicit_partition(store: seglog.Store) -> None:
    store.create_topic("t", partitions=3)
    with seglog.Producer(store) as producer:
        before = int(time.time() * 1000)
        result = producer.send_batch("t", (b"%d" % i for i in range(10_000)))  # any iterable
        assert sum(last - first + 1 for _, first, last in result) == 10_000
        assert producer.send_batch("t", [b"a", None, bytearray(b"c")], partition=2)[0][0] == 2
    records = [r for p in range(3) for r in store.read("t", p, 0, max_bytes=1 << 30)]
    assert all(r.key is None for r in records)
    assert sorted(int(r.value) for r in records if r.value and r.value.isdigit()) == list(range(10_000))
    tail = store.read("t", 2, store.offsets("t", 2)[1] - 3)
    assert [r.value for r in tail] == [b"a", None, b"c"]
    assert all(r.timestamp >= before for r in tail)


class _Bytes(bytes):
    pass


def test_send_batch_reads_lists_in_place_and_leaves_them_as_they_were(store: seglog.Store) -> None:
    # Lists of bytes are read where they are; items of other bytes-like types make
    # the call read a converted copy instead. Either way the caller's lists keep
    # their items, and every record gets its own key and value.
    store.create_topic("t")
    values: list[Any] = [b"v%d" % i for i in range(3000)]
    values[5], values[6], values[7] = _Bytes(b"sub"), bytearray(b"ba"), None
    keys: list[Any] = [b"k%d" % i for i in range(3000)]
    keys[10] = bytearray(b"bk")
    before = [(type(v), v) for v in values], [(type(k), k) for k in keys]
    with seglog.Producer(store) as producer:
        assert producer.send_batch("t", values, keys=keys, partition=0) == [(0, 0, 2999)]
        assert producer.send_batch("t", values[:5], keys=keys[:5], partition=0) == [(0, 3000, 3004)]
        assert producer.send_batch("t", tuple(values[5:8]), partition=0) == [(0, 3005, 3007)]
    assert ([(type(v), v) for v in values], [(type(k), k) for k in keys]) == before
    got = [(r.key, r.value) for r in store.read("t", 0, 0, max_records=10_000, max_bytes=1 << 30)]
    expected = [(bytes(k), None if v is None else bytes(v)) for k, v in zip(keys, values, strict=True)]
    assert got == expected + expected[:5] + [(None, b"sub"), (None, b"ba"), (None, None)]


def test_send_batch_takes_pyarrow_arrays(store: seglog.Store) -> None:
    store.create_topic("t")
    values = pa.array([b"zero", None, b"two", b"", b"four", b"five"], type=pa.binary())
    keys = pa.array(["k0", "k1", None, "k3", "k4", "k5"])  # string
    with seglog.Producer(store) as producer:
        assert producer.send_batch("t", values, keys=keys, partition=0) == [(0, 0, 5)]
        # Sliced arrays: their offset into the buffers (and validity bitmap) is honoured.
        assert producer.send_batch("t", values.slice(1, 3), keys=keys.slice(2, 3), partition=0) == [(0, 6, 8)]
        large = pa.array([b"L0", None, b"L2"], type=pa.large_binary()).slice(1)
        assert producer.send_batch(
            "t", large, keys=pa.array(["a", "b", None], type=pa.large_string()).slice(1), partition=0
        ) == [(0, 9, 10)]
        assert producer.send_batch("t", pa.array(["s", None, "ü"], type=pa.large_string()), partition=0) == [
            (0, 11, 13)
        ]
        with pytest.raises(ValueError, match="keys has 2 items but values has 3"):
            producer.send_batch("t", pa.array([b"a", b"b", b"c"]), keys=pa.array([b"a", b"b"]))
    got = [(r.key, r.value) for r in store.read("t", 0, 0)]
    assert got == [
        (b"k0", b"zero"),
        (b"k1", None),
        (None, b"two"),
        (b"k3", b""),
        (b"k4", b"four"),
        (b"k5", b"five"),
        (None, None),
        (b"k3", b"two"),
        (b"k4", b""),
        (b"b", None),
        (None, b"L2"),
        (None, b"s"),
        (None, None),
        (None, "ü".encode()),
    ]


@pytest.mark.parametrize(
    "bad", ["too large", "not bytes", "arrow too large", "no key, compacted", "arrow no key, compacted"]
)
def test_a_send_batch_refused_late_writes_nothing(store: seglog.Store, bad: str) -> None:
    # Full batches go to the sender while the rest of a call is encoded; a record
    # refused after many of them (here, past ~70 full 64 KiB batches) must still
    # leave the call without a trace.
    compacted = bad.endswith("compacted")
    config: dict[str, Any] = {"max.message.bytes": 100_000}
    store.create_topic("t", config={**config, "cleanup.policy": "compact"} if compacted else config)
    values: list[Any] = [b"%05d" % i + b"v" * 1000 for i in range(5000)]
    values.append(b"x" * 200_000 if bad.endswith("too large") else b"last" if compacted else 12345)
    keys: list[bytes | None] = [b"k"] * len(values)
    if compacted:
        keys[-1] = None  # a compacted topic refuses a record without a key
    expected: type[BaseException] = {"not bytes": TypeError}.get(
        bad, seglog.InvalidRecordError if compacted else seglog.RecordTooLargeError
    )
    arrow = bad.startswith("arrow")
    arg: Any = pa.array(values, type=pa.binary()) if arrow else values
    key_arg: Any = pa.array(keys, type=pa.binary()) if arrow else keys
    with seglog.Producer(store, linger_ms=600_000) as producer:
        with pytest.raises(expected):
            producer.send_batch("t", arg, keys=key_arg)
        producer.flush()
        assert store.offsets("t", 0) == (0, 0), "the refused call wrote nothing"
        assert producer.send_batch("t", values[:5000], keys=keys[:5000]) == [(0, 0, 4999)]
    assert [r.value[:5] for r in store.read("t", 0, 4990)] == [b"%05d" % i for i in range(4990, 5000)]


def test_sends_before_a_send_batch_keep_their_order(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    with seglog.Producer(store, linger_ms=600_000) as producer:
        futures = [producer.send("t", b"send-%d" % i, partition=1) for i in range(5)]
        assert not futures[0].is_done
        [(p, first, last)] = producer.send_batch("t", [b"batch-%d" % i for i in range(5)], partition=1)
        assert all(f.is_done for f in futures), "the open batch went first"
        futures.append(producer.send("t", b"send-5", partition=1))
    assert [f.get().offset for f in futures] == [0, 1, 2, 3, 4, 10]
    assert (p, first, last) == (1, 5, 9)
    assert [r.value for r in store.read("t", 1, 0)] == [
        b"send-0",
        b"send-1",
        b"send-2",
        b"send-3",
        b"send-4",
        b"batch-0",
        b"batch-1",
        b"batch-2",
        b"batch-3",
        b"batch-4",
        b"send-5",
    ]


# -- topics ---------------------------------------------------------------------------


def test_sending_to_a_missing_topic_creates_it(store_path: Path) -> None:
    with seglog.open(store_path, num_partitions=3) as store, seglog.Producer(store, linger_ms=0) as producer:
        md = producer.send("new-topic", b"x", key=b"k").get(WAIT)
        assert store.partition_count("new-topic") == 3
        assert md.partition == store.partition_for_key("new-topic", b"k")
        assert producer.send_batch("other-topic", [b"y"], partition=1) == [(1, 0, 0)]
        assert store.topics() == ["new-topic", "other-topic"]
        with pytest.raises(seglog.InvalidTopicError):
            producer.send("bad/name", b"x")


def test_missing_topic_is_an_error_without_auto_create(store_path: Path) -> None:
    with seglog.open(store_path, auto_create_topics_enable=False) as store:
        with seglog.Producer(store) as producer:
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                producer.send("missing", b"x")
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                producer.send_batch("missing", [b"x"])
            store.create_topic("t", partitions=2)
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                producer.send("t", b"x", partition=2)
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                producer.send_batch("t", [b"x"], partition=-1)
        assert store.topics() == ["t"]
        assert store.offsets("t", 0) == store.offsets("t", 1) == (0, 0)


def test_record_too_large(store: seglog.Store) -> None:
    store.create_topic("t", config={"max.message.bytes": 2000})
    with seglog.Producer(store) as producer:
        with pytest.raises(seglog.RecordTooLargeError, match=r"max\.message\.bytes"):
            producer.send("t", b"x" * 3000)
        with pytest.raises(seglog.RecordTooLargeError):
            producer.send("t", b"v", headers=[("h", b"x" * 3000)])
        with pytest.raises(seglog.RecordTooLargeError):
            producer.send_batch("t", [b"ok", b"x" * 3000, b"ok"])
        assert producer.send("t", b"y" * 1000).get(WAIT).offset == 0, "a record that fits is fine"
    assert [len(r.value) for r in store.read("t", 0, 0)] == [1000], "the refused batch wrote nothing"


def test_compacted_topic_refuses_unkeyed_records(store: seglog.Store) -> None:
    store.create_topic("c", config={"cleanup.policy": "compact"})
    with seglog.Producer(store, linger_ms=0) as producer:
        with pytest.raises(seglog.InvalidRecordError, match="key") as e:
            producer.send("c", b"no key")
        assert isinstance(e.value, ValueError)
        with pytest.raises(seglog.InvalidRecordError):
            producer.send_batch("c", [b"k", b"no key"], keys=[b"k", None])
        assert producer.send("c", b"v", key=b"k").get(WAIT).offset == 0
        assert producer.send_batch("c", [b"v2"], keys=[b"k"]) == [(0, 1, 1)]
    assert [(r.key, r.value) for r in store.read("c", 0, 0)] == [(b"k", b"v"), (b"k", b"v2")]


# -- delivery callbacks ---------------------------------------------------------------


def test_callbacks_get_the_metadata_and_extra_args(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    calls: list[tuple[Any, ...]] = []
    done = threading.Event()

    def on_success(*args: Any) -> None:
        # kafka-python's order: the extra args first, the metadata last.
        *extra, md = args
        calls.append((md.topic, md.partition, md.offset, md.timestamp, *extra))
        if len(calls) == 3:
            done.set()

    errors: list[Any] = []
    with seglog.Producer(store, linger_ms=600_000) as producer:
        futures = [producer.send("t", b"v", partition=1, timestamp=5000 + i) for i in range(3)]
        for i, f in enumerate(futures):
            assert f.add_callback(on_success, "extra", i) is f, "chainable"
            f.add_errback(errors.append)
        assert calls == [], "not before delivery"
        producer.flush()
        assert done.wait(WAIT)
        assert sorted(calls) == [("t", 1, i, 5000 + i, "extra", i) for i in range(3)]
        # Registered after delivery: called at once, in this thread.
        late: list[Any] = []
        futures[2].add_callback(lambda a, md: late.append((md.offset, a)), "late")
        assert late == [(2, "late")]
    assert errors == [], "no errback on success"


def test_errback_gets_the_error_of_a_failed_delivery(store_path: Path) -> None:
    store = seglog.open(store_path)
    store.create_topic("t")
    producer = seglog.Producer(store, linger_ms=600_000)
    future = producer.send("t", b"doomed")
    failed = threading.Event()
    errors: list[tuple[Any, ...]] = []
    successes: list[Any] = []

    def on_error(*args: Any) -> None:
        *extra, exc = args  # kafka-python's order: extra args, then the exception
        errors.append((exc, *extra))
        failed.set()

    future.add_errback(on_error, "ctx", 7).add_callback(successes.append)
    store.close()  # the store goes away under the producer
    producer.flush(timeout=WAIT)
    assert failed.wait(WAIT)
    [(exc, *args)] = errors
    assert isinstance(exc, seglog.StoreClosedError) and args == ["ctx", 7]
    assert future.is_done and future.failed() and not future.succeeded()
    assert isinstance(future.exception, seglog.StoreClosedError)
    assert "failed" in repr(future)
    with pytest.raises(seglog.StoreClosedError):
        future.get(timeout=WAIT)
    late: list[Any] = []
    future.add_errback(lambda tag, e: late.append((type(e), tag)), "late")
    assert late == [(seglog.StoreClosedError, "late")], "called at once when already failed"
    assert successes == []
    producer.close()


# -- threads and memory -----------------------------------------------------------------


def test_eight_threads_send_concurrently(store: seglog.Store) -> None:
    store.create_topic("t", partitions=4)
    n_threads, per_thread = 8, 2500
    futures: list[list[Any]] = [[] for _ in range(n_threads)]
    start = threading.Barrier(n_threads)
    with seglog.Producer(store, linger_ms=1, batch_size=4096) as producer:

        def work(k: int) -> None:
            start.wait()
            for i in range(per_thread):
                key = None if i % 3 == 0 else b"key-%d" % (i % 17)
                futures[k].append(producer.send("t", b"%d:%d" % (k, i), key=key))

        threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        mds = [[f.get(WAIT) for f in fs] for fs in futures]
    placed = [(md.partition, md.offset) for per in mds for md in per]
    assert len(placed) == len(set(placed)) == n_threads * per_thread, "no offset given twice"
    for p in range(4):
        offsets = sorted(o for q, o in placed if q == p)
        assert offsets == list(range(store.offsets("t", p)[1])), "and none skipped"
    stored = {
        (r.partition, r.offset): r.value for p in range(4) for r in store.read("t", p, 0, max_bytes=1 << 30)
    }
    for k, per in enumerate(mds):
        last: dict[int, int] = {}
        for i, md in enumerate(per):
            assert stored[(md.partition, md.offset)] == b"%d:%d" % (k, i)
            assert md.offset > last.get(md.partition, -1), "one thread's records keep their order"
            last[md.partition] = md.offset


def test_small_buffer_memory_blocks_and_resumes(store: seglog.Store) -> None:
    store.create_topic("t")
    with seglog.Producer(
        store, buffer_memory=2048, batch_size=512, linger_ms=0, max_block_ms=60_000
    ) as producer:
        futures = [producer.send("t", b"%05d" % i + b"." * 95) for i in range(3000)]
        assert [f.get(WAIT).offset for f in futures] == list(range(3000))
    assert store.offsets("t", 0) == (0, 3000)


def test_send_honours_max_block_ms_when_the_buffer_is_full(store_path: Path) -> None:
    with seglog.open(store_path) as store:
        store.create_topic("t")
    code = textwrap.dedent(
        """
        import sys, seglog
        store = seglog.open(sys.argv[1])
        producer = seglog.Producer(store, linger_ms=600_000, buffer_memory=1000, batch_size=100_000,
                                   max_block_ms=200)
        outcome = []
        for i in range(6):
            try:
                producer.send("t", b"x" * 300, partition=0)
                outcome.append("sent")
            except seglog.SeglogTimeoutError:
                outcome.append("timeout")
        producer.close()
        print(outcome)
        """
    )
    try:
        r = run_python(code, str(store_path), timeout=5)
    except subprocess.TimeoutExpired:
        pytest.fail("send() blocked far longer than max_block_ms=200")
    assert r.returncode == 0, r.stderr
    outcome = ast.literal_eval(r.stdout.strip())
    assert len(outcome) == 6 and outcome[0] == "sent" and set(outcome) <= {"sent", "timeout"}


# -- lifecycle and misuse -----------------------------------------------------------------


def test_closed_producer_raises(store: seglog.Store) -> None:
    store.create_topic("t")
    with seglog.Producer(store) as producer:
        producer.send("t", b"x")
    assert producer.closed
    with pytest.raises(seglog.ClientClosedError, match="closed"):
        producer.send("t", b"y")
    with pytest.raises(seglog.ClientClosedError):
        producer.send_batch("t", [b"y"])
    with pytest.raises(seglog.ClientClosedError):
        producer.send_batch("t", pa.array([b"y"]))
    assert [r.value for r in store.read("t", 0, 0)] == [b"x"], "delivered on close; nothing after"


def test_closed_producer_refuses_an_empty_send_batch(store: seglog.Store) -> None:
    producer = seglog.Producer(store)
    producer.close()
    with pytest.raises(seglog.ClientClosedError):
        producer.send_batch("t", [])


def test_producer_on_a_path_opens_and_closes_its_store(store_path: Path) -> None:
    producer = seglog.Producer(store_path, linger_ms=0)
    md = producer.send("t", b"x").get(WAIT)
    assert (md.topic, md.offset) == ("t", 0)
    producer.close()
    # The producer's store was closed with it: another process may now write.
    r = run_python(
        "import sys, seglog; s = seglog.open(sys.argv[1]); print(s.read('t', 0, 0)[0].value)", str(store_path)
    )
    assert r.returncode == 0 and r.stdout.strip() == "b'x'", r.stderr


@pytest.mark.parametrize("when", ["closed", "refused"])
def test_producer_on_a_path_leaves_the_callers_store_open(
    store: seglog.Store, store_path: Path, when: str
) -> None:
    store.create_topic("t")
    if when == "closed":
        with seglog.Producer(store_path, linger_ms=0) as producer:
            producer.send("t", b"x").get(WAIT)
    else:
        with pytest.raises(ValueError):
            seglog.Producer(store_path, batch_size=0)
        store.append("t", 0, [b"x"])
    assert not store.closed
    assert store.append("t", 0, [b"y"]) == (1, 1)


def test_producer_on_a_read_only_store(store: seglog.Store, store_path: Path) -> None:
    store.create_topic("t")
    reader = seglog.open(store_path, read_only=True)
    with pytest.raises(seglog.ReadOnlyStoreError):
        seglog.Producer(reader)
    reader.close()


def test_producer_config_errors(store: seglog.Store) -> None:
    with pytest.raises(seglog.InvalidConfigError, match="lingerms") as e:
        seglog.Producer(store, lingerms=5)
    assert isinstance(e.value, ValueError)
    with pytest.raises(seglog.InvalidConfigError, match=r"bootstrap_servers"):
        seglog.Producer(store, bootstrap_servers="localhost:9092")
    for acks in (2, "2", "any", None, "ALL"):
        with pytest.raises(ValueError, match="acks"):
            seglog.Producer(store, acks=acks)
    with pytest.raises(ValueError, match="compression_type"):
        seglog.Producer(store, compression_type="brotli")
    for bad in (
        {"batch_size": 0},
        {"buffer_memory": 0},
        {"linger_ms": -1},
        {"max_block_ms": float("nan")},
        {"linger_ms": float("inf")},
    ):
        with pytest.raises(ValueError):
            seglog.Producer(store, **bad)


@pytest.mark.parametrize("key", ["batch_size", "buffer_memory"])
def test_negative_sizes_raise_value_error(store: seglog.Store, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        seglog.Producer(store, **{key: -1})


@pytest.mark.parametrize(
    "call",
    [
        lambda s, p: seglog.Producer(42),
        lambda s, p: seglog.Producer(store=None),
        lambda s, p: seglog.Producer(s, compression_type=5),
        lambda s, p: seglog.Producer(s, batch_size="big"),
        lambda s, p: seglog.Producer(s, linger_ms="5"),
        lambda s, p: p.send(b"t", b"v"),
        lambda s, p: p.send(None, b"v"),
        lambda s, p: p.send("t", "text"),
        lambda s, p: p.send("t", 5),
        lambda s, p: p.send("t", b"v", key="text"),
        lambda s, p: p.send("t", b"v", key=1),
        lambda s, p: p.send("t", b"v", headers=[("k", "text")]),
        lambda s, p: p.send("t", b"v", headers=[(b"k", b"v")]),
        lambda s, p: p.send("t", b"v", headers=[("k",)]),
        lambda s, p: p.send("t", b"v", headers=5),
        lambda s, p: p.send("t", b"v", partition="0"),
        lambda s, p: p.send("t", b"v", timestamp="now"),
        lambda s, p: p.send("t", b"v", timestamp=1.5),
        lambda s, p: p.send_batch(b"t", [b"v"]),
        lambda s, p: p.send_batch("t", None),
        lambda s, p: p.send_batch("t", 5),
        lambda s, p: p.send_batch("t", "text"),
        lambda s, p: p.send_batch("t", [b"v", "text"]),
        lambda s, p: p.send_batch("t", [b"v", 1]),
        lambda s, p: p.send_batch("t", [b"v"], keys=["text"]),
        lambda s, p: p.send_batch("t", pa.array([1, 2])),
        lambda s, p: p.send_batch("t", pa.array([b"a"]), keys=pa.array([1.5])),
        lambda s, p: p.send_batch("t", [b"v"], partition="0"),
        lambda s, p: p.send_batch("t", [b"v"], timestamp="now"),
        lambda s, p: p.flush(timeout="1"),
    ],
)
def test_wrong_argument_types_raise_type_error(shared_store: seglog.Store, call: Any) -> None:
    store = shared_store
    with seglog.Producer(store) as producer:
        with pytest.raises(TypeError):
            call(store, producer)
    assert store.offsets("t", 0) == (0, 0), "nothing was sent"
    assert store.topics() == ["t"]


def test_send_batch_takes_a_chunked_array(store: seglog.Store) -> None:
    store.create_topic("t")
    values = pa.chunked_array([[b"a", None], [b"c"]], type=pa.binary())
    with seglog.Producer(store) as producer:
        assert producer.send_batch("t", values, partition=0) == [(0, 0, 2)]
    assert [r.value for r in store.read("t", 0, 0)] == [b"a", None, b"c"]


def test_flush_from_a_delivery_callback_is_refused_not_a_deadlock(store: seglog.Store) -> None:
    # Registered while the record waits in its batch (linger far away), the callback runs
    # in the sender thread once flush() sends it: a flush there would wait for itself.
    store.create_topic("t")
    outcome: list[BaseException | None] = []
    ran_in: list[threading.Thread] = []
    done = threading.Event()
    with seglog.Producer(store, linger_ms=600_000) as producer:

        def callback(md: seglog.RecordMetadata) -> None:
            ran_in.append(threading.current_thread())
            try:
                producer.flush(timeout=5)
                outcome.append(None)
            except BaseException as e:
                outcome.append(e)
            done.set()

        future = producer.send("t", b"x").add_callback(callback)
        assert not future.is_done
        producer.flush(timeout=WAIT)
        assert done.wait(WAIT)
    assert ran_in[0] is not threading.current_thread()
    assert isinstance(outcome[0], ValueError) and "callback" in str(outcome[0])


def test_flush_from_a_callback_run_by_the_caller_is_allowed(store: seglog.Store) -> None:
    # Registered after delivery, the callback runs at once in the caller's thread, which
    # is not the sender: flushing there waits for the sender like any other flush.
    store.create_topic("t")
    outcome: list[BaseException | None] = []
    with seglog.Producer(store, linger_ms=600_000) as producer:
        future = producer.send("t", b"x")
        producer.flush(timeout=WAIT)
        assert future.is_done
        pending = producer.send("t", b"y")  # waits for linger until the callback's flush sends it

        def callback(md: seglog.RecordMetadata) -> None:
            try:
                producer.flush(timeout=WAIT)
                outcome.append(None)
            except BaseException as e:
                outcome.append(e)

        future.add_callback(callback)
        assert outcome == [None]
        assert pending.is_done
    assert [r.value for r in store.read("t", 0, 0)] == [b"x", b"y"]
