"""Damage on disk that the CRC cannot show (issue 9): what a read returns is
exactly what was written at those offsets, or CorruptRecordError naming the
file and position; an open never trusts a garbage swap or overlapping segments,
never panics on offsets near the i64 limit, recovery never cuts valid data, and
truncation leaves no stale timestamps behind."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

import seglog

TOPIC = "dmg"
MARKER = ".kafka_cleanshutdown"


def write(path: Path, n: int = 100, config: dict[str, int] | None = None) -> list[Path]:
    """``n`` records, one batch each (timestamps 1000 + 10 i), over several
    segments; closed cleanly. Returns the segment files."""
    with seglog.open(path) as store:
        store.create_topic(TOPIC, 1, config or {"segment.bytes": 1200, "index.interval.bytes": 100})
        for i in range(n):
            store.append(TOPIC, 0, [(b"k%d" % i, b"value-%d" % i, [], 1000 + 10 * i)])
    logs = sorted((path / f"{TOPIC}-0").glob("*.log"))
    assert len(logs) >= 3 or n < 30 or config is not None
    return logs


def batches_of(data: bytes) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of each batch in a `.log`."""
    out = []
    pos = 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, length + 12, base))
        pos += length + 12
    return out


def lookup(store: seglog.Store, offset: int) -> tuple[int, bytes | None, bytes | None, int]:
    got = store.read(TOPIC, 0, offset, max_bytes=1, max_records=1)
    assert got, f"offset {offset} is below the log end and must be read"
    r = got[0]
    return r.offset, r.key, r.value, r.timestamp


def expected(i: int) -> tuple[int, bytes, bytes, int]:
    return i, b"k%d" % i, b"value-%d" % i, 1000 + 10 * i


def exact_or_corrupt(store: seglog.Store, n: int) -> dict[int, str]:
    """Reads every offset: it holds what was written, or the read raises
    CorruptRecordError. Returns the offsets that raised, with the messages."""
    bad = {}
    for i in range(n):
        try:
            assert lookup(store, i) == expected(i), f"offset {i} read back wrong"
        except seglog.CorruptRecordError as e:
            bad[i] = str(e)
    # Reads of many batches at once agree.
    offset = 0
    while offset < n:
        try:
            got = store.read(TOPIC, 0, offset, max_bytes=1 << 20)
        except seglog.CorruptRecordError:
            offset += 1
            continue
        assert got
        for r in got:
            assert (r.offset, r.key, r.value, r.timestamp) == expected(r.offset)
        offset = got[-1].offset + 1
    return bad


def test_recovery_with_a_smaller_index_keeps_every_record(tmp_path: Path) -> None:
    write(tmp_path, config={"segment.bytes": 1 << 20, "index.interval.bytes": 4096})
    with seglog.open(tmp_path) as store:
        store.alter_topic_config(TOPIC, {"index.interval.bytes": 0, "segment.index.bytes": 16})
    (tmp_path / MARKER).unlink()
    with seglog.open(tmp_path) as store:
        assert not store.clean_shutdown
        assert store.recovery[1] == 0, "nothing valid is cut"
        assert store.offsets(TOPIC, 0) == (0, 100)
        assert exact_or_corrupt(store, 100) == {}
        # The log goes on, rolling once the index is full.
        assert store.append(TOPIC, 0, [(b"k100", b"value-100", [], 2000)]) == (100, 100)
        assert lookup(store, 100) == (100, b"k100", b"value-100", 2000)


@pytest.mark.parametrize(
    ("field", "at", "xor"),
    [
        ("baseOffset", 7, 0x40),  # 0-based offsets relabelled 64 up
        ("baseOffset", 0, 0x04),  # 288230376151711744 up
        ("batchLength", 11, 0x01),
        ("batchLength", 9, 0x10),
        ("magic", 16, 0x01),
    ],
)
@pytest.mark.parametrize("marker", [True, False])
def test_a_flipped_bit_in_a_sealed_segment_raises_corrupt(
    tmp_path: Path, field: str, at: int, xor: int, marker: bool
) -> None:
    logs = write(tmp_path)
    first = logs[0]
    data = bytearray(first.read_bytes())
    batches = batches_of(bytes(data))
    pos, _, base = batches[2]
    data[pos + at] ^= xor
    first.write_bytes(bytes(data))
    if not marker:
        (tmp_path / MARKER).unlink()
    with seglog.open(tmp_path) as store:
        bad = exact_or_corrupt(store, 100)
        assert base in bad, f"{field}: the damaged batch's record must not read as anything"
        assert first.name in bad[base] and "position" in bad[base], bad[base]
        next_base = int(logs[1].name[:20])
        assert all(o < next_base for o in bad), "only the damaged segment is affected"


@pytest.mark.parametrize("how", ["truncate", "zero"])
def test_a_sealed_segment_cut_short_raises_corrupt_rather_than_skipping(tmp_path: Path, how: str) -> None:
    logs = write(tmp_path)
    first = logs[0]
    data = first.read_bytes()
    pos, _, lost = batches_of(data)[-3]
    if how == "truncate":
        first.write_bytes(data[:pos])
    else:
        first.write_bytes(data[:pos] + bytes(len(data) - pos))
    with seglog.open(tmp_path) as store:
        bad = exact_or_corrupt(store, 100)
        assert sorted(bad) == list(range(lost, int(logs[1].name[:20])))
        assert first.name in bad[lost] and f"position {pos}" in bad[lost], bad[lost]


def test_a_corrupt_timeindex_gives_right_offset_for_time_answers(tmp_path: Path) -> None:
    logs = write(tmp_path)
    for log in logs[:-1]:
        ti = log.with_suffix(".timeindex")
        data = bytearray(ti.read_bytes())
        assert len(data) >= 24
        for i in range(len(data) // 12 - 1):
            ts, rel = struct.unpack_from(">qi", data, i * 12)
            struct.pack_into(">qi", data, i * 12, ts - 25, rel + 3)
        ti.write_bytes(bytes(data))
    with seglog.open(tmp_path) as store:
        for i in range(100):
            assert store.offset_for_time(TOPIC, 0, 1000 + 10 * i) == (i, 1000 + 10 * i)
            assert store.offset_for_time(TOPIC, 0, 1000 + 10 * i - 4) == (i, 1000 + 10 * i)


def test_a_garbage_swap_does_not_replace_an_intact_segment(tmp_path: Path) -> None:
    logs = write(tmp_path)
    swap = logs[0].with_name(logs[0].name + ".swap")
    swap.write_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00" + bytes(range(256)) * 3)
    with seglog.open(tmp_path) as store:
        assert not swap.exists()
        assert store.offsets(TOPIC, 0) == (0, 100)
        assert exact_or_corrupt(store, 100) == {}


def test_a_segment_renamed_to_an_overlapping_base_is_refused(tmp_path: Path) -> None:
    logs = write(tmp_path)
    base = int(logs[1].name[:20])
    renamed = logs[1].with_name(f"{base - 3:020d}.log")
    logs[1].rename(renamed)
    with pytest.raises(seglog.CorruptRecordError) as e:
        seglog.open(tmp_path)
    assert logs[0].name in str(e.value) and renamed.name in str(e.value)


def test_offsets_near_the_limit_are_refused_not_a_panic(tmp_path: Path) -> None:
    write(tmp_path, n=3)
    part = tmp_path / f"{TOPIC}-0"
    big = part / f"{2**63 - 1:020d}.log"
    big.write_bytes((part / f"{0:020d}.log").read_bytes())
    with pytest.raises(seglog.CorruptRecordError, match=big.name):
        seglog.open(tmp_path)
    big.unlink()
    # An empty partition whose log start is i64::MAX.
    for f in part.iterdir():
        if f.suffix in (".log", ".index", ".timeindex"):
            f.unlink()
    (tmp_path / "log-start-offset-checkpoint").write_text(f"0\n1\n{TOPIC} 0 {2**63 - 1}\n")
    with pytest.raises(OSError, match=str(2**63 - 1)):
        seglog.open(tmp_path)


def test_truncation_forgets_the_timestamps_it_cut(tmp_path: Path) -> None:
    """After truncate_to, a segment's time retention goes by the records it kept,
    not by the (newer) ones that were cut away."""
    now = int(time.time() * 1000)
    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1, {"retention.ms": 60_000, "file.delete.delay.ms": 0})
        for _ in range(6):
            store.append(TOPIC, 0, [(None, b"hour old", [], now - 3_600_000)])
        for _ in range(3):
            store.append(TOPIC, 0, [(None, b"tomorrow", [], now + 86_400_000)])
        store.truncate_to(TOPIC, 0, 6)
        # The next append rolls (segment.ms): the segment is sealed with what it kept.
        store.alter_topic_config(TOPIC, {"segment.ms": 60_000})
        assert store.append(TOPIC, 0, [(None, b"now", [], now)]) == (6, 6)
        assert store.describe(TOPIC).partitions[0].segment_count == 2
        store.run_maintenance()
        assert store.offsets(TOPIC, 0) == (6, 7), "the hour-old segment is past retention"
        assert [r.value for r in store.read(TOPIC, 0, 6)] == [b"now"]


def test_a_damaged_last_batch_is_cut_even_at_a_clean_open(tmp_path: Path) -> None:
    """The log end is never taken from a header the CRC rejects: a clean open
    CRC-checks the active segment's last batch and cuts it if damaged (a header
    field inside the CRC, lastOffsetDelta, would otherwise set the log end)."""
    logs = write(tmp_path, n=5)
    data = bytearray(logs[-1].read_bytes())
    pos, _, base = batches_of(bytes(data))[-1]
    struct.pack_into(">i", data, pos + 23, 1 << 20)  # lastOffsetDelta
    logs[-1].write_bytes(bytes(data))
    with seglog.open(tmp_path) as store:
        assert store.clean_shutdown
        assert store.recovery[1] > 0, "the cut is reported"
        assert store.offsets(TOPIC, 0) == (0, base)
        assert exact_or_corrupt(store, base) == {}
        assert store.append(TOPIC, 0, [(b"k4", b"again", [], 5)]) == (base, base)


# -- CRCs checked once per process (a batch read again is not checked again) --------------------


def flip_value_byte(log: Path, batch: int = 0) -> None:
    """Flips a byte inside a batch's records (covered by the CRC only)."""
    data = bytearray(log.read_bytes())
    pos, size, _ = batches_of(bytes(data))[batch]
    data[pos + size - 3] ^= 0x01
    with open(log, "r+b") as f:
        f.seek(pos + size - 3)
        f.write(bytes(data[pos + size - 3 : pos + size - 2]))


def test_a_byte_flipped_in_a_sealed_segment_is_caught_on_its_first_read_in_a_process(tmp_path: Path) -> None:
    logs = write(tmp_path)
    with seglog.open(tmp_path) as store:
        assert lookup(store, 0) == expected(0)  # checked and recorded in that process
    flip_value_byte(logs[0])
    with seglog.open(tmp_path) as store:
        with pytest.raises(seglog.CorruptRecordError):
            lookup(store, 0)
        with pytest.raises(seglog.CorruptRecordError):
            store.read(TOPIC, 0, 0)
        consumer = seglog.Consumer(store, TOPIC, auto_offset_reset="earliest", consumer_timeout_ms=0)
        with pytest.raises(seglog.CorruptRecordError):
            consumer.poll_arrow()
        consumer.close()


def test_bytes_written_again_after_a_truncation_are_checked_again(tmp_path: Path) -> None:
    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1)
        store.append(TOPIC, 0, [(b"k0", b"first-0")])
        store.append(TOPIC, 0, [(b"k1", b"first-1")])
        assert [r.value for r in store.read(TOPIC, 0, 0)] == [b"first-0", b"first-1"]
        store.truncate_to(TOPIC, 0, 1)
        # Same sizes at the same positions as the batch cut off.
        store.append(TOPIC, 0, [(b"k1", b"again-1")])
        assert [r.value for r in store.read(TOPIC, 0, 0)] == [b"first-0", b"again-1"]
        assert store.read(TOPIC, 0, 1, max_records=1)[0].value == b"again-1"
        store.truncate_to(TOPIC, 0, 1)
        store.append(TOPIC, 0, [(b"k1", b"third-1")])
        log = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))[0]
        flip_value_byte(log, batch=1)
        assert lookup(store, 0)[2] == b"first-0"
        with pytest.raises(seglog.CorruptRecordError):
            store.read(TOPIC, 0, 1, max_records=1)


def test_reads_after_compaction_and_retention_see_the_new_segments(tmp_path: Path) -> None:
    with seglog.open(tmp_path) as store:
        store.create_topic(
            TOPIC,
            1,
            {"cleanup.policy": "compact", "segment.bytes": 300, "min.cleanable.dirty.ratio": 0.01},
        )
        for i in range(40):
            store.append(TOPIC, 0, [(b"k%d" % (i % 4), b"v%d" % i)])
        before = [(r.offset, r.value) for r in store.read(TOPIC, 0, 0, max_bytes=1 << 20)]
        assert before[0] == (0, b"v0")
        store.clean_topic(TOPIC)
        seen = {}
        offset = 0
        while offset < 40:
            got, offset = store._native.read_next(TOPIC, 0, offset, 1 << 20)
            seen.update({r.key: r.value for r in got})
        assert seen == {b"k%d" % k: b"v%d" % (36 + k) for k in range(4)}
        assert all(r.offset >= 0 for r in store.read(TOPIC, 0, 0))
    with seglog.open(tmp_path) as store:
        store.create_topic("ret", 1, {"segment.bytes": 300, "retention.bytes": 300})
        for i in range(40):
            store.append("ret", 0, [(b"k", b"v%d" % i)])
        assert store.read("ret", 0, 0, max_records=1)[0].value == b"v0"
        store.run_maintenance("ret")
        start = store.offsets("ret", 0)[0]
        assert start > 0
        with pytest.raises(seglog.OffsetOutOfRangeError):
            store.read("ret", 0, 0, max_records=1)
        assert store.read("ret", 0, start, max_records=1)[0].value == b"v%d" % start
