"""The machine's own limits for the same bytes: sequential write (with and
without fdatasync), sequential read, the latency of one fdatasync, and the first
touch of fresh memory (what any first pass that makes new buffers pays)."""

from __future__ import annotations

import mmap
import os
import random
import statistics
import sys
import time
from pathlib import Path

from harness import MIB, Bench, Result, rmtree


def machine_group(b: Bench, nbytes: int) -> None:
    n = b.data.n
    print(f"machine limits ({nbytes:,} bytes)", file=sys.stderr)
    block = random.Random(7).randbytes(MIB)

    def setup(_n: int = 0) -> tuple[Path, int]:
        path = b.fresh_dir()
        return path, os.open(path / "seq", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(ctx: tuple[Path, int], sync: bool) -> None:
        fd = ctx[1]
        left = nbytes
        while left > 0:
            left -= os.write(fd, block if left >= MIB else block[:left])
        if sync:
            os.fdatasync(fd)

    def finish(ctx: tuple[Path, int], _n: int) -> int:
        size = os.fstat(ctx[1]).st_size
        os.close(ctx[1])
        rmtree(ctx[0])
        return size

    b.timed(
        Result("M1", "machine", "machine", "sequential os.write, 1 MiB blocks (page cache)", "records/s", n),
        setup,
        lambda ctx, _n: write(ctx, False),
        finish,
        warmup_n=n,
    )
    b.timed(
        Result(
            "M2", "machine", "machine", "sequential os.write, 1 MiB blocks, + os.fdatasync", "records/s", n
        ),
        setup,
        lambda ctx, _n: write(ctx, True),
        finish,
        warmup_n=n,
    )

    def read_setup() -> tuple[Path, int]:
        ctx = setup()
        write(ctx, True)
        return ctx

    def read_all(ctx: tuple[Path, int]) -> int:
        fd = ctx[1]
        os.lseek(fd, 0, os.SEEK_SET)
        total = 0
        while chunk := os.read(fd, MIB):
            total += len(chunk)
        if total != nbytes:
            raise AssertionError(f"read {total} bytes, expected {nbytes}")
        return n

    b.timed_reads(
        Result("M3", "machine", "machine", "sequential os.read, 1 MiB blocks (page cache)", "records/s", n),
        read_setup,
        read_all,
        lambda ctx: finish(ctx, 0),
    )

    # fdatasync latency after a small write, median of 50 per run
    small = block[:4096]
    r = Result("M4", "machine", "machine", "os.fdatasync after a 4 KiB write (median of 50)", "us", 50)
    ctx = setup()
    try:
        for _ in range(5):
            os.write(ctx[1], small)
            os.fdatasync(ctx[1])
        pooled = []
        for _ in range(b.repeats):
            lat = []
            for _ in range(50):
                os.write(ctx[1], small)
                t0 = time.perf_counter_ns()
                os.fdatasync(ctx[1])
                lat.append(time.perf_counter_ns() - t0)
            r.runs_us.append(statistics.median(lat) / 1e3)
            pooled += lat
        pooled.sort()
        r.p99_us = pooled[int(len(pooled) * 0.99)] / 1e3
    finally:
        finish(ctx, 0)
    b.report.add(r)

    # First touch of fresh memory: a poll_arrow pass in a new process writes its
    # columns (about as many bytes as the log) into pages the kernel must first
    # hand over zeroed; a warm pass reuses memory its allocator kept. Huge pages
    # asked for, as the columns do.
    def fresh_setup(_n: int = 0) -> mmap.mmap:
        m = mmap.mmap(-1, nbytes)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            m.madvise(mmap.MADV_HUGEPAGE)
        return m

    def fresh_touch(m: mmap.mmap, _n: int) -> None:
        left = nbytes
        while left > 0:
            left -= m.write(block if left >= MIB else block[:left])

    def fresh_finish(m: mmap.mmap, _n: int) -> int:
        size = len(m)
        m.close()
        return size

    b.timed(
        Result(
            "M5",
            "machine",
            "machine",
            "first write to fresh memory (anonymous map), 1 MiB blocks",
            "records/s",
            n,
        ),
        fresh_setup,
        fresh_touch,
        fresh_finish,
        warmup_n=n,
    )
