"""Consume: reading every record back (from the page cache), by iterating a
Consumer and by poll_arrow, beside kafka-python's parser and a sqlite scan."""

from __future__ import annotations

import sys
from typing import Any

from baselines.kafka_python import kp_consume, kp_finish, kp_populate
from baselines.naive import nv_finish, nv_populate, nv_read
from baselines.sqlite import sq_consume, sq_finish, sq_populate
from harness import TOPIC, Bench, Result, Target, seglog

from .fresh import fresh
from .stores import SegCtx, seg_finish, seg_populate

#: The row the broker's consume rows are compared with (run by the broker group
#: itself when the consume group is not run).
C1_CASE = "seglog: for record in Consumer"


def iterate(ctx: SegCtx) -> int:
    """Every record of the topic through a fresh Consumer, touching offset, key and value."""
    c = _consumer(ctx.store)
    seen = 0
    for r in c:
        r.offset, r.key, r.value  # noqa: B018
        seen += 1
    c.close()
    return seen


def poll_all(ctx: SegCtx) -> int:
    """Every record through poll() (Kafka's loop), touching offset, key and value."""
    c = _consumer(ctx.store)
    seen = 0
    while batches := c.poll(timeout_ms=0):
        for records in batches.values():
            for r in records:
                r.offset, r.key, r.value  # noqa: B018
            seen += len(records)
    c.close()
    return seen


def first_pass(b: Bench) -> None:
    """poll_arrow over the whole topic in a new process each run, from opening
    the store to closing it (what each Spark task does), against a warm pass (C2)."""
    n = b.data.n
    r = Result(
        "C2f",
        "consume",
        "seglog",
        "seglog: poll_arrow, first pass in a fresh process (open to close; pyarrow imported before)",
        "records/s",
        n,
        vs_naive="N2",
        vs_sqlite="Q6",
        target=(Target("min_rate", 15_000_000), Target("ratio_of", 0.8, "C2")),
    )
    ctx = seg_populate(b)
    try:
        fresh("arrow", ctx.path / "store", TOPIC)  # warms the interpreter's own files
        for _ in range(b.repeats):
            got = fresh("arrow", ctx.path / "store", TOPIC)
            if got["records"] != n:
                raise AssertionError(f"C2f: read {got['records']} records, expected {n}")
            r.runs_ns.append(got["ns"])
    finally:
        r.stored_bytes = seg_finish(ctx)
    b.report.add(r)


def consume_group(b: Bench) -> None:
    n = b.data.n
    print(f"consume ({n:,} records)", file=sys.stderr)

    def close_store(ctx: SegCtx) -> int:
        return seg_finish(ctx)

    def arrow(ctx: SegCtx) -> int:
        c = _consumer(ctx.store)
        seen = 0
        while seen < n:
            batch = c.poll_arrow(max_records=1_000_000)
            if batch.num_rows == 0:
                break
            seen += batch.num_rows
        c.close()
        return seen

    b.timed_reads(
        Result(
            "C1",
            "consume",
            "seglog",
            C1_CASE,
            "records/s",
            n,
            vs_kp="K5",
            vs_sqlite="Q6",
            vs_naive="N2",
            target=(Target("ratio_of", 2, "N2"), Target("ratio_of", 2, "Q6")),
        ),
        lambda: seg_populate(b),
        iterate,
        close_store,
    )
    b.timed_reads(
        Result(
            "C3",
            "consume",
            "seglog",
            "seglog: Consumer.poll(max_records=500) until empty",
            "records/s",
            n,
            vs_kp="K5",
            vs_sqlite="Q6",
            vs_naive="N2",
            target=(Target("ratio_of", 2, "N2"), Target("ratio_of", 2, "Q6")),
        ),
        lambda: seg_populate(b),
        poll_all,
        close_store,
    )
    b.timed_reads(
        Result(
            "C2",
            "consume",
            "seglog",
            "seglog: Consumer.poll_arrow(max_records=1,000,000)",
            "records/s",
            n,
            vs_kp="K5",
            vs_sqlite="Q6",
            vs_naive="N2",
            target=Target("min_rate", 15_000_000),
        ),
        lambda: seg_populate(b),
        arrow,
        close_store,
    )
    first_pass(b)
    b.timed_reads(
        Result(
            "N2", "consume", "naive", "naive Python: unpack 1 MiB os.read chunks to tuples", "records/s", n
        ),
        lambda: nv_populate(b),
        nv_read,
        nv_finish,
    )
    b.timed_reads(
        Result(
            "K5",
            "consume",
            "kafka-python",
            "kafka-python MemoryRecords over 1 MiB os.read chunks",
            "records/s",
            n,
        ),
        lambda: kp_populate(b),
        kp_consume,
        kp_finish,
    )
    b.timed_reads(
        Result(
            "Q6", "consume", "sqlite", 'sqlite SELECT "offset", key, value ORDER BY "offset"', "records/s", n
        ),
        lambda: sq_populate(b),
        sq_consume,
        sq_finish,
    )


def _consumer(store: Any, **config: Any) -> Any:
    """A Consumer of the topic from its start, with no group, that stops at its end."""
    return seglog.Consumer(
        store, TOPIC, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0, **config
    )
