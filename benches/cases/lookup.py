"""Random lookups: one record by offset, through Store.read and Consumer.seek +
poll, beside an offset index over kafka-python's batches and a sqlite primary key."""

from __future__ import annotations

import sys
from typing import Any

from baselines.kafka_python import kp_finish, kp_lookup, kp_populate
from baselines.naive import nv_finish, nv_lookup, nv_open_index, nv_populate
from baselines.sqlite import sq_finish, sq_lookup, sq_populate
from harness import LOOKUPS, TOPIC, Bench, Result, Target, seglog

from .fresh import fresh
from .stores import SegCtx, seg_finish, seg_populate


def lookup_group(b: Bench) -> None:
    n = b.data.n
    print(f"random lookups ({LOOKUPS:,} over {n:,} records)", file=sys.stderr)

    def store_read(ctx: SegCtx, offset: int) -> bytes | None:
        return ctx.store.read(TOPIC, 0, offset, max_bytes=1, max_records=1)[0].key  # type: ignore[no-any-return]

    b.timed_lookups(
        Result(
            "L1",
            "lookup",
            "seglog",
            "seglog Store.read(topic, 0, offset, max_bytes=1, max_records=1)",
            "us",
            LOOKUPS,
            vs_kp="K6",
            vs_sqlite="Q7",
            vs_naive="N3",
            target=(Target("max_us", 3), Target("faster_than", 2, "Q7")),
        ),
        lambda: seg_populate(b),
        store_read,
        seg_finish,
    )
    cold_lookups(b)

    def setup(**config: Any) -> SegCtx:
        ctx = seg_populate(b)
        ctx.consumer = _assigned_consumer(ctx.store, **config)
        return ctx

    def seek_poll(ctx: SegCtx, offset: int) -> bytes | None:
        c, tp = ctx.consumer
        c.seek(tp, offset)
        for records in c.poll(timeout_ms=0, max_records=1).values():
            return records[0].key  # type: ignore[no-any-return]
        return None

    def finish(ctx: SegCtx) -> int:
        ctx.consumer[0].close()
        return seg_finish(ctx)

    b.timed_lookups(
        Result(
            "L2",
            "lookup",
            "seglog",
            "seglog Consumer.seek() + poll(max_records=1)",
            "us",
            LOOKUPS,
            vs_kp="K6",
            vs_sqlite="Q7",
            vs_naive="N3",
            target=Target("max_us", 5),
        ),
        setup,
        seek_poll,
        finish,
    )
    # The same with a fetch size of one batch (kafka-python's config name): poll()
    # otherwise reads and decodes max_partition_fetch_bytes (1 MiB) per lookup.
    b.timed_lookups(
        Result(
            "L3",
            "lookup",
            "seglog",
            "seglog Consumer(max_partition_fetch_bytes=1).seek() + poll(max_records=1)",
            "us",
            LOOKUPS,
            vs_kp="K6",
            vs_sqlite="Q7",
            vs_naive="N3",
            target=Target("max_us", 5),
        ),
        lambda: setup(max_partition_fetch_bytes=1),
        seek_poll,
        finish,
    )
    b.timed_lookups(
        Result(
            "N3", "lookup", "naive", "naive Python: sparse in-memory index + os.pread 8 KiB", "us", LOOKUPS
        ),
        lambda: nv_open_index(nv_populate(b)),
        nv_lookup,
        nv_finish,
    )
    b.timed_lookups(
        Result(
            "K6",
            "lookup",
            "kafka-python",
            "kafka-python: offset index + os.pread + DefaultRecordBatch",
            "us",
            LOOKUPS,
        ),
        lambda: kp_populate(b),
        kp_lookup,
        kp_finish,
    )
    b.timed_lookups(
        Result("Q7", "lookup", "sqlite", 'sqlite SELECT key, value WHERE "offset" = ?', "us", LOOKUPS),
        lambda: sq_populate(b),
        sq_lookup,
        sq_finish,
    )


def cold_lookups(b: Bench) -> None:
    """Open to first lookup in a fresh process, seglog and sqlite, one per run."""
    d = b.data
    seg = Result(
        "L1c",
        "lookup",
        "seglog",
        "seglog cold: new process, seglog.open() + first Store.read(max_records=1)",
        "us",
        1,
        vs_sqlite="Q7c",
        target=Target("faster_than", 2, "Q7c"),
    )
    sq = Result("Q7c", "lookup", "sqlite", "sqlite cold: new process, connect() + first SELECT", "us", 1)
    ctx = seg_populate(b)
    sctx = sq_populate(b)
    try:
        for i in range(b.repeats + 1):  # the first of each warms the interpreter's files
            o = d.lookups[i]
            got = fresh("lookup", ctx.path / "store", TOPIC, o)
            got_sq = fresh("sqlite-lookup", sctx.db, o)
            for r, g in ((seg, got), (sq, got_sq)):
                if g["key"] != o:
                    raise AssertionError(f"{r.id}: lookup of offset {o} returned key {g['key']}")
                if i:
                    r.runs_us.append(g["ns"] / 1e3)
    finally:
        seg_finish(ctx)
        sq_finish(sctx)
    b.report.add(sq)
    b.report.add(seg)


def _assigned_consumer(store: Any, **config: Any) -> tuple[Any, Any]:
    """A Consumer assigned to partition 0 (per the contract: assign, then seek)."""
    tp = (TOPIC, 0)
    c = seglog.Consumer(store, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0, **config)
    c.assign([tp])
    return c, tp
