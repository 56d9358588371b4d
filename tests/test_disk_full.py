"""A full disk and a file-size limit, on real filesystems: a failed append
leaves the log as it was, the store is not called clean after it, and the
process never dies (no SIGBUS from a mapped index the disk cannot back).

The small disk is a tmpfs mounted for the test (this needs root)."""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import seglog


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(directory: Path) -> list[Path]:
    """Fills the filesystem with one-page files; returns them."""
    fillers = []
    for i in range(1_000_000):
        p = directory / f"filler-{i}"
        try:
            with open(p, "wb") as f:
                f.write(b"\1" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
            p.unlink(missing_ok=True)
            return fillers
        fillers.append(p)
    raise AssertionError("the filesystem never filled")


def test_a_failed_append_on_a_full_disk_leaves_the_log_as_it_was(small_fs: Path) -> None:
    path = small_fs / "store"
    store = seglog.open(path)
    store.create_topic("t", config={"segment.index.bytes": 64 * 1024})
    assert store.append("t", 0, [(b"k0", b"v0" * 500)], durable=True) == (0, 0)
    fillers = fill(small_fs)
    with pytest.raises(OSError) as e:
        store.append("t", 0, [(b"big", b"x" * 200_000)], durable=True)
    assert e.value.errno == errno.ENOSPC
    assert e.value.filename.endswith("00000000000000000000.log")
    assert store.offsets("t", 0) == (0, 1)
    for f in fillers:
        f.unlink()
    assert store.append("t", 0, [(b"k1", b"after")], durable=True) == (1, 1)
    store.close()
    store = seglog.open(path)
    assert not store.clean_shutdown, "a store that had a failed write is not marked clean"
    assert [(r.offset, r.key, r.value) for r in store.read("t", 0, 0)] == [
        (0, b"k0", b"v0" * 500),
        (1, b"k1", b"after"),
    ]
    assert store.append("t", 0, [(b"k2", b"again")], durable=True) == (2, 2)
    store.close()


EFBIG_CHILD = textwrap.dedent(
    """
    import errno, resource, signal, sys, seglog
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so the write returns EFBIG
    store = seglog.open(sys.argv[1])
    store.create_topic("t", config={"segment.index.bytes": 64 * 1024})
    store.append("t", 0, [(b"k0", b"v0")], durable=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, hard))
    acked = 1
    try:
        while True:
            store.append("t", 0, [(b"k%d" % acked, b"x" * 50_000)], durable=True)
            acked += 1
    except OSError as e:
        assert e.errno == errno.EFBIG, e
    assert store.offsets("t", 0) == (0, acked)
    store.close()
    print(acked)
    """
)


def test_a_failed_append_under_a_file_size_limit_leaves_the_log_as_it_was(store_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", EFBIG_CHILD, str(store_path)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr
    acked = int(child.stdout)
    assert acked >= 2
    store = seglog.open(store_path)
    assert not store.clean_shutdown
    assert store.append("t", 0, [(b"last", b"y")], durable=True) == (acked, acked)
    store.close()
    store = seglog.open(store_path)
    records = store.read("t", 0, 0, max_bytes=1 << 24)
    assert [r.offset for r in records] == list(range(acked + 1))
    assert records[-1].key == b"last"
    assert all(r.key == b"k%d" % r.offset for r in records[:-1])
    store.close()


DISK_FULL_LOOP_CHILD = textwrap.dedent(
    """
    import errno, os, sys, seglog
    path = sys.argv[1]
    store = seglog.open(os.path.join(path, "store"))
    store.create_topic("t", config={
        "index.interval.bytes": 0, "segment.bytes": 32 * 1024, "segment.index.bytes": 64 * 1024,
    })
    fillers = []
    while True:  # fill the disk with one-page files
        p = os.path.join(path, "filler-%d" % len(fillers))
        try:
            with open(p, "wb") as f:
                f.write(b"1" * 4096)
        except OSError:
            os.unlink(p)
            break
        fillers.append(p)
    acked, errors = 0, 0
    while fillers and acked < 3000:
        try:
            store.append("t", 0, [(b"%d" % acked, b"v" * 100)])
            acked += 1
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
            assert e.filename, e
            errors += 1
            os.unlink(fillers.pop())  # free one page and go on
    assert store.offsets("t", 0) == (0, acked)
    got = []
    while len(got) < acked:  # a read stays within one segment
        records = store.read("t", 0, len(got))
        assert records, len(got)
        got += [r.key for r in records]
    assert got == [b"%d" % i for i in range(acked)], "every acknowledged record reads back"
    print(acked, errors)
    """
)


def test_a_disk_full_loop_never_kills_the_process(small_fs: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", DISK_FULL_LOOP_CHILD, str(small_fs)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr}"
    acked, errors = map(int, child.stdout.split())
    assert acked == 3000
    assert errors > 0, "the disk did fill"


def test_a_create_that_fails_on_a_full_disk_leaves_nothing(small_fs: Path) -> None:
    store = seglog.open(small_fs / "store")
    fillers = fill(small_fs)
    with pytest.raises(OSError) as e:
        store.create_topic("t", partitions=50)
    assert e.value.errno == errno.ENOSPC
    assert e.value.filename
    assert store.topics() == []
    assert not list((small_fs / "store").glob("t-*"))
    for f in fillers:
        f.unlink()
    store.create_topic("t", partitions=2)
    store.close()


def test_on_a_full_disk_each_future_tells_the_truth_about_its_record(small_fs: Path) -> None:
    # The producer's sender appends the batches it finds ready for a partition in
    # one write, which fails or lands whole. On a disk that fills up, the records
    # in the log must be exactly those whose futures succeeded, at the offsets
    # they reported, and every other future must have failed with ENOSPC.
    store = seglog.open(small_fs / "store")
    store.create_topic("t", config={"segment.index.bytes": 64 * 1024})
    with seglog.Producer(store, linger_ms=600_000, batch_size=2048) as producer:
        first = producer.send("t", b"first", partition=0)
        producer.flush()
        assert first.get(10).offset == 0
        fillers = fill(small_fs)
        values = [b"%03d" % i + b"x" * 500 for i in range(100)]
        futures = [producer.send("t", v, partition=0) for v in values]
        producer.flush()
        landed = {}
        for v, f in zip(values, futures, strict=True):
            if f.exception is None:
                landed[f.get(0).offset] = v
            else:
                assert isinstance(f.exception, OSError) and f.exception.errno == errno.ENOSPC, f.exception
        assert len(landed) < len(values), "the disk was full: most of them cannot have landed"
        end = store.offsets("t", 0)[1]
        assert sorted(landed) == list(range(1, end)), "what landed is the log's tail, nothing else"
        assert {r.offset: r.value for r in store.read("t", 0, 1, max_bytes=1 << 20)} == landed
        for f in fillers:
            f.unlink()
        again = [producer.send("t", b"again %d" % i, partition=0) for i in range(3)]
        producer.flush()
        assert [f.get(10).offset for f in again] == [end, end + 1, end + 2]
    assert [r.value for r in store.read("t", 0, end)] == [b"again 0", b"again 1", b"again 2"]
    store.close()
