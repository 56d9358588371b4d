"""Consume: reading every record back (from the page cache), by iterating a
Consumer and by poll_arrow, beside kafka-python's parser and a sqlite scan."""

from __future__ import annotations

import sys
from typing import Any

from baselines.kafka_python import kp_consume, kp_finish, kp_populate
from baselines.sqlite import sq_consume, sq_finish, sq_populate
from harness import TOPIC, Bench, Result, Target, seglog

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
            target=Target("min_rate", 2_000_000),
        ),
        lambda: seg_populate(b),
        iterate,
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
            target=Target("min_rate", 15_000_000),
        ),
        lambda: seg_populate(b),
        arrow,
        close_store,
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
