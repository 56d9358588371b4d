"""Property tests (hypothesis): round trips through the disk, crash recovery of
a damaged last segment, damage anywhere on disk, and the batch decoder on garbage."""

from __future__ import annotations

import shutil
import struct
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import seglog

with warnings.catch_warnings():
    # Importing the `kafka` package imports its admin client, which calls a
    # deprecated importlib.resources function (pytest runs with warnings as errors).
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from kafka.record.util import calc_crc32c

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC = "prop"
HEADER_LEN = 61
LOG_OVERHEAD = 12
SETTINGS = settings(
    max_examples=75,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

headers_st = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=12)), max_size=3)
record_st = st.tuples(
    st.none() | st.binary(max_size=24),  # key
    st.none() | st.binary(max_size=64),  # value (None = tombstone, b"" = empty)
    headers_st,
    st.integers(min_value=0, max_value=4_102_444_800_000),  # timestamp, up to 2100
)

Expected = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]


def expected_of(records: list[tuple[Any, ...]]) -> list[Expected]:
    return [(i, ts, k, v, tuple(h)) for i, (k, v, h, ts) in enumerate(records)]


def as_tuple(r: Any) -> Expected:
    return (r.offset, r.timestamp, r.key, r.value, tuple(r.headers))


def read_all(store: seglog.Store, start: int = 0, max_bytes: int = 1 << 20) -> list[Expected]:
    out: list[Expected] = []
    offset = start
    while True:
        got = store.read(TOPIC, 0, offset, max_bytes)
        if not got:
            return out
        assert got[0].offset == offset, "a read must start at the offset asked for"
        out.extend(as_tuple(r) for r in got)
        offset = got[-1].offset + 1


def append_chunks(
    store: seglog.Store,
    records: list[tuple[Any, ...]],
    sizes: list[int],
    codecs: list[str],
    cycle: bool = False,
) -> None:
    """Appends ``records`` in calls of ``sizes`` records; then the rest in one
    last call, or (``cycle``) in calls of ``sizes`` again."""
    i = 0
    calls = 0
    while i < len(records):
        if calls < len(sizes) or (cycle and sizes):
            n = sizes[calls % len(sizes)]
        else:
            n = len(records) - i
        n = max(1, min(n, len(records) - i))
        codec = codecs[calls % len(codecs)]
        assert store.append(TOPIC, 0, records[i : i + n], compression_type=codec) == (i, i + n - 1)
        i += n
        calls += 1


def batches_of(data: bytes) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of each whole batch in a `.log`."""
    out = []
    pos = 0
    while pos + HEADER_LEN <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        size = length + LOG_OVERHEAD
        if pos + size > len(data):
            break
        out.append((pos, size, base, base + delta))
        pos += size
    assert pos == len(data), "a store closed cleanly holds whole batches only"
    return out


# --------------------------------------------------------------------------- round trip


@SETTINGS
@given(
    records=st.lists(record_st, min_size=1, max_size=60),
    sizes=st.lists(st.integers(1, 15), max_size=12),
    codecs=st.lists(st.sampled_from(CODECS), min_size=1, max_size=6),
    segment_bytes=st.integers(150, 3000),
    max_bytes=st.sampled_from([1, 200, 1 << 20]),
)
def test_records_round_trip_through_close_and_reopen(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[Any, ...]],
    sizes: list[int],
    codecs: list[str],
    segment_bytes: int,
    max_bytes: int,
) -> None:
    path = tmp_path_factory.mktemp("roundtrip")
    expected = expected_of(records)
    with seglog.open(path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": segment_bytes, "index.interval.bytes": 64})
        append_chunks(store, records, sizes, codecs)
        assert read_all(store) == expected
    with seglog.open(path) as store:
        assert store.clean_shutdown
        assert store.offsets(TOPIC, 0) == (0, len(records))
        assert read_all(store, 0, max_bytes) == expected
        for k in range(len(records)):
            got = store.read(TOPIC, 0, k, max_bytes)
            assert got, f"nothing read at offset {k}"
            assert [as_tuple(r) for r in got] == expected[k : k + len(got)]
        assert store.read(TOPIC, 0, len(records)) == []
        with pytest.raises(seglog.OffsetOutOfRangeError):
            store.read(TOPIC, 0, len(records) + 1)
    # Segments roll at segment.bytes: each holds at most that much, unless one batch.
    logs = sorted((path / f"{TOPIC}-0").glob("*.log"))
    for log in logs:
        data = log.read_bytes()
        assert len(data) <= segment_bytes or len(batches_of(data)) == 1
    assert [int(log.name[:20]) for log in logs] == [batches_of(log.read_bytes())[0][2] for log in logs]


# --------------------------------------------------------------------------- crash recovery


@st.composite
def damage_st(draw: st.DrawFn, size: int) -> tuple[str, int, int]:
    if draw(st.booleans()):
        return ("truncate", draw(st.integers(0, size)), 0)
    return ("flip", draw(st.integers(0, size - 1)), draw(st.integers(1, 255)))


@SETTINGS
@given(
    # >= 16 records in batches of <= 2, each >= 68 bytes: > 500 bytes, so the
    # log always spans several segments.
    records=st.lists(record_st, min_size=16, max_size=50),
    sizes=st.lists(st.integers(1, 2), min_size=1, max_size=10),
    codecs=st.lists(st.sampled_from(CODECS), min_size=1, max_size=6),
    segment_bytes=st.integers(150, 500),
    data=st.data(),
)
def test_recovery_after_a_damaged_last_segment_keeps_exactly_the_intact_prefix(
    tmp_path_factory: pytest.TempPathFactory,
    records: list[tuple[Any, ...]],
    sizes: list[int],
    codecs: list[str],
    segment_bytes: int,
    data: st.DataObject,
) -> None:
    path = tmp_path_factory.mktemp("crash")
    expected = expected_of(records)
    with seglog.open(path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": segment_bytes, "index.interval.bytes": 100})
        append_chunks(store, records, sizes, codecs, cycle=True)

    part = path / f"{TOPIC}-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 2
    last = logs[-1]
    original = last.read_bytes()
    batches = batches_of(original)
    kind, pos, xor = data.draw(damage_st(len(original)), label="damage")

    # What must survive: every batch wholly before the damage; the damaged batch
    # only if the flipped byte is its partitionLeaderEpoch (outside the CRC and
    # not part of any record: Kafka keeps such a batch too).
    if kind == "truncate":
        with last.open("r+b") as f:
            f.truncate(pos)
        intact = [b for b in batches if b[0] + b[1] <= pos]
        allowed_ends = [intact[-1][3] + 1 if intact else int(last.name[:20])]
    else:
        damaged = bytearray(original)
        damaged[pos] ^= xor
        last.write_bytes(bytes(damaged))
        hit = next(i for i, b in enumerate(batches) if b[0] <= pos < b[0] + b[1])
        field = pos - batches[hit][0]
        # baseOffset lies outside the CRC: recovery catches any flip there by
        # requiring each batch to start where the previous one ended.
        before = batches[:hit]
        allowed_ends = [before[-1][3] + 1 if before else int(last.name[:20])]
        if 12 <= field < 16:
            allowed_ends.append(len(records))
    (path / ".kafka_cleanshutdown").unlink()

    with seglog.open(path) as store:
        assert not store.clean_shutdown
        got = read_all(store)
        end = len(got)
        assert got == expected[:end], "recovery returned a record that differs from what was written"
        assert end in allowed_ends, f"kept {end} records, expected one of {allowed_ends}"
        assert store.offsets(TOPIC, 0) == (0, end)
        kept_bytes = sum(b[1] for b in batches if b[3] < end)
        assert last.stat().st_size == kept_bytes
        assert store.recovery[1] == (pos if kind == "truncate" else len(original)) - kept_bytes
        # The store goes on from the log end.
        extra = [(b"after", b"crash", [("h", None)], 42), (None, None, [], 43)]
        assert store.append(TOPIC, 0, extra, compression_type=codecs[0]) == (end, end + 1)
        want = expected[:end] + [(end + i, ts, k, v, tuple(h)) for i, (k, v, h, ts) in enumerate(extra)]
        assert read_all(store) == want
    with seglog.open(path) as store:
        assert store.clean_shutdown
        assert read_all(store) == want


@pytest.mark.parametrize("xor", [0x80, 0x01 << 8])
def test_recovery_rejects_a_base_offset_moved_up(tmp_path: Path, xor: int) -> None:
    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": 400})
        for i in range(12):
            store.append(TOPIC, 0, [(b"k%d" % i, b"v" * 40, [], 1000 + i)])
    last = sorted((tmp_path / f"{TOPIC}-0").glob("*.log"))[-1]
    data = bytearray(last.read_bytes())
    pos, _, base, _ = batches_of(bytes(data))[-1]
    struct.pack_into(">q", data, pos, base ^ xor)  # e.g. offset 11 -> 139: a "gap"
    last.write_bytes(bytes(data))
    (tmp_path / ".kafka_cleanshutdown").unlink()
    with seglog.open(tmp_path) as store:
        got = read_all(store)
        assert [r[0] for r in got] == list(range(len(got)))
        assert store.offsets(TOPIC, 0) == (0, base)


# --------------------------------------------------------------------------- decoder on garbage


def decode_or_corrupt(data: bytes) -> list[Any] | None:
    """decode_batches must return records or raise CorruptRecordError; anything
    else (another exception, a Rust panic, a crash) fails the test."""
    try:
        records = seglog.decode_batches(data)
    except seglog.CorruptRecordError:
        return None
    assert isinstance(records, list)
    for r in records:
        assert isinstance(r.offset, int) and isinstance(r.timestamp, int)
        assert r.key is None or isinstance(r.key, bytes)
        assert r.value is None or isinstance(r.value, bytes)
    return records


@SETTINGS
@given(st.binary(max_size=400))
def test_decode_batches_on_random_bytes(data: bytes) -> None:
    decode_or_corrupt(data)


def with_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    return bytes(buf)


@SETTINGS
@given(
    attributes=st.integers(-(1 << 15), (1 << 15) - 1),
    last_offset_delta=st.integers(-(1 << 31), (1 << 31) - 1) | st.integers(-2, 8),
    records_count=st.integers(-(1 << 31), (1 << 31) - 1) | st.integers(-2, 8),
    timestamps=st.tuples(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-(1 << 63), (1 << 63) - 1)),
    body=st.binary(max_size=300),
)
# A negative records count in a batch whose offsets look contiguous (once a panic).
@example(attributes=0, last_offset_delta=-2, records_count=-1, timestamps=(0, 0), body=b"\x00" * 8)
def test_decode_batches_on_garbage_with_a_valid_crc(
    attributes: int, last_offset_delta: int, records_count: int, timestamps: tuple[int, int], body: bytes
) -> None:
    """A well-formed header with a correct CRC over garbage: the decoder gets past
    the CRC into decompression and record parsing."""
    buf = bytearray(HEADER_LEN) + body
    struct.pack_into(
        ">qiibIhiqqqhii",
        buf,
        0,
        7,
        len(buf) - LOG_OVERHEAD,
        0,
        2,
        0,
        attributes,
        last_offset_delta,
        timestamps[0],
        timestamps[1],
        -1,
        -1,
        -1,
        records_count,
    )
    decode_or_corrupt(with_crc(buf))


@SETTINGS
@given(
    records=st.lists(record_st, min_size=1, max_size=8),
    codec=st.sampled_from(CODECS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10_000),
    fix_crc=st.booleans(),
)
def test_decode_batches_on_mutated_real_batches(
    records: list[tuple[Any, ...]],
    codec: str,
    edits: list[tuple[int, int]],
    cut: int | None,
    fix_crc: bool,
) -> None:
    builder = DefaultRecordBatchBuilder(2, CODEC_ID[codec], False, -1, -1, -1, 1 << 20)
    for delta, (key, value, headers, ts) in enumerate(records):
        builder.append(delta, ts, key, value, headers)
    good = bytes(builder.build())
    assert [as_tuple(r) for r in seglog.decode_batches(good)] == expected_of(records)
    buf = bytearray(good)
    for pos, xor in edits:
        buf[pos % len(buf)] ^= xor
    if cut is not None:
        del buf[cut % (len(buf) + 1) :]
    if fix_crc and len(buf) >= HEADER_LEN:
        buf = bytearray(with_crc(buf))
    decode_or_corrupt(bytes(buf))


# --------------------------------------------------------------------------- damage anywhere on disk

DAMAGE_RECORDS = 48
DAMAGE_COUNTS: dict[str, int] = {}


def damage_record(j: int) -> tuple[bytes, bytes, list[Any], int]:
    return (b"key-%d" % j, b"value-%d" % j * (j % 4 + 1), [], 1000 + 10 * j)


def damaged_store_source(root: Path) -> tuple[Path, list[list[int]]]:
    """A store of DAMAGE_RECORDS records (timestamps 1000 + 10 i) in batches of
    1 to 3, codecs mixed, over several segments with indexes; closed cleanly.
    Returns it and the base offsets of each segment's batches."""
    with seglog.open(root) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": 700, "index.interval.bytes": 60})
        i = 0
        while i < DAMAGE_RECORDS:
            n = min(i % 3 + 1, DAMAGE_RECORDS - i)
            recs = [damage_record(j) for j in range(i, i + n)]
            store.append(TOPIC, 0, recs, compression_type=CODECS[i % len(CODECS)])
            i += n
    logs = sorted((root / f"{TOPIC}-0").glob("*.log"))
    assert len(logs) >= 3
    return root, [[b[2] for b in batches_of(p.read_bytes())] for p in logs]


def damage_expected(i: int) -> Expected:
    return (i, 1000 + 10 * i, b"key-%d" % i, b"value-%d" % i * (i % 4 + 1), ())


def test_damage_anywhere_reads_exact_records_or_raises_corrupt(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Byte flips, truncations and zeroed ranges in any segment file or index,
    with and without the clean-shutdown marker: every read returns exactly the
    records written at their offsets or raises CorruptRecordError. Only damage
    to the active segment's log may shorten the log (recovery cuts there, at a
    batch boundary); nothing else changes which offsets exist."""
    source, batch_bases = damaged_store_source(tmp_path_factory.mktemp("pristine"))
    part = source / f"{TOPIC}-0"
    targets = sorted(p.name for p in part.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    last_log = sorted(p.name for p in part.glob("*.log"))[-1]
    counts = DAMAGE_COUNTS
    counts.clear()

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        target=st.sampled_from(targets),
        kind=st.sampled_from(["flip", "truncate", "zero"]),
        where=st.floats(0, 1, exclude_max=True),
        length=st.integers(1, 300),
        xor=st.integers(1, 255),
        marker=st.booleans(),
    )
    def trial(target: str, kind: str, where: float, length: int, xor: int, marker: bool) -> None:
        root = tmp_path_factory.mktemp("damaged")
        shutil.copytree(source, root, dirs_exist_ok=True)
        f = root / f"{TOPIC}-0" / target
        data = bytearray(f.read_bytes())
        if not data:
            return
        pos = int(where * len(data))
        if kind == "flip":
            data[pos] ^= xor
        elif kind == "truncate":
            del data[pos:]
        else:
            data[pos : pos + length] = bytes(len(data[pos : pos + length]))
        f.write_bytes(bytes(data))
        if not marker:
            (root / ".kafka_cleanshutdown").unlink()
        try:
            store = seglog.open(root)
        except seglog.CorruptRecordError:
            counts["open refused"] = counts.get("open refused", 0) + 1
            return
        with store:
            start, end = store.offsets(TOPIC, 0)
            assert start == 0
            if end != DAMAGE_RECORDS:
                assert target == last_log, f"{kind} at {pos} of {target} cut the log to {end}"
                assert end in batch_bases[-1], f"cut at {end}, not at a batch boundary"
            raised = 0
            for o in range(end):
                try:
                    got = store.read(TOPIC, 0, o, max_bytes=1, max_records=1)
                except seglog.CorruptRecordError:
                    raised += 1
                    continue
                assert got and as_tuple(got[0]) == damage_expected(o), f"offset {o} read back wrong"
            o = 0
            while o < end:
                try:
                    got = store.read(TOPIC, 0, o, max_bytes=300)
                except seglog.CorruptRecordError:
                    o += 1
                    continue
                assert got and got[0].offset == o
                assert [as_tuple(r) for r in got] == [damage_expected(r.offset) for r in got]
                assert [r.offset for r in got] == list(range(o, o + len(got)))
                o += len(got)
            for o in range(0, end, 7):
                try:
                    assert store.offset_for_time(TOPIC, 0, 1000 + 10 * o - 5) == (o, 1000 + 10 * o)
                except seglog.CorruptRecordError:
                    raised += 1
        outcome = "raised" if raised else "exact"
        if end != DAMAGE_RECORDS:
            outcome += ", log cut"
        counts[outcome] = counts.get(outcome, 0) + 1
        counts["reads raised"] = counts.get("reads raised", 0) + raised

    trial()
    print(f"\ndamage trials: {counts}")
    assert counts.get("exact", 0) > 0 and counts.get("raised", 0) > 0, counts
