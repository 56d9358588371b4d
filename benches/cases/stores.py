"""seglog stores for the cases: a fresh one per produce run, and one holding all
records for the read cases."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import TOPIC, Bench, Data, rmtree, seglog


@dataclass
class SegCtx:
    path: Path
    store: Any
    inputs: Any = None  # prepared outside the timed region
    consumer: Any = None


def seg_setup(b: Bench, inputs: Any = None) -> SegCtx:
    path = b.fresh_dir()
    store = seglog.open(path / "store")
    store.create_topic(TOPIC, partitions=1)
    return SegCtx(path, store, inputs)


def seg_finish(ctx: SegCtx, n: int | None = None) -> int:
    store = ctx.store
    if n is not None:
        end = store.offsets(TOPIC, 0)[1]
        if end != n:
            raise AssertionError(f"log end offset {end}, expected {n}")
    size = int(store.describe(TOPIC).partitions[0].size_bytes)
    store.close()
    rmtree(ctx.path)
    return size


def seg_populate(b: Bench) -> SegCtx:
    """A fresh store holding all records in 16 KiB batches (the kafka-python
    baseline's layout), closed and reopened as a restarted reader would see it."""
    ctx = seg_setup(b)
    for chunk in _chunks(b.data, b.data.n, b.data.per_batch):
        ctx.store.append(TOPIC, 0, chunk)
    ctx.store.close()
    ctx.store = seglog.open(ctx.path / "store")
    return ctx


def _chunks(d: Data, n: int, per: int) -> list[list[tuple[bytes, bytes]]]:
    k, v = d.keys, d.values
    return [
        list(zip(k[lo : min(lo + per, n)], v[lo : min(lo + per, n)], strict=True)) for lo in range(0, n, per)
    ]


def log_bytes(b: Bench) -> int:
    """The size of the log holding all records: the bytes the machine's limits are measured on."""
    ctx = seg_populate(b)
    size = int(ctx.store.describe(TOPIC).partitions[0].size_bytes)
    seg_finish(ctx)
    return size
