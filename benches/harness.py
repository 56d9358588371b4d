"""How the suite measures: the workload's records and sizes, timed runs with
warm-ups and medians, and the results they add up to (ratios, targets met)."""

from __future__ import annotations

import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder

TOPIC = "bench"
KEY_BYTES = 8
VALUE_BYTES = 100
BATCH_BYTES = 16384  # the producer's batch_size and kafka-python's batches
CHUNK = 10_000  # records per send_batch call / per sqlite executemany transaction
THREADS = 8
LOOKUPS = 10_000
LOOKUP_WARMUP = 1_000
CASE_BUDGET_S = 30.0  # timed runs of one case; slower cases get fewer runs ...
MIN_REPEATS = 3  # ... but never fewer than this
MIB = 1 << 20
US = "\u00b5s"  # micro sign


def _import_seglog() -> Any:
    """Import seglog, waiting out a rebuild of the extension in progress."""
    deadline = time.monotonic() + 120
    while True:
        try:
            import seglog

            return seglog
        except ImportError as e:
            if time.monotonic() > deadline:
                raise
            print(f"seglog import failed ({e}); retrying in 5 s", file=sys.stderr)
            time.sleep(5)


#: The package measured, for every module of the suite.
seglog = _import_seglog()


class Data:
    """The records: ``n`` distinct 100-byte values, 8-byte keys, and the offsets
    of the random lookups; all from a fixed seed."""

    def __init__(self, n: int, seed: int = 20240229) -> None:
        rng = random.Random(seed)
        blob = rng.randbytes(n * VALUE_BYTES)
        self.n = n
        self.values = [blob[i * VALUE_BYTES : (i + 1) * VALUE_BYTES] for i in range(n)]
        self.keys = [i.to_bytes(KEY_BYTES, "big") for i in range(n)]
        self.lookups = [rng.randrange(n) for _ in range(LOOKUPS)]
        self.warm_lookups = [rng.randrange(n) for _ in range(LOOKUP_WARMUP)]
        self.per_batch = _records_per_batch(self.keys[0], self.values[0])

    def slices(self, n: int, parts: int) -> list[tuple[int, int]]:
        step = -(-n // parts)
        return [(lo, min(lo + step, n)) for lo in range(0, n, step)]


def new_builder() -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=BATCH_BYTES,
    )


def _records_per_batch(key: bytes, value: bytes) -> int:
    """How many records kafka-python puts in one 16 KiB batch (its batch_size)."""
    b = new_builder()
    n = 0
    while b.append(n, None, key, value, ()) is not None:
        n += 1
    return n


@dataclass
class Target:
    # "min_rate" (records/s), "max_us", "max_p99_us", "ratio_of" (rate >= value * rate
    # of ref), "faster_than" (latency: ref's latency / this one's >= value)
    kind: str
    value: float
    ref: str | None = None

    def text(self) -> str:
        if self.kind == "min_rate":
            return f">= {self.value:,.0f}/s"
        if self.kind == "max_us":
            return f"<= {self.value:g} {US}"
        if self.kind == "max_p99_us":
            return f"p99 <= {self.value / 1000:g} ms"
        if self.kind == "faster_than":
            return f">= {self.value:g}x faster than {self.ref}"
        if self.value >= 1:
            return f">= {self.value:g}x {self.ref}"
        return f">= {self.value:.0%} of {self.ref}"


#: A row's target: one condition, or several that must all hold.
Targets = Target | tuple[Target, ...]


def target_list(t: Targets | None) -> tuple[Target, ...]:
    if t is None:
        return ()
    return t if isinstance(t, tuple) else (t,)


@dataclass
class Result:
    id: str
    group: str  # produce, consume, lookup, machine, broker
    impl: str  # seglog, kafka-python, sqlite, machine, broker
    case: str
    unit: str  # "records/s" or "us"
    records: int
    runs_ns: list[int] = field(default_factory=list)  # wall time per timed run
    runs_us: list[float] = field(default_factory=list)  # median latency per run (lookups)
    p99_us: float | None = None
    stored_bytes: int | None = None  # bytes written/read by the case
    vs_kp: str | None = None  # ids of the baselines this row is compared with
    vs_sqlite: str | None = None
    vs_naive: str | None = None
    # broker rows: the embedded seglog row doing the same work, and the loopback limit
    vs_embedded: str | None = None
    vs_loopback: str | None = None
    target: Targets | None = None
    runs_p99_us: list[float] = field(default_factory=list)  # p99 latency per run (broker latency)
    counters: dict[str, int] | None = None  # the broker's own counters over the case's runs
    # filled by finish()
    value: float | None = None  # median records/s, or median us
    mb_s: float | None = None
    ratio_kp: float | None = None
    ratio_sqlite: float | None = None
    ratio_naive: float | None = None
    ratio_embedded: float | None = None  # records/s over the embedded row's
    ratio_loopback: float | None = None  # MB/s over the loopback row's
    met: bool | None = None
    note: str = ""

    def finish(self) -> None:
        if self.unit == "us":
            self.value = statistics.median(self.runs_us)
            if self.runs_p99_us:
                self.p99_us = statistics.median(self.runs_p99_us)
        else:
            secs = statistics.median(self.runs_ns) / 1e9
            self.value = self.records / secs
            if self.stored_bytes:
                self.mb_s = self.stored_bytes / secs / 1e6


class Report:
    """A run's results by id: each printed as it is added, then compared with its
    baselines and target."""

    def __init__(self) -> None:
        self.results: dict[str, Result] = {}

    def add(self, r: Result) -> Result:
        r.finish()
        self.results[r.id] = r
        shown = f"{r.value:,.2f} {US}" if r.unit == "us" else f"{r.value:,.0f} records/s"
        if r.runs_p99_us:
            shown += f", p99 {r.p99_us:,.0f} {US}"
        runs = len(r.runs_us) if r.unit == "us" else len(r.runs_ns)
        print(f"  {r.id:4} {r.case}: {shown} (median of {runs})", file=sys.stderr, flush=True)
        return r

    def compare(self) -> None:
        rs = self.results

        def ratio(r: Result, ref: str | None) -> float | None:
            b = rs.get(ref) if ref else None
            if b is None or not b.value or not r.value:
                return None
            # >1 means seglog is better: higher throughput, or lower latency.
            return b.value / r.value if r.unit == "us" else r.value / b.value

        for r in rs.values():
            r.ratio_kp = ratio(r, r.vs_kp)
            r.ratio_naive = ratio(r, r.vs_naive)
            r.ratio_sqlite = ratio(r, r.vs_sqlite)
            r.ratio_embedded = ratio(r, r.vs_embedded)
            lb = rs.get(r.vs_loopback) if r.vs_loopback else None
            if lb is not None and lb.mb_s and r.mb_s:
                r.ratio_loopback = r.mb_s / lb.mb_s
            if r.value is None or r.target is None:
                continue
            verdicts, notes = [], []
            for t in target_list(r.target):
                ok, note = self._met(r, t)
                if ok is not None:
                    verdicts.append(ok)
                if note:
                    notes.append(note)
            r.met = all(verdicts) if verdicts else None
            r.note = ", ".join(notes)

    def _met(self, r: Result, t: Target) -> tuple[bool | None, str]:
        """Whether ``r`` meets ``t``, and what it achieved against a reference row."""
        assert r.value is not None
        if t.kind == "min_rate":
            return r.value >= t.value, ""
        if t.kind == "max_us":
            return r.value <= t.value, ""
        if t.kind == "max_p99_us":
            return r.p99_us is not None and r.p99_us <= t.value, ""
        ref = self.results.get(t.ref or "")
        if ref is None or not ref.value:
            return None, f"no {t.ref}"
        if t.kind == "faster_than":
            share = ref.value / r.value
            return share >= t.value, f"{share:.2f}x faster than {t.ref}"
        share = r.value / ref.value
        return share >= t.value, (f"{share:.2f}x {t.ref}" if t.value >= 1 else f"{share:.0%} of {t.ref}")


class Bench:
    def __init__(self, root: Path, repeats: int, data: Data, report: Report) -> None:
        self.root = root
        self.repeats = repeats
        self.data = data
        self.report = report

    def fresh_dir(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="case-", dir=self.root))

    def timed(
        self,
        result: Result,
        setup: Callable[[int], Any],
        body: Callable[[Any, int], None],
        finish: Callable[[Any, int], int],
        warmup_n: int | None = None,
    ) -> Result:
        """Produce-style case: every run (a smaller warm-up first) gets a fresh
        ``setup(n)`` (which also prepares the inputs, untimed); ``body(ctx, n)`` is
        timed; ``finish(ctx, n)`` checks, closes, cleans up and returns the bytes stored."""
        n = result.records
        wn = warmup_n if warmup_n is not None else max(n // 10, 1000)
        ctx = setup(wn)
        t0 = time.perf_counter()
        body(ctx, wn)
        warm_s = time.perf_counter() - t0
        finish(ctx, wn)
        for _ in range(self.runs_for(warm_s * n / wn)):
            ctx = setup(n)
            os.sync()  # earlier runs' writeback and discards, out of the timed region
            gc.collect()
            t0 = time.perf_counter_ns()
            body(ctx, n)
            t1 = time.perf_counter_ns()
            result.stored_bytes = finish(ctx, n)
            result.runs_ns.append(t1 - t0)
        return self.report.add(result)

    def timed_reads(
        self,
        result: Result,
        setup: Callable[[], Any],
        body: Callable[[Any], int],
        finish: Callable[[Any], int],
        count: Callable[[Any, int], int] | None = None,
    ) -> Result:
        """Consume-style case: one populated ``setup()``, one warm-up pass, then
        ``repeats`` timed passes of ``body(ctx)`` (which returns the records seen, or
        what ``count(ctx, returned)`` turns into them after the clock has stopped)."""
        seen_by = count or (lambda _ctx, seen: seen)
        ctx = setup()
        try:
            t0 = time.perf_counter()
            self._check_count(result, seen_by(ctx, body(ctx)))
            warm_s = time.perf_counter() - t0
            for _ in range(self.runs_for(warm_s)):
                gc.collect()
                t0 = time.perf_counter_ns()
                seen = body(ctx)
                t1 = time.perf_counter_ns()
                self._check_count(result, seen_by(ctx, seen))
                result.runs_ns.append(t1 - t0)
        finally:
            result.stored_bytes = finish(ctx)
        return self.report.add(result)

    def timed_lookups(
        self,
        result: Result,
        setup: Callable[[], Any],
        lookup: Callable[[Any, int], Any],
        finish: Callable[[Any], int],
    ) -> Result:
        """Random lookups: ``lookup(ctx, offset)`` returns the record's key, timed one
        by one; the median of each run of 10,000, then the median of the runs."""
        d = self.data
        ctx = setup()
        pc = time.perf_counter_ns
        try:
            for o in d.warm_lookups:
                lookup(ctx, o)
            pooled: list[int] = []
            for _ in range(self.repeats):
                gc.collect()
                lat = []
                for o in d.lookups:
                    t0 = pc()
                    key = lookup(ctx, o)
                    t1 = pc()
                    lat.append(t1 - t0)
                    if key != d.keys[o]:
                        raise AssertionError(f"{result.id}: lookup of offset {o} returned key {key!r}")
                result.runs_us.append(statistics.median(lat) / 1e3)
                pooled += lat
            pooled.sort()
            result.p99_us = pooled[int(len(pooled) * 0.99)] / 1e3
        finally:
            finish(ctx)
        return self.report.add(result)

    def runs_for(self, run_s: float) -> int:
        """``repeats`` timed runs, but fewer (never under MIN_REPEATS) when runs of
        about ``run_s`` seconds would take the case past CASE_BUDGET_S."""
        if run_s * self.repeats <= CASE_BUDGET_S:
            return self.repeats
        return max(min(self.repeats, MIN_REPEATS), min(self.repeats, int(CASE_BUDGET_S / max(run_s, 1e-9))))

    @staticmethod
    def _check_count(result: Result, seen: int) -> None:
        if seen != result.records:
            raise AssertionError(f"{result.id}: read {seen} records, expected {result.records}")


def run_threads(slices: Sequence[tuple[int, int]], fn: Callable[[int, int, int], None]) -> None:
    """``fn(thread_index, lo, hi)`` on one thread per slice; re-raises the first error."""
    errors: list[BaseException] = []

    def worker(i: int, lo: int, hi: int) -> None:
        try:
            fn(i, lo, hi)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i, *s)) for i, s in enumerate(slices)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
