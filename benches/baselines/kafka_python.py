"""The kafka-python baseline: the same Kafka format built and parsed in pure
Python (kafka-python's RecordBatch v2 code) on a plain log file, without a broker."""

from __future__ import annotations

import bisect
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from harness import MIB, Bench, Data, new_builder, rmtree, run_threads


class KpLog:
    """A log file of RecordBatch v2 batches built by kafka-python, with an
    in-memory offset index (base offset, file position, size per batch)."""

    def __init__(self, path: Path, sync: bool) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.sync = sync
        self.lock = threading.Lock()
        self.next_offset = 0
        self.pos = 0
        self.bases: list[int] = []
        self.positions: list[int] = []
        self.sizes: list[int] = []

    def write(self, buf: bytearray, count: int) -> None:
        with self.lock:
            base = self.next_offset
            self.next_offset += count
            struct.pack_into(">q", buf, 0, base)  # base offset: outside the CRC, as a broker sets it
            view = memoryview(buf)
            while view:
                view = view[os.write(self.fd, view) :]
            self.bases.append(base)
            self.positions.append(self.pos)
            self.sizes.append(len(buf))
            self.pos += len(buf)
        if self.sync:
            os.fdatasync(self.fd)

    def close(self) -> None:
        os.close(self.fd)


@dataclass
class KpCtx:
    path: Path
    log: KpLog


def kp_produce(log: KpLog, keys: list[bytes], values: list[bytes], lo: int, hi: int) -> None:
    """What a kafka-python producer does per record and per batch, minus the network."""
    b = new_builder()
    count = 0
    for i in range(lo, hi):
        if b.append(count, None, keys[i], values[i], ()) is None:
            log.write(b.build(), count)
            b = new_builder()
            b.append(0, None, keys[i], values[i], ())
            count = 1
        else:
            count += 1
    if count:
        log.write(b.build(), count)


def kp_setup(b: Bench, sync: bool) -> KpCtx:
    path = b.fresh_dir()
    return KpCtx(path, KpLog(path / "00000000000000000000.log", sync))


def kp_finish(ctx: KpCtx, n: int | None = None) -> int:
    log = ctx.log
    if n is not None and log.next_offset != n:
        raise AssertionError(f"kafka-python log holds {log.next_offset} records, expected {n}")
    size = os.fstat(log.fd).st_size
    log.close()
    rmtree(ctx.path)
    return size


def kp_body(d: Data, threads: int) -> Callable[[KpCtx, int], None]:
    def body(ctx: KpCtx, n: int) -> None:
        if threads == 1:
            kp_produce(ctx.log, d.keys, d.values, 0, n)
        else:
            run_threads(
                d.slices(n, threads), lambda _i, lo, hi: kp_produce(ctx.log, d.keys, d.values, lo, hi)
            )

    return body


def kp_populate(b: Bench) -> KpCtx:
    ctx = kp_setup(b, sync=False)
    kp_produce(ctx.log, b.data.keys, b.data.values, 0, b.data.n)
    return ctx


def kp_consume(ctx: KpCtx) -> int:
    fd = os.open(ctx.log.path, os.O_RDONLY)
    n = 0
    carry = b""
    try:
        while chunk := os.read(fd, MIB):
            data = carry + chunk if carry else chunk
            records = MemoryRecords(data)
            for batch in records:
                for r in batch:
                    r.offset, r.key, r.value  # noqa: B018
                    n += 1
            carry = data[records.valid_bytes() :]
    finally:
        os.close(fd)
    return n


def kp_lookup(ctx: KpCtx, offset: int) -> bytes | None:
    log = ctx.log
    i = bisect.bisect_right(log.bases, offset) - 1
    batch = DefaultRecordBatch(os.pread(log.fd, log.sizes[i], log.positions[i]))
    for r in batch:
        if r.offset == offset:
            return r.key  # type: ignore[no-any-return]
    return None
