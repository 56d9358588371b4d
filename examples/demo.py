"""Produce and consume on an embedded store: the smallest useful seglog program."""

import tempfile
import time

import seglog


def main() -> None:
    with tempfile.TemporaryDirectory() as path:
        with seglog.open(path) as store:
            store.create_topic("page-views", partitions=3)
            n = 300_000
            t0 = time.perf_counter()
            for p in range(3):
                batch = [
                    (f"user-{i % 1000}".encode(), f'{{"page": "/p/{i % 50}"}}'.encode())
                    for i in range(n // 3)
                ]
                store.append("page-views", p, batch, compression_type="lz4")
            store.flush()
            t1 = time.perf_counter()
            count = 0
            for p in range(3):
                offset, end = store.offsets("page-views", p)
                while offset < end:
                    records = store.read("page-views", p, offset)
                    count += len(records)
                    offset = records[-1].offset + 1
            t2 = time.perf_counter()
            print(f"produced {n:,} records in {t1 - t0:.2f}s ({n / (t1 - t0):,.0f}/s, fsynced)")
            print(f"consumed {count:,} records in {t2 - t1:.2f}s ({count / (t2 - t1):,.0f}/s)")
            for part in store.describe("page-views").partitions:
                print(
                    f"  partition {part.partition}: offsets {part.log_start_offset}..{part.log_end_offset}, "
                    f"{part.size_bytes:,} bytes in {part.segment_count} segment(s)"
                )


if __name__ == "__main__":
    main()
