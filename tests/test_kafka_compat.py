"""Compatibility with an independent implementation of Kafka's formats (kafka-python).

Both directions, for every codec: kafka-python parses the segment files seglog
writes, and seglog reads batches kafka-python built (from a `.log` file it
recovers, and through ``append_raw``). Also the `.index`/`.timeindex` layout and
Kafka's indexing rule, and the murmur2 partitioner.
"""

from __future__ import annotations

import random
import struct
import warnings
from pathlib import Path
from typing import Any

import pytest

import seglog

# Importing the `kafka` package imports its admin client, which calls a
# deprecated importlib.resources function (pytest runs with warnings as errors).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import DefaultPartitioner
    from kafka.partitioner.default import murmur2 as kafka_murmur2
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TOPIC = "compat"
LOG_OVERHEAD = 12  # baseOffset + batchLength
INDEX_INTERVAL = 256
SEGMENT_BYTES = 4096

# (offset, timestamp, key, value, headers) -- how a record is compared.
Expected = tuple[int, int, "bytes | None", "bytes | None", tuple[tuple[str, "bytes | None"], ...]]


# --------------------------------------------------------------------------- helpers


def make_records(rng: random.Random, n: int, base_ts: int = 1_700_000_000_000) -> list[tuple[Any, ...]]:
    """Records of every shape: null keys, tombstones, empty keys/values, headers
    with None values and non-ASCII keys, compressible and random values, and
    timestamps that sometimes go backwards (so the time index has work to do)."""
    out: list[tuple[Any, ...]] = []
    for i in range(n):
        shape = i % 8
        ts = base_ts + i * 10 + rng.randint(-25, 25)
        if shape == 0:
            key, value = None, b"value-%d " % i * rng.randint(1, 12)
        elif shape == 1:
            key, value = b"key-%d" % i, None  # tombstone
        elif shape == 2:
            key, value = b"key-%d" % i, b""
        elif shape == 3:
            key, value = b"", b""
        elif shape == 4:
            key, value = None, None
        elif shape == 5:
            key, value = rng.randbytes(rng.randint(1, 40)), rng.randbytes(rng.randint(0, 120))
        else:
            key, value = b"k%d" % (i % 5), bytes([i % 251]) * rng.randint(1, 200)
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("trace", b"t-%d" % i), ("none", None), ("", b""), ("ünï", rng.randbytes(3))]
        elif i % 3 == 1:
            headers = [("only-null", None)]
        out.append((key, value, headers, ts))
    return out


def expected_of(records: list[tuple[Any, ...]], first_offset: int = 0) -> list[Expected]:
    return [
        (first_offset + i, ts, key, value, tuple((k, v) for k, v in headers))
        for i, (key, value, headers, ts) in enumerate(records)
    ]


def as_tuple(r: Any) -> Expected:
    """A seglog ConsumerRecord or a kafka-python record, as a comparable tuple."""
    return (r.offset, r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))


def read_all(store: seglog.Store, topic: str, partition: int = 0, start: int = 0) -> list[Expected]:
    out: list[Expected] = []
    offset = start
    while True:
        batch = store.read(topic, partition, offset)
        if not batch:
            return out
        out.extend(as_tuple(r) for r in batch)
        offset = batch[-1].offset + 1


def append_in_calls(
    store: seglog.Store, topic: str, records: list[tuple[Any, ...]], rng: random.Random, codec: str
) -> None:
    i = 0
    while i < len(records):
        n = rng.randint(1, 5)
        first, last = store.append(topic, 0, records[i : i + n], compression_type=codec)
        assert (first, last) == (i, min(i + n, len(records)) - 1)
        i += n


def log_files(part_dir: Path) -> list[Path]:
    return sorted(part_dir.glob("*.log"))


def base_of(path: Path) -> int:
    return int(path.name.split(".")[0])


def parse_segment(path: Path) -> list[tuple[int, int, DefaultRecordBatch]]:
    """Every batch of a `.log` file as (position, size, kafka-python batch). Walks
    the file by batchLength and cross-checks kafka-python's own iteration."""
    data = path.read_bytes()
    out = []
    pos = 0
    while pos < len(data):
        assert len(data) - pos >= LOG_OVERHEAD, f"{path.name}: trailing garbage at {pos}"
        (length,) = struct.unpack_from(">i", data, pos + 8)
        size = length + LOG_OVERHEAD
        assert pos + size <= len(data), f"{path.name}: batch at {pos} runs past the end"
        out.append((pos, size, DefaultRecordBatch(data[pos : pos + size])))
        pos += size
    mr = MemoryRecords(data)
    n = 0
    while mr.has_next():
        batch = mr.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.base_offset == out[n][2].base_offset
        n += 1
    assert n == len(out)
    assert mr.valid_bytes() == len(data)
    return out


def kp_batch(records: list[tuple[Any, ...]], codec: str, base_offset: int = 0) -> bytes:
    """A RecordBatch v2 built by kafka-python (a producer's batch), with
    ``base_offset`` written into the header (outside the CRC, as a broker does)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=CODEC_ID[codec],
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for delta, (key, value, headers, ts) in enumerate(records):
        assert builder.append(delta, ts, key, value, list(headers)) is not None
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)
    batch = DefaultRecordBatch(bytes(buf))
    # kafka-python sends a batch uncompressed when compression does not pay off:
    # the test data must make it really use the codec under test.
    assert batch.compression_type == CODEC_ID[codec]
    assert batch.validate_crc()
    return bytes(buf)


def compressible(rng: random.Random, n: int, batch_no: int) -> list[tuple[Any, ...]]:
    recs = make_records(rng, n, base_ts=1_600_000_000_000 + batch_no * 1000)
    # Long repetitive values so every codec shrinks the batch (the first record
    # always has one; some later ones keep their null or empty value).
    return [
        (key, value if i % 4 == 1 or i % 8 == 3 else (value or b"") + b"payload-" * 20, headers, ts)
        for i, (key, value, headers, ts) in enumerate(recs)
    ]


def parse_index(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    assert len(data) % 8 == 0, f"{path.name}: {len(data)} bytes is not whole 8-byte entries"
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def parse_time_index(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    assert len(data) % 12 == 0, f"{path.name}: {len(data)} bytes is not whole 12-byte entries"
    return [struct.unpack_from(">qi", data, i) for i in range(0, len(data), 12)]


def kafka_indexes(
    base: int, batches: list[tuple[int, int, DefaultRecordBatch]], interval: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The offset and time index entries Kafka writes for these batches
    (LogSegment.append/recover, then the final time-index entry at close)."""
    offsets: list[tuple[int, int]] = []
    times: list[tuple[int, int]] = []
    max_ts, max_ts_offset = -1, base
    last_time_entry_ts = -1
    since = 0
    for pos, size, batch in batches:
        if batch.max_timestamp > max_ts:
            max_ts, max_ts_offset = batch.max_timestamp, batch.last_offset
        if since > interval:
            offsets.append((batch.last_offset - base, pos))
            if max_ts > last_time_entry_ts:
                times.append((max_ts, max_ts_offset - base))
                last_time_entry_ts = max_ts
            since = 0
        since += size
    if max_ts > last_time_entry_ts:
        times.append((max_ts, max_ts_offset - base))
    return offsets, times


def check_indexes(part_dir: Path, expected_records: list[Expected]) -> int:
    """Checks every segment's `.index`/`.timeindex` against its `.log`; returns
    the number of offset-index entries seen."""
    ts_by_offset = {rec[0]: rec[1] for rec in expected_records}
    total = 0
    for log in log_files(part_dir):
        base = base_of(log)
        batches = parse_segment(log)
        starts = {pos: batch for pos, _, batch in batches}
        index = parse_index(log.with_suffix(".index"))
        times = parse_time_index(log.with_suffix(".timeindex"))
        # Trimmed to its entries at close: no preallocated zero tail.
        assert log.with_suffix(".index").stat().st_size == len(index) * 8
        assert log.with_suffix(".timeindex").stat().st_size == len(times) * 12
        prev_rel, prev_pos = 0, 0
        for rel, pos in index:
            assert rel > prev_rel and pos > prev_pos, f"{log.name}: index not strictly increasing"
            prev_rel, prev_pos = rel, pos
            assert pos in starts, f"{log.name}: index entry ({rel}, {pos}) is not at a batch start"
            batch = starts[pos]
            assert batch.base_offset <= base + rel <= batch.last_offset
        prev_ts, prev_off = -1, 0
        for ts, rel in times:
            assert ts > prev_ts and rel >= prev_off, f"{log.name}: time index not increasing"
            prev_ts, prev_off = ts, rel
            # (T, O): T is the largest timestamp of the segment's records up to O.
            seg_ts = [t for o, t in ts_by_offset.items() if base <= o <= base + rel]
            assert seg_ts and max(seg_ts) == ts
        want_index, want_times = kafka_indexes(base, batches, INDEX_INTERVAL)
        assert index == want_index, f"{log.name}: offset index differs from Kafka's rule"
        assert times == want_times, f"{log.name}: time index differs from Kafka's rule"
        total += len(index)
    return total


def crash(store_path: Path, topic: str, drop_indexes: bool = True) -> None:
    """Make the next open run recovery, as after a crash."""
    (store_path / ".kafka_cleanshutdown").unlink()
    if drop_indexes:
        for f in (store_path / f"{topic}-0").iterdir():
            if f.suffix in (".index", ".timeindex"):
                f.unlink()


# --------------------------------------------------------------------------- seglog -> kafka-python


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_parses_every_batch_seglog_writes(store_path: Path, codec: str) -> None:
    rng = random.Random(f"parse-{codec}")
    records = make_records(rng, 300)
    store = seglog.open(store_path)
    store.create_topic(TOPIC, 1, {"segment.bytes": SEGMENT_BYTES, "index.interval.bytes": INDEX_INTERVAL})
    append_in_calls(store, TOPIC, records, rng, codec)
    assert store.offsets(TOPIC, 0) == (0, len(records))
    store.close()

    expected = expected_of(records)
    logs = log_files(store_path / f"{TOPIC}-0")
    assert len(logs) >= 3, "small segment.bytes must roll several segments"
    got: list[Expected] = []
    next_offset = 0
    for log in logs:
        assert base_of(log) == next_offset, f"{log.name} does not start where the previous ended"
        for _, _, batch in parse_segment(log):
            assert batch.magic == 2
            assert batch.validate_crc(), f"{log.name}: bad CRC at offset {batch.base_offset}"
            assert batch.base_offset == next_offset, "base offsets are not contiguous"
            assert batch.compression_type == CODEC_ID[codec]
            assert batch.timestamp_type == 0  # CreateTime
            assert not batch.is_transactional and not batch.is_control_batch
            assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
            recs = list(batch)
            assert len(recs) == batch.records_count == batch.last_offset_delta + 1
            assert [r.offset for r in recs] == list(range(batch.base_offset, batch.last_offset + 1))
            assert batch.first_timestamp == recs[0].timestamp
            assert batch.max_timestamp == max(r.timestamp for r in recs)
            got.extend(as_tuple(r) for r in recs)
            next_offset = batch.last_offset + 1
    assert next_offset == len(records)
    assert got == expected
    # The special shapes really were on disk.
    assert any(r[2] is None for r in got) and any(r[3] is None for r in got)
    assert any(r[3] == b"" for r in got) and any(("none", None) in r[4] for r in got)


@pytest.mark.parametrize("codec", CODECS)
def test_index_files_are_kafkas_layout_and_rule(store_path: Path, codec: str) -> None:
    rng = random.Random(f"index-{codec}")
    records = make_records(rng, 400)
    store = seglog.open(store_path)
    store.create_topic(TOPIC, 1, {"segment.bytes": SEGMENT_BYTES, "index.interval.bytes": INDEX_INTERVAL})
    append_in_calls(store, TOPIC, records, rng, codec)
    store.close()
    part = store_path / f"{TOPIC}-0"
    expected = expected_of(records)
    assert len(log_files(part)) >= 3
    entries = check_indexes(part, expected)
    assert entries >= 10, "index.interval.bytes=256 must give many index entries"

    # Recovery rebuilds the same indexes from the log alone.
    before = {log.name: log.read_bytes() for log in log_files(part)}
    crash(store_path, TOPIC)
    store = seglog.open(store_path)
    assert not store.clean_shutdown
    assert read_all(store, TOPIC) == expected
    # Lookups through the rebuilt time index: first record with timestamp >= t.
    for probe in rng.sample(expected, 25):
        target = probe[1]
        want = min((r for r in expected if r[1] >= target), key=lambda r: r[0])
        assert store.offset_for_time(TOPIC, 0, target) == (want[0], want[1])
    store.close()
    assert {log.name: log.read_bytes() for log in log_files(part)} == before
    assert check_indexes(part, expected) == entries


# --------------------------------------------------------------------------- kafka-python -> seglog


@pytest.mark.parametrize("codec", CODECS)
def test_seglog_recovers_a_log_of_kafka_python_batches(store_path: Path, codec: str) -> None:
    rng = random.Random(f"recover-{codec}")
    store = seglog.open(store_path)
    store.create_topic(TOPIC, 1, {"index.interval.bytes": INDEX_INTERVAL})
    store.close()

    data = bytearray()
    records: list[tuple[Any, ...]] = []
    for batch_no in range(30):
        recs = compressible(rng, rng.randint(1, 12), batch_no)
        data += kp_batch(recs, codec, base_offset=len(records))
        records.extend(recs)
    log = store_path / f"{TOPIC}-0" / "00000000000000000000.log"
    assert log.stat().st_size == 0
    log.write_bytes(bytes(data))
    crash(store_path, TOPIC)

    store = seglog.open(store_path)
    assert not store.clean_shutdown
    assert store.recovery[1] == 0, "nothing may be truncated from a valid log"
    assert store.offsets(TOPIC, 0) == (0, len(records))
    expected = expected_of(records)
    assert read_all(store, TOPIC) == expected
    # Reading from the middle of a batch starts at the asked offset.
    mid = len(records) // 2 + 1
    assert read_all(store, TOPIC, start=mid) == expected[mid:]
    # The recovered log takes new appends after the last kafka-python offset.
    assert store.append(
        TOPIC, 0, [(b"after", b"recovery", [], 1_800_000_000_000)], compression_type=codec
    ) == (
        len(records),
        len(records),
    )
    store.close()
    # seglog kept kafka-python's bytes as they were, and indexed them Kafka's way.
    assert log.read_bytes()[: len(data)] == bytes(data)
    check_indexes(
        store_path / f"{TOPIC}-0", [*expected, (len(records), 1_800_000_000_000, b"after", b"recovery", ())]
    )


@pytest.mark.parametrize("codec", CODECS)
def test_seglog_cuts_a_torn_kafka_python_batch(store_path: Path, codec: str) -> None:
    rng = random.Random(f"torn-{codec}")
    store = seglog.open(store_path)
    store.create_topic(TOPIC)
    store.close()
    good = [compressible(rng, 5, b) for b in range(4)]
    data = b"".join(kp_batch(recs, codec, base_offset=5 * b) for b, recs in enumerate(good))
    torn = kp_batch(compressible(rng, 5, 9), codec, base_offset=20)
    log = store_path / f"{TOPIC}-0" / "00000000000000000000.log"
    log.write_bytes(data + torn[: len(torn) - 3])
    crash(store_path, TOPIC)
    store = seglog.open(store_path)
    assert store.recovery[1] == len(torn) - 3
    assert store.offsets(TOPIC, 0) == (0, 20)
    assert read_all(store, TOPIC) == expected_of([r for recs in good for r in recs])
    store.close()
    assert log.read_bytes() == data


@pytest.mark.parametrize("codec", CODECS)
def test_append_raw_takes_kafka_python_batches(store, codec: str) -> None:
    rng = random.Random(f"raw-{codec}")
    store.create_topic(TOPIC)
    first = make_records(rng, 3)
    assert store.append(TOPIC, 0, first) == (0, 2)
    records = list(first)
    raws = []
    for batch_no in range(6):
        recs = compressible(rng, rng.randint(1, 10), batch_no)
        # A producer's base offset is 0; any other is reassigned too.
        raw = kp_batch(recs, codec, base_offset=0 if batch_no % 2 else 987_654)
        start = len(records)
        assert store.append_raw(TOPIC, 0, raw) == (start, start + len(recs) - 1)
        raws.append((start, raw))
        records.extend(recs)
    # Several batches in one call get contiguous offsets.
    two = [compressible(rng, 4, 7), compressible(rng, 3, 8)]
    start = len(records)
    both = kp_batch(two[0], codec) + kp_batch(two[1], codec)
    assert store.append_raw(TOPIC, 0, both) == (start, start + 6)
    records.extend(two[0] + two[1])

    expected = expected_of(records)
    assert read_all(store, TOPIC) == expected
    assert store.offsets(TOPIC, 0) == (0, len(records))
    for start, raw in raws:
        # Stored as the producer built it: only the base offset is assigned (and
        # the leader epoch, outside the CRC), as a Kafka broker does in place.
        stored = store.read_raw(TOPIC, 0, start)[: len(raw)]
        assert struct.unpack_from(">q", stored)[0] == start
        assert stored[16:] == raw[16:]
        batch = DefaultRecordBatch(stored)
        assert batch.validate_crc()
        assert [as_tuple(r) for r in batch] == expected[start : start + batch.records_count]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("where", ["crc-field", "attributes", "record-body", "last-byte"])
def test_append_raw_rejects_a_bad_crc_and_appends_nothing(store_path: Path, codec: str, where: str) -> None:
    rng = random.Random(f"bad-{codec}-{where}")
    store = seglog.open(store_path)
    store.create_topic(TOPIC)
    good = make_records(rng, 4)
    store.append(TOPIC, 0, good, compression_type=codec)
    before_read = read_all(store, TOPIC)
    before_size = store.describe(TOPIC).partitions[0].size_bytes

    raw = bytearray(kp_batch(compressible(rng, 6, 1), codec))
    pos = {"crc-field": 17, "attributes": 22, "record-body": 70, "last-byte": len(raw) - 1}[where]
    raw[pos] ^= 0x5A
    assert not DefaultRecordBatch(bytes(raw)).validate_crc()
    with pytest.raises(seglog.CorruptRecordError):
        store.append_raw(TOPIC, 0, bytes(raw))
    # A valid batch in front of the bad one is not appended either.
    valid = kp_batch(compressible(rng, 2, 2), codec)
    with pytest.raises(seglog.CorruptRecordError):
        store.append_raw(TOPIC, 0, valid + bytes(raw))

    assert store.offsets(TOPIC, 0) == (0, len(good))
    assert read_all(store, TOPIC) == before_read
    assert store.describe(TOPIC).partitions[0].size_bytes == before_size
    # The next good append gets the next offset.
    assert store.append_raw(TOPIC, 0, valid) == (len(good), len(good) + 1)
    store.close()
    total = sum(log.stat().st_size for log in log_files(store_path / f"{TOPIC}-0"))
    assert total == before_size + len(valid)


# --------------------------------------------------------------------------- partitioner


KAFKA_MURMUR2_VECTORS = [  # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


def test_murmur2_matches_kafka_python() -> None:
    for key, want in KAFKA_MURMUR2_VECTORS:
        assert seglog.murmur2(key) == want
    rng = random.Random("murmur2")
    keys = [b"", b"\x00", b"\xff" * 4, b"\x80\x81\x82"]
    keys += [rng.randbytes(rng.randint(0, 64)) for _ in range(3000)]
    for key in keys:
        h = seglog.murmur2(key)
        assert -(1 << 31) <= h < (1 << 31), "murmur2 is a signed 32-bit int, as in Java"
        assert h & 0xFFFFFFFF == kafka_murmur2(key), key


class _Cluster:
    """The bit of kafka-python's ClusterMetadata that DefaultPartitioner uses."""

    def __init__(self, topic: str, n: int) -> None:
        self._topic, self._n = topic, n

    def topics(self) -> set[str]:
        return {self._topic}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self._n))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self._n))


def test_partition_for_key_matches_kafka_pythons_default_partitioner(store) -> None:
    rng = random.Random("partitioner")
    keys = [b""] + [rng.randbytes(rng.randint(0, 40)) for _ in range(1500)]
    for n in (1, 2, 3, 7, 12, 50):
        topic = f"p{n}"
        store.create_topic(topic, n)
        cluster = _Cluster(topic, n)
        seen = set()
        for key in keys:
            want = DefaultPartitioner().partition(topic, key, key, None, None, cluster)
            assert want == (kafka_murmur2(key) & 0x7FFFFFFF) % n
            got = store.partition_for_key(topic, key)
            assert got == want, (n, key)
            seen.add(got)
        assert seen == set(range(n)), "1500 keys reach every partition"
