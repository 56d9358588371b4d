"""Errors that keep their information: each failure reaches Python as its own exception
(Kafka's error for a bad batch, the file for damage on disk), and Kafka's special values
(-1, -2) mean what they mean in Kafka."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

import seglog


def one_batch(store: seglog.Store, values: list[bytes], topic: str = "src") -> bytearray:
    """A RecordBatch v2 made by seglog, to be bent into a client's mistakes."""
    if topic not in store.topics():
        store.create_topic(topic)
    start = store.offsets(topic, 0)[1]
    store.append(topic, 0, values)
    return bytearray(store.read_raw(topic, 0, start))


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def patched(batch: bytearray, at: int, fmt: str, value: int) -> bytes:
    """Overwrites a header field and fixes the CRC, as a careless client would."""
    b = bytearray(batch)
    struct.pack_into(fmt, b, at, value)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


def test_client_batches_get_kafkas_errors(store: seglog.Store) -> None:
    store.create_topic("t")
    good = one_batch(store, [b"a", b"b"])
    # recordsCount 2 with lastOffsetDelta 5 would take six offsets.
    with pytest.raises(seglog.InvalidRecordError, match="lastOffsetDelta 5"):
        store.append_raw("t", 0, patched(good, 23, ">i", 5))
    with pytest.raises(seglog.UnsupportedCompressionTypeError, match="codec id 5"):
        store.append_raw("t", 0, patched(good, 21, ">h", 5))
    with pytest.raises(seglog.InvalidRecordError, match="control"):
        store.append_raw("t", 0, patched(good, 21, ">h", 0x20))
    torn = bytearray(good)
    torn[-1] ^= 1
    with pytest.raises(seglog.CorruptRecordError, match="CRC"):
        store.append_raw("t", 0, bytes(torn))
    assert store.offsets("t", 0) == (0, 0), "nothing of a refused batch was appended"
    # A request is all or nothing: a good batch before a bad one is not kept.
    with pytest.raises(seglog.InvalidRecordError):
        store.append_raw("t", 0, bytes(good) + patched(good, 23, ">i", 5))
    assert store.offsets("t", 0) == (0, 0)
    assert store.append_raw("t", 0, bytes(good)) == (0, 1)


def test_timestamps_are_checked(store: seglog.Store) -> None:
    store.create_topic("t", config={"message.timestamp.before.max.ms": 3_600_000})
    now = int(time.time() * 1000)
    with pytest.raises(seglog.InvalidTimestampError, match=r"before\.max\.ms"):
        store.append("t", 0, [(None, b"v", [], now - 86_400_000)])
    with seglog.Producer(store, linger_ms=0) as p:
        with pytest.raises(seglog.InvalidTimestampError, match="negative") as e:
            p.send("t", b"v", timestamp=-5)
        assert isinstance(e.value, ValueError)
        with pytest.raises(seglog.InvalidTimestampError):
            p.send("t", b"v", timestamp=now - 86_400_000)
        assert p.send("t", b"v", timestamp=now).get(30).offset == 0


def test_a_failed_delivery_raises_its_own_exception(store: seglog.Store) -> None:
    store.create_topic("t")
    with seglog.Producer(store, linger_ms=60_000) as p:
        future = p.send("t", b"v" * 200, partition=0)
        # The batch is over the limit by the time it is appended.
        store.alter_topic_config("t", {"max.message.bytes": 100})
        p.flush(30)
        assert future.failed()
        err = future.exception
        assert type(err) is seglog.RecordTooLargeError, repr(err)
        with pytest.raises(seglog.RecordTooLargeError, match=r"max\.message\.bytes = 100"):
            future.get(0)


def test_a_client_batch_must_fit_a_segment(store: seglog.Store) -> None:
    store.create_topic("t", config={"segment.bytes": 100})
    big = one_batch(store, [b"v" * 200])
    with pytest.raises(seglog.RecordBatchTooLargeError, match=r"segment\.bytes = 100") as e:
        store.append_raw("t", 0, bytes(big))
    assert isinstance(e.value, seglog.RecordTooLargeError)
    # seglog's own appends give a large batch a segment of its own, as before.
    assert store.append("t", 0, [b"v" * 200]) == (0, 0)


def test_a_corrupt_checkpoint_names_the_file(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("t")
    checkpoint = store_path / "recovery-point-offset-checkpoint"
    checkpoint.write_text("0\n1\nt 0 not-a-number\n")
    with pytest.raises(seglog.CorruptFileError, match="recovery-point-offset-checkpoint") as e:
        seglog.open(store_path)
    assert not isinstance(e.value, ValueError), "damage on disk is not the caller's mistake"
    assert isinstance(e.value, seglog.CorruptRecordError)
    assert e.value.filename == str(checkpoint)


def test_kafkas_negative_offsets(store: seglog.Store) -> None:
    store.create_topic("t")
    store.append("t", 0, [(None, b"v", [], 1000 + i) for i in range(5)])
    assert store.offset_for_time("t", 0, -1) == (5, -1)
    assert store.offset_for_time("t", 0, -2) == (0, -1)
    assert store.offset_for_time("t", 0, -3) == (4, 1004), "-3: the largest timestamp"
    with pytest.raises(ValueError, match="-2 \\(earliest\\) or -3 \\(largest\\)"):
        store.offset_for_time("t", 0, -4)
    with pytest.raises(ValueError, match="high watermark"):
        store.delete_records("t", 0, -2)
    store.delete_records("t", 0, -1)
    assert store.offsets("t", 0) == (5, 5), "-1 deletes up to the high watermark"
    assert store.offset_for_time("t", 0, -2) == (5, -1)


def test_describe_shows_no_maintenance_error_when_there_was_none(store: seglog.Store) -> None:
    store.create_topic("t")
    assert store.describe("t").last_maintenance_error is None
