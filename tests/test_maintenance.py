"""Log maintenance: retention (delete) and compaction (compact), through the public API."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog


def read_all(store: seglog.Store, topic: str, partition: int = 0) -> list[seglog.ConsumerRecord]:
    out: list[seglog.ConsumerRecord] = []
    offset, end = store.offsets(topic, partition)
    # read() steps over batches a cleaning emptied: [] means no record is left.
    while offset < end and (records := store.read(topic, partition, offset)):
        out.extend(records)
        offset = records[-1].offset + 1
    return out


def leftovers(path: Path) -> list[str]:
    return [p.name for p in path.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]


def test_retention_by_time(store: seglog.Store, store_path: Path) -> None:
    store.create_topic("t", config={"segment.bytes": 1024, "retention.ms": 60_000, "file.delete.delay.ms": 0})
    now = int(time.time() * 1000)
    old = [(None, b"o" * 100, None, now - 3_600_000) for _ in range(40)]
    new = [(None, b"n" * 100, None, now) for _ in range(40)]
    for r in old + new:
        store.append("t", 0, [r])
    before = store.describe("t").partitions[0]
    report = store.run_maintenance()
    after = store.describe("t").partitions[0]
    assert report["deleted_segments"] > 0 and after.segment_count < before.segment_count
    assert 0 < after.log_start_offset <= 40, "only the hour-old records went"
    assert all(r.value == b"n" * 100 for r in read_all(store, "t")[40 - after.log_start_offset :])
    with pytest.raises(seglog.OffsetOutOfRangeError):
        store.read("t", 0, 0)
    assert leftovers(store_path) == [], "file.delete.delay.ms = 0: removed at once"
    ckpt = (store_path / "log-start-offset-checkpoint").read_text()
    assert f"t 0 {after.log_start_offset}\n" in ckpt


def test_retention_by_size_keeps_newest_and_delays_file_removal(
    store: seglog.Store, store_path: Path
) -> None:
    store.create_topic("t", config={"segment.bytes": 1024, "retention.bytes": 4096})
    for i in range(100):
        store.append("t", 0, [str(i).encode() * 20])
    store.run_maintenance()
    d = store.describe("t").partitions[0]
    assert d.size_bytes <= 4096 + 1024
    assert d.log_end_offset == 100 and d.log_start_offset > 50
    assert [int(r.value[: len(str(r.offset))]) for r in read_all(store, "t")][-1] == 99
    # file.delete.delay.ms (60 s by default): renamed, not yet removed.
    assert leftovers(store_path) and all(n.endswith(".deleted") for n in leftovers(store_path))


def test_reader_holding_a_deleted_segment_reads_on(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic(
            "t", config={"segment.bytes": 1024, "retention.bytes": 2048, "file.delete.delay.ms": 0}
        )
        for i in range(60):
            w.append("t", 0, [b"%05d" % i * 20])
        reader = seglog.open(store_path, read_only=True)
        first = reader.read("t", 0, 0)
        w.run_maintenance()
        assert not (store_path / "t-0" / "00000000000000000000.log").exists()
        # The reader still has the segment open: what it reads is intact.
        assert reader.read("t", 0, 0)[0].value == first[0].value == b"00000" * 20
        start, _ = reader.offsets("t", 0)  # it looks again and sees the new log start
        assert start > 0
        with pytest.raises(seglog.OffsetOutOfRangeError):
            reader.read("t", 0, 0)
        reader.close()


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_consumer_behind_the_log_start_is_reset_like_kafka(store: seglog.Store, reset: str) -> None:
    store.create_topic("t", config={"segment.bytes": 1024, "retention.bytes": 2048})
    for i in range(60):
        store.append("t", 0, [b"%05d" % i * 20])
    consumer = seglog.Consumer(store, auto_offset_reset=reset)
    consumer.assign([("t", 0)])
    consumer.seek(("t", 0), 0)
    store.run_maintenance()
    start, end = store.offsets("t", 0)
    if reset == "none":
        with pytest.raises(seglog.OffsetOutOfRangeError):
            consumer.poll(max_records=10)
        return
    consumer.poll(max_records=10)  # the out-of-range position is reset
    assert consumer.position(("t", 0)) == (start if reset == "earliest" else end)
    got = consumer.poll(max_records=1000)
    if reset == "earliest":
        assert next(r.offset for rs in got.values() for r in rs) == start
    else:
        assert got == {}


def test_compaction_through_the_store_and_cli_names(store: seglog.Store, store_path: Path) -> None:
    store.create_topic(
        "c", config={"cleanup.policy": "compact", "segment.bytes": 2048, "delete.retention.ms": 0}
    )
    for round_ in range(50):
        store.append("c", 0, [(f"k{k}".encode(), f"{round_}".encode()) for k in range(4)])
    with pytest.raises(seglog.InvalidRecordError, match="without key"):
        store.append("c", 0, [b"no key"])
    before = store.describe("c").partitions[0]
    report = store.clean_topic("c")
    after = store.describe("c").partitions[0]
    assert report["cleaned_partitions"] == 1 and report["records_removed"] > 100
    assert after.size_bytes < before.size_bytes / 2
    assert after.log_end_offset == before.log_end_offset == 200
    latest = {r.key: r.value for r in read_all(store, "c")}
    assert latest == {f"k{k}".encode(): b"49" for k in range(4)}
    assert leftovers(store_path) == [] or all(n.endswith(".deleted") for n in leftovers(store_path))
    ckpt = (store_path / "cleaner-offset-checkpoint").read_text().splitlines()
    assert ckpt[0] == "0" and any(line.startswith("c 0 ") for line in ckpt[2:])


def test_consumer_offsets_topic_is_compacted(store: seglog.Store) -> None:
    store.create_topic("t")
    store.append("t", 0, [b"x"] * 10)
    consumer = seglog.Consumer(
        store, "t", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
    )
    for i in range(300):
        consumer.seek(("t", 0), i % 10)
        consumer.commit()
    consumer.close()
    assert store.describe("__consumer_offsets").config["cleanup.policy"] == "compact"
    before = store.describe("__consumer_offsets").partitions[0]
    store.alter_topic_config("__consumer_offsets", {"segment.bytes": 1024})
    with seglog.Consumer(store, "t", group_id="roll", enable_auto_commit=False) as roll:
        roll.commit({("t", 0): 1})  # rolls the segment, so the old one can be cleaned
    store.clean_topic("__consumer_offsets")
    after = store.describe("__consumer_offsets").partitions[0]
    assert after.size_bytes < before.size_bytes
    again = seglog.Consumer(store, "t", group_id="g")
    assert again.committed(("t", 0)) == 299 % 10, "the latest commit survives compaction"
    again.close()


ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 12), st.binary(max_size=30)),
        st.tuples(st.just("delete"), st.integers(0, 12), st.none()),
        st.tuples(st.just("clean"), st.none(), st.none()),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, compression=st.sampled_from(["none", "gzip", "lz4", "zstd", "snappy"]))
def test_compaction_matches_a_model(
    tmp_path_factory: pytest.TempPathFactory, ops: list, compression: str
) -> None:
    path = tmp_path_factory.mktemp("compact")
    model: dict[bytes, bytes | None] = {}
    with seglog.open(path) as store:
        store.create_topic(
            "c",
            config={
                "cleanup.policy": "compact",
                "segment.bytes": 300,
                "segment.ms": 1000,
                "delete.retention.ms": 0,
                "min.cleanable.dirty.ratio": 0.0,
            },
        )
        for op, k, v in ops:
            key = b"key-%d" % k if k is not None else None
            if op == "put":
                store.append("c", 0, [(key, v, None, 1000)], compression_type=compression)
                model[key] = v
            elif op == "delete":
                store.append("c", 0, [(key, None, None, 1000)], compression_type=compression)
                model[key] = None
            else:
                store.clean_topic("c")
        # A record 10 s "later" rolls the segment (segment.ms), making all of the
        # above cleanable; two cleanings with time between them pass every
        # tombstone's delete horizon (delete.retention.ms = 0).
        store.append("c", 0, [(b"sentinel", b"", None, 1000 + 10_000)])
        store.clean_topic("c")
        time.sleep(0.005)
        store.clean_topic("c")
        records = [r for r in read_all(store, "c") if r.key != b"sentinel"]
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets)), "offset order, no duplicates"
    latest: dict[bytes, bytes | None] = {}
    for r in records:
        latest[r.key] = r.value
    live = {k: v for k, v in model.items() if v is not None}
    assert latest == live, "per key, the latest value; no key whose tombstone passed its horizon"


def test_consumers_and_reads_step_over_batches_a_cleaning_emptied(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("c", 1, config={"cleanup.policy": "compact", "segment.bytes": 1024})
        for i in range(30):
            s.append("c", 0, [(b"k%d" % (j % 4), b"v%d" % i) for j in range(5)])
        s.clean_topic("c")
        first = s.read("c", 0, 0)
        assert first and first[0].offset > 0, "no answer of [] in the middle of the log"
    for mode in ("iterate", "poll"):
        c = seglog.Consumer(
            store_path, "c", auto_offset_reset="earliest", consumer_timeout_ms=0, enable_auto_commit=False
        )
        if mode == "iterate":
            records = list(c)
        else:
            records = []
            while batch := c.poll(max_records=1000):
                records += [r for rs in batch.values() for r in rs]
        latest = {r.key: r.value for r in records}
        assert latest == {b"k%d" % k: b"v29" for k in range(4)}, mode
        assert c.position(("c", 0)) == 150
        c.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_lookups_in_a_compacted_log_find_the_next_record_kept(store_path: Path, read_only: bool) -> None:
    """A lookup (by Store.read and by seek + poll) of every offset of a log whose
    batches a cleaning left with gaps, at their start, middle and end: the first
    record kept at or after it, whether read through the writer's map or by pread."""
    with seglog.open(store_path) as s:
        s.create_topic("c", 1, config={"cleanup.policy": "compact", "segment.bytes": 1024})
        for i in range(30):
            s.append("c", 0, [(b"k%d" % ((i * 5 + j) % 7), b"v%d-%d" % (i, j)) for j in range(5)])
        s.clean_topic("c")
    with seglog.open(store_path, read_only=read_only) as s:
        kept = read_all(s, "c")
        end = s.offsets("c", 0)[1]
        assert 0 < len(kept) < end - 30, "the cleaning left gaps"
        c = seglog.Consumer(s, group_id=None, consumer_timeout_ms=0, enable_auto_commit=False)
        c.assign([("c", 0)])
        for o in range(end):
            want = [(r.offset, r.key, r.value) for r in kept if r.offset >= o][:1]
            got = s.read("c", 0, o, max_bytes=1, max_records=1)
            assert [(r.offset, r.key, r.value) for r in got] == want, o
            c.seek(("c", 0), o)
            polled = [r for rs in c.poll(max_records=1).values() for r in rs]
            assert [(r.offset, r.key, r.value) for r in polled] == want, o
        c.close()


def test_delete_records_is_seen_by_other_processes_at_once(store_path: Path) -> None:
    import subprocess
    import sys

    with seglog.open(store_path) as w:
        w.create_topic("t")
        w.append("t", 0, [b"x"] * 60)
        w.delete_records("t", 0, 45)
        code = "import sys, seglog; print(seglog.open(sys.argv[1], read_only=True).offsets('t', 0))"
        out = subprocess.run(
            [sys.executable, "-c", code, str(store_path)], capture_output=True, text=True, timeout=60
        )
        assert out.stdout.strip() == "(45, 60)", out.stderr
        with pytest.raises(seglog.OffsetOutOfRangeError):
            w.read("t", 0, 10)


def test_a_reader_opened_before_a_cleaning_sees_the_cleaned_segments(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("c", 1, config={"cleanup.policy": "compact", "segment.bytes": 1024})
        for i in range(30):
            w.append("c", 0, [(b"k%d" % (j % 4), b"v%d" % i) for j in range(5)])
        reader = seglog.open(store_path, read_only=True)
        assert len(read_all(reader, "c")) == 150
        w.clean_topic("c")
        # The reader's handles point at files the cleaning replaced: it must
        # notice and read the cleaned segments, whose records are each key's latest.
        records = read_all(reader, "c")
        assert len(records) < 150
        assert {r.key: r.value for r in records} == {b"k%d" % k: b"v29" for k in range(4)}
        reader.close()
