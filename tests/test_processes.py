"""Several processes on one store: one writer, any number of read-only readers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import seglog


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter: a separate process, as another program would be."""
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def test_second_writer_process_is_refused_naming_the_holder(store: seglog.Store, store_path: Path) -> None:
    store.create_topic("t")
    code = textwrap.dedent(
        """
        import sys, seglog
        try:
            seglog.open(sys.argv[1])
        except seglog.StoreLockedError as e:
            print(e)
            sys.exit(3)
        """
    )
    r = run_python(code, str(store_path))
    assert r.returncode == 3, r.stderr
    assert f"pid {os.getpid()}" in r.stdout and "read_only=True" in r.stdout
    # A read-only opener in another process is fine while the writer holds the lock.
    r = run_python(
        "import sys, seglog; print(seglog.open(sys.argv[1], read_only=True).topics())", str(store_path)
    )
    assert r.returncode == 0 and r.stdout.strip() == "['t']", r.stderr


def test_lock_is_released_on_close_and_on_process_death(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("t")
    r = run_python("import sys, os, seglog; s = seglog.open(sys.argv[1]); os._exit(0)", str(store_path))
    assert r.returncode == 0
    with seglog.open(store_path) as s:  # the dead process's lock went with it
        assert not s.clean_shutdown, "the dead writer never closed"


READER = textwrap.dedent(
    """
    import sys, time, seglog
    path, total = sys.argv[1], int(sys.argv[2])
    store = seglog.open(path, read_only=True)
    while "t" not in store.topics():
        time.sleep(0.01)
    offset, deadline = 0, time.monotonic() + 120
    while offset < total and time.monotonic() < deadline:
        recs = store.read("t", 0, offset, max_bytes=64 * 1024)
        if not recs:
            time.sleep(0.001)
            continue
        for r in recs:
            # Every record intact, in order, no gap, none twice.
            assert r.offset == offset, (r.offset, offset)
            assert r.key == str(offset).encode() and r.value == str(offset).encode() * 20, offset
            offset += 1
    print(offset)
    """
)


def test_read_only_process_follows_a_live_writer(store_path: Path) -> None:
    total = 200_000
    with seglog.open(store_path) as store:
        store.create_topic("t", config={"segment.bytes": 256 * 1024, "index.interval.bytes": 1024})
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, str(store_path), str(total)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        n = 0
        while n < total:
            batch = [(str(i).encode(), str(i).encode() * 20) for i in range(n, min(n + 997, total))]
            store.append("t", 0, batch)
            n += len(batch)
        out, err = reader.communicate(timeout=180)
        assert reader.returncode == 0, err
        assert int(out) == total
        assert store.describe("t").partitions[0].segment_count > 20, "the reader crossed many rolls"


def test_a_readers_time_lookups_agree_with_the_writers_across_segments(store_path: Path) -> None:
    # A reader reads a segment's time index at its first time lookup, not at open.
    with seglog.open(store_path) as store:
        store.create_topic("t", config={"segment.bytes": 4096, "index.interval.bytes": 256})
        for i in range(300):
            store.append("t", 0, [(b"k", b"v%d" % i * 8, None, 10_000 + 10 * i)])
        with seglog.open(store_path, read_only=True) as reader:
            assert store.describe("t").partitions[0].segment_count > 5
            probes = [0, 9_999, 10_000, 10_005, 11_230, 12_990, 12_991, 13_000]
            assert [reader.offset_for_time("t", 0, t) for t in probes] == [
                store.offset_for_time("t", 0, t) for t in probes
            ]
            assert reader.offset_for_time("t", 0, 11_235) == (124, 11_240)
            for i in range(300, 320):
                store.append("t", 0, [(b"k", b"v%d" % i * 8, None, 10_000 + 10 * i)])
            store.flush()
            assert reader.offset_for_time("t", 0, 13_105) == (311, 13_110), "after the writer went on"
            assert reader.offset_for_time("t", 0, 13_200) is None


def test_a_reader_reports_damage_in_the_middle_of_the_log(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("t")
        for i in range(4):
            s.append("t", 0, [b"batch %d record %d" % (i, j) for j in range(10)])
    log = store_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    size = len(data) // 4  # four batches of the same size
    data[2 * size + size // 2] ^= 0xFF  # inside the third batch; the fourth is intact
    log.write_bytes(bytes(data))
    reader = seglog.open(store_path, read_only=True)
    # Everything before the damage is served...
    assert [r.offset for r in reader.read("t", 0, 0, max_bytes=1 << 20)] == list(range(20))
    # At the damaged batch the reader says so, rather than look caught up.
    with pytest.raises(seglog.CorruptRecordError, match="damaged"):
        reader.read("t", 0, 20)
    reader.close()


def test_a_readers_lookups_check_each_batch_they_read(store_path: Path) -> None:
    # A reader takes the batches below the last index entry as the writer's
    # without reading them; a lookup (read into a small buffer, only the wanted
    # record copied out) checks the batch it reads, every time.
    with seglog.open(store_path) as s:
        s.create_topic("t", config={"index.interval.bytes": 128})
        for i in range(40):
            s.append("t", 0, [b"batch %02d record %d" % (i, j) for j in range(5)])
    log = store_path / "t-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    size = len(data) // 40  # forty batches of the same size
    data[10 * size + size // 2] ^= 0xFF  # inside the eleventh batch (offsets 50-54)
    log.write_bytes(bytes(data))
    with seglog.open(store_path, read_only=True) as reader:
        for o in (0, 49, 55, 123, 199):
            [r] = reader.read("t", 0, o, max_bytes=1, max_records=1)
            assert (r.offset, r.value) == (o, b"batch %02d record %d" % (o // 5, o % 5))
        for _ in range(2):  # not once per process: every time
            with pytest.raises(seglog.CorruptRecordError, match=r"00000000000000000000\.log"):
                reader.read("t", 0, 52, max_bytes=1, max_records=1)


def _open_logs(root: Path) -> set[str]:
    """The store's segment files this process holds open, as partition/file names."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)) and target.endswith(".log"):
            out.add(str(Path(target).relative_to(root)))
    return out


def test_a_read_only_store_opens_a_partitions_segments_when_it_is_first_used(store_path: Path) -> None:
    with seglog.open(store_path) as store:
        store.create_topic("t", partitions=3, config={"segment.bytes": 2048})
        for p in range(3):
            for i in range(20):
                store.append("t", p, [(b"k", b"%d-%d" % (p, i) * 20)])
    root = store_path.resolve()
    with seglog.open(store_path, read_only=True) as reader:
        assert _open_logs(root) == set(), "no segment opened before a partition is used"
        assert [r.value for r in reader.read("t", 1, 5, max_records=1)] == [b"1-5" * 20]
        held = _open_logs(root)
        assert len(held) >= 2 and {Path(f).parent.name for f in held} == {"t-1"}
        assert reader.offsets("t", 2) == (0, 20), "another partition: opened when asked"
        assert {Path(f).parent.name for f in _open_logs(root)} == {"t-1", "t-2"}
    assert _open_logs(root) == set()
