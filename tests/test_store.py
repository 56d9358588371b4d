"""The Store API: topics, config, reads and writes, and a clear error for each misuse."""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

import pytest

import seglog


def test_open_creates_directory_and_reopens_same_object(store_path: Path) -> None:
    s = seglog.open(store_path)
    assert store_path.is_dir() and (store_path / ".lock").read_text().strip() == str(os.getpid())
    assert seglog.open(store_path) is s
    assert seglog.open(str(store_path) + "/") is s, "same directory, spelled differently"
    link = store_path.parent / "via-link"
    link.symlink_to(store_path)
    assert seglog.open(link) is s, "same directory, through a symbolic link"
    assert seglog.open(link / ".." / store_path.name) is s
    assert s.path == Path(os.path.realpath(store_path))
    with pytest.raises(ValueError, match="already open"):
        seglog.open(store_path, segment_bytes=1 << 20)
    s.close()
    s2 = seglog.open(store_path)
    assert s2 is not s and not s2.closed
    s2.close()
    assert s.closed and s2.closed


def test_clean_close_writes_kafka_files(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("orders", partitions=2)
        s.append("orders", 1, [b"x", b"y"])
    assert (store_path / ".kafka_cleanshutdown").exists()
    assert (store_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 0\norders 1 2\n"
    assert (store_path / "log-start-offset-checkpoint").read_text() == "0\n2\norders 0 0\norders 1 0\n"
    meta = (store_path / "orders-1" / "partition.metadata").read_text()
    assert meta.startswith("version: 0\ntopic_id: ")
    assert (store_path / "orders-1" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    names = sorted(p.name for p in (store_path / "orders-1").iterdir())
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    with seglog.open(store_path) as s:
        assert s.clean_shutdown and s.recovery == (0, 0, 0)
        assert not (store_path / ".kafka_cleanshutdown").exists(), "marker removed while open"
        assert [r.value for r in s.read("orders", 1, 0)] == [b"x", b"y"]


def _disk_bytes(path: Path) -> int:
    """The disk space a file holds, as `du` counts it."""
    return path.stat().st_blocks * 512


def _pages(size: int) -> int:
    """``size`` in whole 4 KiB blocks, and a few more the file system may keep
    for itself (an extent tree's): far less than a segment allocates ahead."""
    return -(-size // 4096) * 4096 + 16 * 1024


def test_the_active_log_is_allocated_ahead_and_closing_frees_what_it_did_not_use(store_path: Path) -> None:
    """The active segment's file has disk blocks past its end while the store is
    open (its length stays the log's), and a clean close gives them back; a roll
    does the same for the segment it closes."""
    with seglog.open(store_path, segment_bytes=600_000) as s:
        s.create_topic("t", partitions=1)
        for _ in range(100):
            s.append("t", 0, [os.urandom(1000) for _ in range(10)])
        files = sorted((store_path / "t-0").glob("*.log"))
        assert len(files) >= 2, "the topic rolled"
        sealed, active = files[0], files[-1]
        size = active.stat().st_size
        assert _disk_bytes(active) >= size + 64 * 1024, "allocated ahead of the end"
        assert _disk_bytes(sealed) <= _pages(sealed.stat().st_size), "given back at the roll"
    assert active.stat().st_size == size
    assert _disk_bytes(active) <= _pages(size), "given back at close"


def test_describe_topics_delete(store: seglog.Store, store_path: Path) -> None:
    store.create_topic("b", partitions=3, config={"segment.bytes": 1 << 20, "cleanup.policy": "compact"})
    store.create_topic("a")
    assert store.topics() == ["a", "b"]
    d = store.describe("b")
    assert [p.partition for p in d.partitions] == [0, 1, 2]
    assert d.config["segment.bytes"] == str(1 << 20) and d.config["cleanup.policy"] == "compact"
    assert d.config["retention.ms"] == "604800000", "Kafka's default"
    assert d.overrides == {"segment.bytes": str(1 << 20), "cleanup.policy": "compact"}
    assert len(d.topic_id) == 22
    with pytest.raises(seglog.InvalidRecordError, match="without key"):
        store.append("b", 2, [b"v" * 100])  # a compacted topic takes keyed records only
    store.append("b", 2, [(b"k", b"v" * 100)] * 10)
    p2 = store.describe("b").partitions[2]
    assert (p2.log_start_offset, p2.log_end_offset, p2.segment_count) == (0, 10, 1)
    assert p2.size_bytes > 1000
    store.delete_topic("b")
    assert store.topics() == ["a"]
    assert not (store_path / "b-0").exists()
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        store.describe("b")


def test_store_level_defaults_and_persistence(store_path: Path) -> None:
    with seglog.open(store_path, segment_bytes=4096, config={"num.partitions": 2}) as s:
        s.create_topic("t", config={"retention.ms": -1})
        assert s.describe("t").config["segment.bytes"] == "4096"
        for _ in range(40):
            s.append("t", 0, [b"x" * 500])
        assert s.describe("t").partitions[0].segment_count > 3, "rolled at 4096 bytes"
    with seglog.open(store_path) as s:
        d = s.describe("t")
        assert d.config["retention.ms"] == "-1", "overrides persist"
        assert d.config["segment.bytes"] == str(1 << 30), "store defaults are per open"
        assert d.partitions[0].log_end_offset == 40


def test_alter_topic_config(store: seglog.Store) -> None:
    store.create_topic("t", config={"segment.bytes": 4096})
    store.alter_topic_config("t", {"retention.bytes": 10_000, "segment.bytes": None})
    d = store.describe("t")
    assert d.overrides == {"retention.bytes": "10000"}
    assert d.config["segment.bytes"] == str(1 << 30)
    with pytest.raises(seglog.InvalidConfigError, match=r"retention\.byte"):
        store.alter_topic_config("t", {"retention.byte": 1})


def test_reads_offsets_and_batches(store: seglog.Store) -> None:
    store.create_topic("t", config={"segment.bytes": 2048, "index.interval.bytes": 100})
    for i in range(50):
        store.append("t", 0, [f"{i}-{j}".encode() for j in range(4)], compression_type="gzip")
    assert store.offsets("t", 0) == (0, 200)
    for k in (0, 1, 57, 199):
        recs = store.read("t", 0, k, max_bytes=1)
        assert recs[0].offset == k, "starts exactly at the offset asked for"
        assert recs[0].value == f"{k // 4}-{k % 4}".encode()
    assert store.read("t", 0, 200) == []
    with pytest.raises(seglog.OffsetOutOfRangeError, match="201"):
        store.read("t", 0, 201)
    with pytest.raises(seglog.OffsetOutOfRangeError):
        store.read("t", 0, -1)
    raw = store.read_raw("t", 0, 8, max_bytes=1)
    assert [r.offset for r in seglog.decode_batches(raw)] == [8, 9, 10, 11]


def test_a_records_fields_are_plain_python_values_and_read_only(store: seglog.Store) -> None:
    store.create_topic("f", partitions=3)
    store.create_topic("g", config={"message.timestamp.type": "LogAppendTime"})
    store.append("f", 2, [(None, b"v", None, 1_700_000_000_000), (b"k", None, [("h", b"x"), ("n", None)])])
    store.append("g", 0, [(b"k", b"v")])
    a, b = store.read("f", 2, 0)
    ts = 1_700_000_000_000
    assert (a.topic, a.partition, a.offset, a.timestamp, a.timestamp_type) == ("f", 2, 0, ts, 0)
    assert (a.key, a.value, a.headers) == (None, b"v", ())
    assert (b.offset, b.key, b.value, b.headers) == (1, b"k", None, (("h", b"x"), ("n", None)))
    assert all(type(x) is int for x in (a.partition, a.offset, a.timestamp, a.timestamp_type))
    (g,) = store.read("g", 0, 0)
    assert (g.timestamp_type, g.partition, g.key) == (1, 0, b"k")
    for field in ("topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"):
        with pytest.raises(AttributeError):
            setattr(a, field, None)
    assert repr(b) == (
        f"ConsumerRecord(topic='f', partition=2, offset=1, timestamp={b.timestamp}, "
        "timestamp_type=0, key=b'k', value=None, headers=(('h', b'x'), ('n', None)))"
    )


def test_read_arrow_reads_partitions_in_order_into_one_batch(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    store.append("t", 0, [(b"k%d" % i, b"v%d" % i, None, 1000 + i) for i in range(5)])
    store.append("t", 1, [(None, b"x", [("h", b"1"), ("n", None)], 7000), (b"k", None)])
    batch, nexts = store.read_arrow([("t", 0, 2), ("t", 1, 0)])
    assert batch.schema.names == "key value topic partition offset timestamp timestampType headers".split()
    assert batch.column("key").to_pylist() == [b"k2", b"k3", b"k4", None, b"k"]
    assert batch.column("value").to_pylist() == [b"v2", b"v3", b"v4", b"x", None]
    assert batch.column("topic").to_pylist() == ["t"] * 5
    assert batch.column("partition").to_pylist() == [0, 0, 0, 1, 1]
    assert batch.column("offset").to_pylist() == [2, 3, 4, 0, 1]
    ms = [us // 1000 for us in batch.column("timestamp").cast("int64").to_pylist()]
    assert ms[:4] == [1002, 1003, 1004, 7000]
    headers = batch.column("headers").to_pylist()
    assert headers[3] == [{"key": "h", "value": b"1"}, {"key": "n", "value": None}] and headers[0] == []
    assert nexts == [5, 2]

    # max_records counts rows over all partitions: the partitions after the cut are not read.
    batch, nexts = store.read_arrow([("t", 0, 0), ("t", 1, 0)], max_records=3)
    assert batch.column("offset").to_pylist() == [0, 1, 2] and nexts == [3, None]
    # At the log ends: no rows, and nothing to move on to.
    batch, nexts = store.read_arrow([("t", 0, 5), ("t", 1, 2)])
    assert batch.num_rows == 0 and batch.num_columns == 8 and nexts == [None, None]
    with pytest.raises(seglog.OffsetOutOfRangeError):
        store.read_arrow([("t", 0, 6)])
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        store.read_arrow([("nope", 0, 0)])
    with pytest.raises(ValueError, match="max_records must be positive"):
        store.read_arrow([("t", 0, 0)], max_records=0)


def test_file_range_sends_the_same_bytes_with_sendfile(store: seglog.Store) -> None:
    store.create_topic("t")
    store.append("t", 0, [b"x" * 100] * 100)
    path, pos, length = store.file_range("t", 0, 0)
    assert path.name == "00000000000000000000.log" and pos == 0
    a, b = socket.socketpair()
    with a, b, open(path, "rb") as f:
        sent = os.sendfile(a.fileno(), f.fileno(), pos, length)
        got = b""
        while len(got) < sent:
            got += b.recv(1 << 20)
    assert got == store.read_raw("t", 0, 0)
    assert store.file_range("t", 0, 100) is None


def test_offset_for_time_and_log_append_time(store: seglog.Store) -> None:
    store.create_topic("t")
    store.append("t", 0, [(None, b"a", None, 1000), (None, b"b", None, 2000), (None, b"c", None, 3000)])
    assert store.offset_for_time("t", 0, 1500) == (1, 2000)
    assert store.offset_for_time("t", 0, 0) == (0, 1000)
    assert store.offset_for_time("t", 0, 3001) is None
    store.create_topic("lat", config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    store.append("lat", 0, [(None, b"x", None, 5)])
    (r,) = store.read("lat", 0, 0)
    assert r.timestamp_type == 1 and r.timestamp >= before


def test_truncate_to(store: seglog.Store) -> None:
    store.create_topic("t")
    for i in range(10):
        store.append("t", 0, [str(i).encode()])
    store.truncate_to("t", 0, 6)
    assert store.offsets("t", 0) == (0, 6)
    assert store.append("t", 0, [b"new"]) == (6, 6)
    assert [r.value for r in store.read("t", 0, 5)] == [b"5", b"new"]


def test_durable_append_advances_recovery_point(store: seglog.Store) -> None:
    store.create_topic("t")
    store.append("t", 0, [b"a"] * 5)
    assert store.describe("t").partitions[0].recovery_point == 0
    store.append("t", 0, [b"b"] * 5, durable=True)
    assert store.describe("t").partitions[0].recovery_point == 10


def test_flush_messages_policy(store: seglog.Store) -> None:
    store.create_topic("t", config={"flush.messages": 3})
    store.append("t", 0, [b"a", b"b"])
    assert store.describe("t").partitions[0].recovery_point == 0
    store.append("t", 0, [b"c"])
    assert store.describe("t").partitions[0].recovery_point == 3


def test_keyed_partitioning_is_kafkas(store: seglog.Store) -> None:
    store.create_topic("t", partitions=12)
    # Kafka: toPositive(murmur2(key)) % partitions; murmur2(b"foobar") = -790332482.
    assert seglog.murmur2(b"foobar") == -790332482
    assert store.partition_for_key("t", b"foobar") == (-790332482 & 0x7FFFFFFF) % 12


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a/b", "../../etc", "with space", "ünïcode", "x" * 250, "a\x00b"]
)
def test_invalid_topic_names(store: seglog.Store, name: str) -> None:
    with pytest.raises(seglog.InvalidTopicError) as e:
        store.create_topic(name)
    assert isinstance(e.value, ValueError)


def test_create_topic_errors(store: seglog.Store) -> None:
    store.create_topic("t")
    with pytest.raises(seglog.TopicAlreadyExistsError):
        store.create_topic("t")
    with pytest.raises(ValueError, match="partitions"):
        store.create_topic("u", partitions=0)
    with pytest.raises(TypeError, match="partitions"):
        store.create_topic("u", partitions="3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="topic name"):
        store.create_topic(b"u")  # type: ignore[arg-type]
    with pytest.raises(seglog.InvalidConfigError, match=r"segment\.bites"):
        store.create_topic("u", config={"segment.bites": 1})
    with pytest.raises(seglog.InvalidConfigError, match=r"segment\.bytes: Value must be at least 14"):
        store.create_topic("u", config={"segment.bytes": 3})
    with pytest.raises(seglog.InvalidConfigError, match="CreateTime"):
        store.create_topic("u", config={"message.timestamp.type": "Whenever"})
    with pytest.raises(TypeError, match=r"segment\.bytes"):
        store.create_topic("u", config={"segment.bytes": [1]})  # type: ignore[dict-item]
    assert store.topics() == ["t"], "nothing half-created"


def test_append_errors(store: seglog.Store) -> None:
    store.create_topic("t", config={"max.message.bytes": 1000})
    with pytest.raises(seglog.UnknownTopicOrPartitionError, match="nope"):
        store.describe("nope")
    with pytest.raises(seglog.UnknownTopicOrPartitionError, match="partition 1"):
        store.append("t", 1, [b"x"])
    with pytest.raises(TypeError, match="value must be bytes"):
        store.append("t", 0, [(None, "text")])
    with pytest.raises(TypeError, match="a record must be bytes"):
        store.append("t", 0, [42])
    with pytest.raises(TypeError, match="key must be bytes"):
        store.append("t", 0, [(1, b"v")])
    with pytest.raises(ValueError, match="2 to 4 items"):
        store.append("t", 0, [(b"k", b"v", None, None, None)])
    with pytest.raises(TypeError, match="header key must be str"):
        store.append("t", 0, [(b"k", b"v", [(b"h", b"v")])])
    with pytest.raises(TypeError, match="timestamp_ms"):
        store.append("t", 0, [(b"k", b"v", None, "now")])
    with pytest.raises(ValueError, match="compression_type"):
        store.append("t", 0, [b"x"], compression_type="brotli")
    with pytest.raises(ValueError, match="empty"):
        store.append("t", 0, [])
    with pytest.raises(TypeError, match="iterable"):
        store.append("t", 0, 5)  # type: ignore[arg-type]
    with pytest.raises(seglog.RecordTooLargeError, match=r"max.message.bytes = 1000"):
        store.append("t", 0, [b"x" * 2000])
    assert store.offsets("t", 0) == (0, 0), "no failed call appended anything"


def test_append_creates_missing_topics_unless_disabled(tmp_path: Path) -> None:
    with seglog.open(tmp_path / "a", num_partitions=3) as s:
        assert s.append("auto", 2, [b"x"]) == (0, 0)
        assert s.describe("auto").partitions[2].log_end_offset == 1
    with seglog.open(tmp_path / "b", auto_create_topics_enable=False) as s:
        with pytest.raises(seglog.UnknownTopicOrPartitionError, match="nope"):
            s.append("nope", 0, [b"x"])
        assert s.topics() == []


def test_reads_check_the_crc_even_after_a_clean_reopen(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("t")
        s.append("t", 0, [b"A" * 100])
        # Not the last batch: an open CRC-checks that one and cuts it if damaged.
        s.append("t", 0, [b"B" * 100])
    log = store_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    (first_len,) = struct.unpack_from(">i", data, 8)
    data[first_len + 12 - 50] ^= 0x01  # inside the value: only the CRC can tell
    log.write_bytes(bytes(data))
    with seglog.open(store_path) as s:
        assert s.clean_shutdown
        with pytest.raises(seglog.CorruptRecordError, match="CRC"):
            s.read("t", 0, 0)
        assert [r.value for r in s.read("t", 0, 1)] == [b"B" * 100]


def test_alter_config_refuses_unknown_keys_even_to_remove(store: seglog.Store) -> None:
    store.create_topic("t")
    with pytest.raises(seglog.InvalidConfigError, match=r"no\.such\.key"):
        store.alter_topic_config("t", {"no.such.key": None})


def test_closed_store_refuses_use(store_path: Path) -> None:
    s = seglog.open(store_path)
    s.create_topic("t")
    s.close()
    s.close()  # idempotent
    for call in (
        lambda: s.topics(),
        lambda: s.create_topic("u"),
        lambda: s.append("t", 0, [b"x"]),
        lambda: s.read("t", 0, 0),
        lambda: s.flush(),
    ):
        with pytest.raises(seglog.StoreClosedError):
            call()


def test_read_only_store(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        w.append("t", 0, [b"a"])
        r = seglog.open(store_path, read_only=True)
        assert r is not w and r.read_only
        assert [x.value for x in r.read("t", 0, 0)] == [b"a"]
        w.append("t", 0, [b"b"])
        assert [x.value for x in r.read("t", 0, 1)] == [b"b"], "sees new data as it lands"
        w.create_topic("later")
        assert r.topics() == ["later", "t"], "sees topics created after it opened"
        for call in (
            lambda: r.append("t", 0, [b"x"]),
            lambda: r.create_topic("u"),
            lambda: r.delete_topic("t"),
            lambda: r.truncate_to("t", 0, 0),
        ):
            with pytest.raises(seglog.ReadOnlyStoreError):
                call()
        r.close()


def test_missing_and_unusable_paths(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as e:
        seglog.open(tmp_path / "missing", read_only=True)
    assert e.value.filename == str(tmp_path / "missing")
    f = tmp_path / "a-file"
    f.write_text("not a store")
    with pytest.raises(NotADirectoryError):
        seglog.open(f)
    with pytest.raises(NotADirectoryError):
        seglog.open(f, read_only=True)
    with pytest.raises(TypeError, match="path"):
        seglog.open(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="read_only"):
        seglog.open(tmp_path, read_only="yes")  # type: ignore[arg-type]
    with pytest.raises(seglog.InvalidConfigError, match=r"segment\.bites"):
        seglog.open(tmp_path / "s", segment_bites=1)


def test_corrupt_topic_file_is_a_clear_error(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("t")
    (store_path / ".topics.json").write_text("{not json")
    with pytest.raises(seglog.CorruptFileError, match=r"\.topics\.json") as e:
        seglog.open(store_path)
    # Damage on disk, not a caller's mistake: no ValueError.
    assert not isinstance(e.value, ValueError)
    assert e.value.filename == str(store_path / ".topics.json")


def test_forked_child_must_reopen(store: seglog.Store, store_path: Path) -> None:
    store.create_topic("t")
    store.append("t", 0, [b"a"])
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report what happens, never return into pytest
        code = 1
        try:
            try:
                store.read("t", 0, 0)
            except seglog.SeglogError as e:
                if "forked" in str(e):
                    ro = seglog.open(store_path, read_only=True)
                    code = 0 if ro is not store and ro.read("t", 0, 0)[0].value == b"a" else 2
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"\x00"
    os.waitpid(pid, 0)
    assert store.read("t", 0, 0)[0].value == b"a", "the parent's store is untouched"
