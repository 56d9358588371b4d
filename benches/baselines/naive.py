"""The naive pure-Python baseline: a log as a file of ``struct.pack``-ed records,
one buffered write per record, with no CRC and no on-disk index; read back by
unpacking a 1 MiB buffer at a time, and looked up through a sparse in-memory
index (every 4 KiB of log, as seglog's ``.index``) + ``os.pread``.

It does less than seglog (no checksum, no batches, no recovery, no index file),
so it is the bar a native engine has to clear to be worth its build."""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from harness import MIB, Bench, Data, rmtree

#: offset, timestamp, key length, value length (-1: None)
HEADER = struct.Struct(">qqii")
INDEX_INTERVAL = 4096


@dataclass
class NvCtx:
    path: Path
    file: Path
    # The sparse index a reader builds once: offsets and positions every INDEX_INTERVAL bytes.
    offsets: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    fd: int = -1


def nv_setup(b: Bench) -> NvCtx:
    path = b.fresh_dir()
    return NvCtx(path, path / "log.bin")


def nv_write(ctx: NvCtx, d: Data, n: int) -> None:
    """Open, one ``write`` of ``pack(header) + key + value`` per record, fsync, close."""
    pack, keys, values = HEADER.pack, d.keys, d.values
    with open(ctx.file, "wb") as f:
        w = f.write
        for i in range(n):
            k, v = keys[i], values[i]
            w(pack(i, 0, len(k), len(v)) + k + v)
        f.flush()
        os.fsync(f.fileno())


def nv_finish(ctx: NvCtx, n: int | None = None) -> int:
    if ctx.fd >= 0:
        os.close(ctx.fd)
    size = ctx.file.stat().st_size
    if n is not None:
        seen = nv_read(ctx)
        if seen != n:
            raise AssertionError(f"naive log holds {seen} records, expected {n}")
    rmtree(ctx.path)
    return size


def nv_populate(b: Bench) -> NvCtx:
    ctx = nv_setup(b)
    nv_write(ctx, b.data, b.data.n)
    return ctx


def nv_read(ctx: NvCtx) -> int:
    """Every record as an (offset, key, value) tuple, from 1 MiB reads."""
    unpack_from, hlen = HEADER.unpack_from, HEADER.size
    n = 0
    with open(ctx.file, "rb", buffering=0) as f:
        carry = b""
        while chunk := f.read(MIB):
            buf = carry + chunk if carry else chunk
            pos, end = 0, len(buf)
            while pos + hlen <= end:
                offset, _ts, klen, vlen = unpack_from(buf, pos)
                kpos = pos + hlen
                vpos = kpos + max(klen, 0)
                stop = vpos + max(vlen, 0)
                if stop > end:
                    break
                key = buf[kpos:vpos] if klen >= 0 else None
                value = buf[vpos:stop] if vlen >= 0 else None
                record = (offset, key, value)
                record[0], record[1], record[2]
                n += 1
                pos = stop
            carry = buf[pos:]
    return n


def nv_open_index(ctx: NvCtx) -> NvCtx:
    """What a reader opening the log does before its first lookup: one pass
    building the sparse index."""
    unpack_from, hlen = HEADER.unpack_from, HEADER.size
    offsets, positions = ctx.offsets, ctx.positions
    offsets.clear()
    positions.clear()
    with open(ctx.file, "rb", buffering=0) as f:
        data = f.read()
    pos, end, last = 0, len(data), -INDEX_INTERVAL
    while pos + hlen <= end:
        offset, _ts, klen, vlen = unpack_from(data, pos)
        if pos - last >= INDEX_INTERVAL:
            offsets.append(offset)
            positions.append(pos)
            last = pos
        pos += hlen + max(klen, 0) + max(vlen, 0)
    ctx.fd = os.open(ctx.file, os.O_RDONLY)
    return ctx


def nv_lookup(ctx: NvCtx, offset: int) -> bytes | None:
    """The index entry at or before ``offset``, a 4 KiB pread there, a scan to it."""
    unpack_from, hlen = HEADER.unpack_from, HEADER.size
    i = bisect.bisect_right(ctx.offsets, offset) - 1
    pos = ctx.positions[i]
    buf = os.pread(ctx.fd, 2 * INDEX_INTERVAL, pos)
    p = 0
    while p + hlen <= len(buf):
        o, _ts, klen, vlen = unpack_from(buf, p)
        kpos = p + hlen
        if o == offset:
            return buf[kpos : kpos + klen] if klen >= 0 else None
        p = kpos + max(klen, 0) + max(vlen, 0)
    return None
