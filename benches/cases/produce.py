"""Produce: seglog's Producer (one record per send, batches, acks=1 and "all",
one thread and several) beside the same work by kafka-python and sqlite."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from baselines.kafka_python import kp_body, kp_finish, kp_setup
from baselines.naive import nv_finish, nv_setup, nv_write
from baselines.sqlite import sq_body, sq_finish, sq_setup
from harness import (
    BATCH_BYTES,
    CHUNK,
    THREADS,
    TOPIC,
    Bench,
    Data,
    Result,
    Target,
    Targets,
    run_threads,
    seglog,
)

from .stores import SegCtx, seg_finish, seg_setup

# A seglog produce case: (prepare(n) -> inputs or None, body(ctx, n)).
SegCase = tuple[Callable[[int], Any] | None, Callable[[SegCtx, int], None]]

# The rows the broker's produce rows are compared with (run by the broker group
# itself when the produce group is not run).
S1_CASE = "seglog Producer.send(), acks=1, 1 record/call"
S3_CASE = 'seglog Producer.send(), acks="all", 1 thread'


def producer_send(d: Data, acks: int | str, threads: int) -> SegCase:
    """Producer.send() one record per call from ``threads`` threads sharing one
    producer, then flush() and close(): all inside the timed region."""

    def body(ctx: SegCtx, n: int) -> None:
        p = seglog.Producer(ctx.store, batch_size=BATCH_BYTES, linger_ms=5, acks=acks)

        def send_range(_i: int, lo: int, hi: int) -> None:
            send, keys, values = p.send, d.keys, d.values
            for i in range(lo, hi):
                send(TOPIC, values[i], key=keys[i])

        if threads == 1:
            send_range(0, 0, n)
        else:
            run_threads(d.slices(n, threads), send_range)
        p.flush()
        p.close()

    return None, body


def producer_send_batch(d: Data, arrow: bool) -> SegCase:
    """Producer.send_batch() of CHUNK records per call (lists of bytes, or
    zero-copy slices of pyarrow binary arrays), then flush() and close()."""
    if arrow:
        import pyarrow as pa

        keys_all = pa.array(d.keys, type=pa.binary())
        values_all = pa.array(d.values, type=pa.binary())

    def prepare(n: int) -> list[tuple[Any, Any]]:
        spans = [(lo, min(CHUNK, n - lo)) for lo in range(0, n, CHUNK)]
        if arrow:
            return [(keys_all.slice(lo, m), values_all.slice(lo, m)) for lo, m in spans]
        return [(d.keys[lo : lo + m], d.values[lo : lo + m]) for lo, m in spans]

    def body(ctx: SegCtx, n: int) -> None:
        p = seglog.Producer(ctx.store, batch_size=BATCH_BYTES, linger_ms=5, acks=1)
        for keys, values in ctx.inputs:
            p.send_batch(TOPIC, values, keys=keys)
        p.flush()
        p.close()

    return prepare, body


def seg_timed(b: Bench, result: Result, case: SegCase) -> None:
    """A seglog produce case, timed on a fresh store per run."""
    prepare, body = case
    b.timed(result, lambda m: seg_setup(b, prepare(m) if prepare else None), body, seg_finish)


def produce_group(b: Bench) -> None:
    d, n = b.data, b.data.n
    per = d.per_batch
    print(f"produce ({n:,} records)", file=sys.stderr)

    def seg(result: Result, case: SegCase) -> None:
        seg_timed(b, result, case)

    def res(
        id: str,
        impl: str,
        case: str,
        vs_kp: str,
        vs_sq: str,
        target: Targets | None = None,
        vs_nv: str = "N1",
    ) -> Result:
        return Result(
            id,
            "produce",
            impl,
            case,
            "records/s",
            n,
            vs_kp=vs_kp,
            vs_sqlite=vs_sq,
            vs_naive=vs_nv,
            target=target,
        )

    # Per-record send: 1.5x the naive pure-Python writer; send_batch: 60 % of the
    # machine's sequential write of the same bytes (M1).
    send_t = Target("ratio_of", 1.5, "N1")
    batch_t = Target("ratio_of", 0.6, "M1")
    all_t = Target("ratio_of", 0.30, "S4")  # acks=all vs acks=1, both from THREADS threads
    impl = "seglog"
    seg(
        res("S1", impl, S1_CASE, "K1", "Q1", send_t),
        producer_send(d, 1, 1),
    )
    seg(
        res(
            "S2",
            impl,
            f"seglog Producer.send_batch(), lists, {CHUNK:,} records/call",
            "K1",
            "Q2",
            batch_t,
        ),
        producer_send_batch(d, arrow=False),
    )
    try:
        seg(
            res(
                "S2a",
                impl,
                f"seglog Producer.send_batch(), pyarrow arrays, {CHUNK:,}/call",
                "K1",
                "Q2",
                batch_t,
            ),
            producer_send_batch(d, arrow=True),
        )
    except ImportError:
        print("  (pyarrow not installed: no send_batch with arrays)", file=sys.stderr)
    seg(
        res("S3", impl, S3_CASE, "K2", "Q3"),
        producer_send(d, "all", 1),
    )
    seg(
        res("S4", impl, f"seglog Producer.send(), acks=1, {THREADS} threads", "K3", "Q4"),
        producer_send(d, 1, THREADS),
    )
    seg(
        res("S5", impl, f'seglog Producer.send(), acks="all", {THREADS} threads', "K4", "Q5", all_t),
        producer_send(d, "all", THREADS),
    )

    def base(id: str, impl: str, case: str) -> Result:
        return Result(id, "produce", impl, case, "records/s", n)

    b.timed(
        base("N1", "naive", "naive Python: struct.pack + one write per record, fsync at the end"),
        lambda _m: nv_setup(b),
        lambda ctx, m: nv_write(ctx, d, m),
        nv_finish,
    )

    kp = "kafka-python batch builder, 16 KiB batches, os.write"
    for id, case, sync, threads in [
        ("K1", kp, False, 1),
        ("K2", kp + " + fdatasync/batch", True, 1),
        ("K3", kp + f", {THREADS} threads", False, THREADS),
        ("K4", kp + f" + fdatasync/batch, {THREADS} threads", True, THREADS),
    ]:
        b.timed(
            base(id, "kafka-python", case), lambda _m, s=sync: kp_setup(b, s), kp_body(d, threads), kp_finish
        )

    for id, case, sync, threads, bulk in [
        ("Q1", f"sqlite WAL, INSERT per record, COMMIT per {per}", "NORMAL", 1, False),
        ("Q2", f"sqlite WAL, executemany, {CHUNK:,} per transaction", "NORMAL", 1, True),
        ("Q3", f"sqlite WAL synchronous=FULL, INSERT per record, COMMIT per {per}", "FULL", 1, False),
        (
            "Q4",
            f"sqlite WAL, INSERT per record, COMMIT per {per}, {THREADS} threads",
            "NORMAL",
            THREADS,
            False,
        ),
        ("Q5", f"sqlite WAL synchronous=FULL, COMMIT per {per}, {THREADS} threads", "FULL", THREADS, False),
    ]:
        b.timed(
            base(id, "sqlite", case),
            lambda _m, s=sync, t=threads: sq_setup(b, s, t),
            sq_body(d, threads, bulk),
            sq_finish,
        )
