"""Store-wide files under concurrency and at the edges of what is legal:
checkpoint writes from many threads, the longest topic name and group id, the
partition bound, segments freed after delete_records, the cleaner's memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import seglog

CHECKPOINTS = ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "cleaner-offset-checkpoint"]


def test_concurrent_flush_and_maintenance_write_whole_checkpoints(store_path: Path) -> None:
    store = seglog.open(store_path)
    store.create_topic("t", partitions=3)
    for p in range(3):
        store.append("t", p, [b"x"] * (p + 1))
    errors: list[BaseException] = []
    empty: list[str] = []
    stop = threading.Event()

    def work(i: int) -> None:
        try:
            for _ in range(100):
                if i % 2:
                    store.flush()
                else:
                    store.run_maintenance()
        except BaseException as e:  # collected for the assertion
            errors.append(e)

    def watch() -> None:
        while not stop.is_set():
            for name in CHECKPOINTS:
                try:
                    if (store_path / name).read_bytes() == b"":
                        empty.append(name)
                except FileNotFoundError:
                    pass

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert errors == []
    assert empty == [], "a checkpoint was seen empty on disk"
    assert not [p.name for p in store_path.iterdir() if p.name.endswith(".tmp")]
    store.close()
    store = seglog.open(store_path)
    assert [store.offsets("t", p) for p in range(3)] == [(0, 1), (0, 2), (0, 3)]
    store.close()


def test_a_topic_name_of_249_characters(store_path: Path) -> None:
    name = "n" * 249
    store = seglog.open(store_path)
    store.create_topic(name, partitions=2)
    store.append(name, 1, [(b"k", b"v")], durable=True)
    store.alter_topic_config(name, {"retention.ms": 60_000})
    store.close()
    store = seglog.open(store_path)
    assert name in store.topics()
    assert [(r.key, r.value) for r in store.read(name, 1, 0)] == [(b"k", b"v")]
    store.delete_topic(name)
    assert store.topics() == []
    store.close()


def test_delete_records_then_retention_frees_the_segments(store_path: Path) -> None:
    store = seglog.open(store_path)
    store.create_topic("t", config={"segment.bytes": 1000, "file.delete.delay.ms": 0})
    for i in range(50):
        store.append("t", 0, [(b"k", b"%d" % i + b"v" * 200)])
    before = store.describe("t").partitions[0]
    assert before.segment_count > 5
    store.delete_records("t", 0, 40)
    store.run_maintenance()
    after = store.describe("t").partitions[0]
    assert after.log_start_offset == 40
    assert after.segment_count < before.segment_count
    logs = sorted((store_path / "t-0").glob("*.log"))
    assert len(logs) == after.segment_count, "the freed segments' files are gone"
    # Every remaining segment holds offsets at or past the log start offset.
    assert int(logs[1].stem) > 40
    assert store.read("t", 0, 40)[0].offset == 40
    store.close()


def test_a_long_group_id(store_path: Path) -> None:
    store = seglog.open(store_path)
    store.append("t", 0, [b"a", b"b"])
    group = "g" * 300
    first = seglog.Consumer(
        store, "t", group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    with pytest.raises(seglog.GroupInUseError):
        seglog.Consumer(store, "t", group_id=group)
    assert sum(map(len, first.poll().values())) == 2
    first.commit()
    first.close()
    again = seglog.Consumer(store, "t", group_id=group)
    assert again.committed(("t", 0)) == 2
    again.close()
    store.close()


def test_partitions_per_topic_are_bounded(store_path: Path) -> None:
    store = seglog.open(store_path)
    with pytest.raises(ValueError, match="10000"):
        store.create_topic("t", partitions=100_000)
    assert store.topics() == []
    assert not list(store_path.glob("t-*"))
    store.close()


CLEANER_CHILD = textwrap.dedent(
    """
    import resource, sys, seglog
    store = seglog.open(sys.argv[1], config={"log.cleaner.enable": False})
    store.create_topic("c", config={"cleanup.policy": "compact", "segment.bytes": 48 << 20})
    value = b"v" * 1000
    for i in range(100):  # 100 MiB in two full segments and a third
        store.append("c", 0, [(b"k%d" % (j % 500), value) for j in range(1000)])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report = store.clean_topic("c")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert report["records_removed"] > 0, report
    print((after - before) * 1024)
    store.close()
    """
)


def test_the_cleaner_does_not_hold_whole_segments_in_memory(store_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", CLEANER_CHILD, str(store_path)], capture_output=True, text=True, timeout=600
    )
    assert child.returncode == 0, child.stderr
    grown = int(child.stdout)
    assert grown < 16 << 20, f"cleaning 48 MiB segments grew the peak RSS by {grown >> 20} MiB"


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_segment_keeps_one_file_open(store_path: Path) -> None:
    """As Kafka: indexes are closed once mapped (or read), so each segment
    holds only its log open, and a topic's partitions cost one file each."""
    store = seglog.open(store_path)
    before = open_files()
    store.create_topic("wide", partitions=500)
    assert open_files() - before <= 500 + 5
    store.create_topic("long", config={"segment.bytes": 2000, "index.interval.bytes": 100})
    before = open_files()
    for _ in range(200):
        store.append("long", 0, [(b"k", b"v" * 100)])
    segments = store.describe("long").partitions[0].segment_count
    assert segments > 10
    assert open_files() - before <= segments + 2
    assert [r.offset for r in store.read("long", 0, 150, max_records=3)] == [150, 151, 152]
    store.close()
    store = seglog.open(store_path)
    assert open_files() - before <= 500 + segments + 10
    assert store.offsets("long", 0) == (0, 200)
    store.close()
