"""Log maintenance benchmarks: compaction throughput and retention.

- Compaction: a topic of about 1 GB (``--gb``) of 100-byte values whose keys are
  10% unique (each key written ten times), cleaned once; throughput in MB/s of
  input, beside the machine's sequential read+write of the same bytes.
- Retention: deleting 100 segments by ``retention.bytes``.

Medians of ``--repeat`` runs. ``python benches/bench_maintenance.py [--gb 1.0]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import seglog

VALUE = b"v" * 100


def fill_compacted(path: Path, total_bytes: int) -> tuple[int, int]:
    """Writes keyed records until the log holds about total_bytes; 10% unique keys."""
    per_record = 100 + 16 + 21  # value, key, record overhead
    n = total_bytes // per_record
    unique = max(n // 10, 1)
    with seglog.open(path) as store:
        store.create_topic(
            "c",
            config={"cleanup.policy": "compact", "segment.bytes": 64 << 20, "min.cleanable.dirty.ratio": 0.0},
        )
        with seglog.Producer(store, linger_ms=0) as producer:
            chunk = 200_000
            for start in range(0, n, chunk):
                count = min(chunk, n - start)
                keys = [b"key-%011d" % ((start + i) % unique) for i in range(count)]
                producer.send_batch("c", [VALUE] * count, keys=keys, partition=0)
        size = store.describe("c").partitions[0].size_bytes
    return n, size


def machine_copy(path: Path, size: int) -> float:
    """Seconds to read `size` bytes and write them to a new file (1 MiB I/O)."""
    src = path / "copy-src"
    block = os.urandom(1 << 20)
    with open(src, "wb") as f:
        for _ in range(size >> 20):
            f.write(block)
    t0 = time.perf_counter()
    fd_in = os.open(src, os.O_RDONLY)
    fd_out = os.open(path / "copy-dst", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    while True:
        b = os.read(fd_in, 1 << 20)
        if not b:
            break
        os.write(fd_out, b)
    os.fsync(fd_out)
    os.close(fd_in)
    os.close(fd_out)
    t = time.perf_counter() - t0
    (path / "copy-src").unlink()
    (path / "copy-dst").unlink()
    return t


def bench_compaction(gb: float, repeat: int) -> dict[str, float]:
    times, ratios, inputs = [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(dir=Path.cwd()) as d:
            path = Path(d)
            n, size = fill_compacted(path / "store", int(gb * (1 << 30)))
            with seglog.open(path / "store") as store:
                t0 = time.perf_counter()
                report = store.clean_topic("c")
                t = time.perf_counter() - t0
            times.append(t)
            inputs.append(report["cleaned_bytes_in"])
            ratios.append(report["cleaned_bytes_out"] / report["cleaned_bytes_in"])
            copy = machine_copy(path, size)
    t = statistics.median(times)
    mb = statistics.median(inputs) / 1e6
    return {
        "records": n,
        "input_mb": mb,
        "seconds": t,
        "mb_per_s": mb / t,
        "output_ratio": statistics.median(ratios),
        "machine_copy_mb_per_s": size / 1e6 / copy,
    }


def bench_retention(repeat: int) -> dict[str, float]:
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(dir=Path.cwd()) as d, seglog.open(d) as store:
            store.create_topic("r", config={"segment.bytes": 1 << 20})
            with seglog.Producer(store, linger_ms=0) as producer:
                while store.describe("r").partitions[0].segment_count <= 101:
                    producer.send_batch("r", [VALUE] * 8000, partition=0)
            store.alter_topic_config("r", {"retention.bytes": 1, "file.delete.delay.ms": 0})
            t0 = time.perf_counter()
            report = store.run_maintenance("r")
            times.append(time.perf_counter() - t0)
            assert report["deleted_segments"] >= 100, report
    t = statistics.median(times)
    return {"segments": 100, "seconds": t, "ms_per_segment": t * 1000 / 100}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gb", type=float, default=1.0, help="size of the compacted topic (default 1.0)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    c = bench_compaction(args.gb, args.repeat)
    r = bench_retention(args.repeat)
    print(f"\n## Log maintenance (medians of {args.repeat} runs)\n")
    print("| case | figure |")
    print("|---|---|")
    print(
        f"| compaction: {c['input_mb']:,.0f} MB in, 10% unique keys | **{c['mb_per_s']:,.0f} MB/s** "
        f"({c['seconds']:.2f} s; output {c['output_ratio']:.0%} of input) |"
    )
    print(
        f"| machine: read + write + fsync of the same bytes | {c['machine_copy_mb_per_s']:,.0f} MB/s "
        f"(compaction at {c['mb_per_s'] / c['machine_copy_mb_per_s']:.2f}x) |"
    )
    print(
        f"| retention: delete 100 segments of 1 MiB | **{r['seconds'] * 1000:.1f} ms** "
        f"({r['ms_per_segment']:.2f} ms per segment) |"
    )


if __name__ == "__main__":
    main()
