#!/usr/bin/env python3
"""seglog's benchmark suite: produce, consume and random lookups, against baselines
doing the same work in the same run, and against the machine's own limits.

    .venv/bin/python benches/run.py            # 1,000,000 records (about 5 minutes)
    .venv/bin/python benches/run.py --quick    # 100,000 records

Records have 8-byte keys and 100-byte values. Every case runs on a fresh directory
under a temporary directory on the local disk (never tmpfs), is warmed up once, is
timed ``--repeat`` times with ``time.perf_counter_ns`` and reported as the median.

seglog is measured through ``seglog.Producer`` / ``seglog.Consumer`` when the
package has them; otherwise through ``Store`` calls standing in for them, labelled
``[Store stand-in]`` in every table, chart and JSON record.

Baselines, doing the same work:
  kafka-python  the same Kafka format in pure Python: ``DefaultRecordBatchBuilder``
                batches of 16 KiB written with ``os.write`` (``os.fdatasync`` per
                batch for acks=all), read back with ``MemoryRecords`` (1 MiB
                ``os.read`` chunks), random lookups by an in-memory offset index +
                ``os.pread`` + ``DefaultRecordBatch`` parse. CRCs are computed on write
                (with the C ``crc32c`` module when installed) and not checked on read
                (a favour to the baseline: seglog checks every batch it reads).
  sqlite        ``sqlite3`` in WAL mode, table ("offset" INTEGER PRIMARY KEY, key BLOB,
                value BLOB); synchronous=NORMAL (no fsync per commit) for acks=1,
                synchronous=FULL for acks=all; one commit per batch-equivalent
                (the number of records in a 16 KiB batch) for per-record inserts,
                ``executemany`` of 10,000 records per transaction for bulk.

Output: markdown tables on stdout, ``benches/results/latest.json`` and
``docs/bench.png``.
"""

from __future__ import annotations

import argparse
import bisect
import gc
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS_JSON = HERE / "results" / "latest.json"
CHART_PNG = ROOT / "docs" / "bench.png"

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


seglog = _import_seglog()
HAS_PRODUCER = hasattr(seglog, "Producer")
HAS_CONSUMER = hasattr(seglog, "Consumer")
STANDIN = "[Store stand-in] "


# --------------------------------------------------------------------------- data


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


def _new_builder() -> DefaultRecordBatchBuilder:
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
    b = _new_builder()
    n = 0
    while b.append(n, None, key, value, ()) is not None:
        n += 1
    return n


# --------------------------------------------------------------------- results


@dataclass
class Target:
    kind: str  # "min_rate" (records/s), "max_us", "ratio_of" (rate >= value * rate of ref)
    value: float
    ref: str | None = None

    def text(self) -> str:
        if self.kind == "min_rate":
            return f">= {self.value:,.0f}/s"
        if self.kind == "max_us":
            return f"<= {self.value:g} {US}"
        return f">= {self.value:.0%} of {self.ref}"


@dataclass
class Result:
    id: str
    group: str  # produce, consume, lookup, machine
    impl: str  # seglog, seglog-standin, kafka-python, sqlite, machine
    case: str
    unit: str  # "records/s" or "us"
    records: int
    runs_ns: list[int] = field(default_factory=list)  # wall time per timed run
    runs_us: list[float] = field(default_factory=list)  # median latency per run (lookups)
    p99_us: float | None = None
    stored_bytes: int | None = None  # bytes written/read by the case
    vs_kp: str | None = None  # ids of the baselines this row is compared with
    vs_sqlite: str | None = None
    target: Target | None = None
    # filled by finish()
    value: float | None = None  # median records/s, or median us
    mb_s: float | None = None
    ratio_kp: float | None = None
    ratio_sqlite: float | None = None
    met: bool | None = None
    note: str = ""

    def finish(self) -> None:
        if self.unit == "us":
            self.value = statistics.median(self.runs_us)
        else:
            secs = statistics.median(self.runs_ns) / 1e9
            self.value = self.records / secs
            if self.stored_bytes:
                self.mb_s = self.stored_bytes / secs / 1e6


class Report:
    def __init__(self) -> None:
        self.results: dict[str, Result] = {}

    def add(self, r: Result) -> Result:
        r.finish()
        self.results[r.id] = r
        shown = f"{r.value:,.2f} {US}" if r.unit == "us" else f"{r.value:,.0f} records/s"
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
            r.ratio_sqlite = ratio(r, r.vs_sqlite)
            t = r.target
            if t is None or r.value is None:
                continue
            if t.kind == "min_rate":
                r.met = r.value >= t.value
            elif t.kind == "max_us":
                r.met = r.value <= t.value
            elif t.ref in rs and rs[t.ref].value:
                share = r.value / rs[t.ref].value
                r.met = share >= t.value
                r.note = f"{share:.0%} of {t.ref}"


# ---------------------------------------------------------------- timing harness


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
    ) -> Result:
        """Consume-style case: one populated ``setup()``, one warm-up pass, then
        ``repeats`` timed passes of ``body(ctx)`` (which returns the records seen)."""
        ctx = setup()
        try:
            t0 = time.perf_counter()
            self._check_count(result, body(ctx))
            warm_s = time.perf_counter() - t0
            for _ in range(self.runs_for(warm_s)):
                gc.collect()
                t0 = time.perf_counter_ns()
                seen = body(ctx)
                t1 = time.perf_counter_ns()
                self._check_count(result, seen)
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


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ------------------------------------------------------------------------ seglog


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
    _rmtree(ctx.path)
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


# A seglog produce case: (prepare(n) -> inputs or None, body(ctx, n)).
SegCase = tuple[Callable[[int], Any] | None, Callable[[SegCtx, int], None]]


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


def store_append_one_per_call(d: Data) -> SegCase:
    def body(ctx: SegCtx, n: int) -> None:
        append, keys, values = ctx.store.append, d.keys, d.values
        for i in range(n):
            append(TOPIC, 0, [(keys[i], values[i])])

    return None, body


def store_append_chunks(d: Data, durable: bool, threads: int) -> SegCase:
    """Store.append() of one 16 KiB batch worth of (key, value) tuples per call."""

    def prepare(n: int) -> list[list[tuple[bytes, bytes]]]:
        return _chunks(d, n, d.per_batch)

    def body(ctx: SegCtx, n: int) -> None:
        chunks, append = ctx.inputs, ctx.store.append

        def part(_i: int, lo: int, hi: int) -> None:
            for c in chunks[lo:hi]:
                append(TOPIC, 0, c, durable=durable)

        if threads == 1:
            part(0, 0, len(chunks))
        else:
            run_threads(d.slices(len(chunks), threads), part)

    return prepare, body


# ------------------------------------------------------------------ kafka-python


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
    b = _new_builder()
    count = 0
    for i in range(lo, hi):
        if b.append(count, None, keys[i], values[i], ()) is None:
            log.write(b.build(), count)
            b = _new_builder()
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
    _rmtree(ctx.path)
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


# ------------------------------------------------------------------------ sqlite

SQL_CREATE = 'CREATE TABLE IF NOT EXISTS log ("offset" INTEGER PRIMARY KEY, key BLOB, value BLOB)'
SQL_INSERT = "INSERT INTO log (key, value) VALUES (?, ?)"  # sqlite assigns the offset (rowid)


def sq_connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=600)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(SQL_CREATE)
    return conn


@dataclass
class SqCtx:
    path: Path
    db: Path
    conn: sqlite3.Connection
    pool: list[sqlite3.Connection] = field(default_factory=list)  # one per writer thread


def sq_setup(b: Bench, synchronous: str, threads: int = 1) -> SqCtx:
    path = b.fresh_dir()
    db = path / "log.db"
    ctx = SqCtx(path, db, sq_connect(db, synchronous))
    if threads > 1:
        ctx.pool = [sq_connect(db, synchronous) for _ in range(threads)]
    return ctx


def sq_finish(ctx: SqCtx, n: int | None = None) -> int:
    if n is not None:
        (count,) = ctx.conn.execute("SELECT count(*) FROM log").fetchone()
        if count != n:
            raise AssertionError(f"sqlite table holds {count} rows, expected {n}")
    size = sum(p.stat().st_size for p in ctx.path.iterdir() if p.name.startswith("log.db"))
    for c in ctx.pool:
        c.close()
    ctx.conn.close()
    _rmtree(ctx.path)
    return size


def sq_insert_range(conn: sqlite3.Connection, d: Data, lo: int, hi: int) -> None:
    """One INSERT per record, a commit per batch-equivalent (records per 16 KiB batch)."""
    ex, keys, values, per = conn.execute, d.keys, d.values, d.per_batch
    for start in range(lo, hi, per):
        ex("BEGIN IMMEDIATE")
        for i in range(start, min(start + per, hi)):
            ex(SQL_INSERT, (keys[i], values[i]))
        ex("COMMIT")


def sq_bulk(conn: sqlite3.Connection, d: Data, n: int) -> None:
    """executemany, CHUNK records per transaction."""
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        conn.execute("BEGIN")
        conn.executemany(SQL_INSERT, zip(d.keys[lo:hi], d.values[lo:hi], strict=True))
        conn.execute("COMMIT")


def sq_body(d: Data, threads: int, bulk: bool) -> Callable[[SqCtx, int], None]:
    def body(ctx: SqCtx, n: int) -> None:
        if bulk:
            sq_bulk(ctx.conn, d, n)
        elif threads == 1:
            sq_insert_range(ctx.conn, d, 0, n)
        else:
            run_threads(d.slices(n, threads), lambda i, lo, hi: sq_insert_range(ctx.pool[i], d, lo, hi))

    return body


def sq_populate(b: Bench) -> SqCtx:
    ctx = sq_setup(b, "NORMAL")
    sq_bulk(ctx.conn, b.data, b.data.n)
    ctx.conn.close()
    ctx.conn = sq_connect(ctx.db, "NORMAL")
    return ctx


def sq_consume(ctx: SqCtx) -> int:
    n = 0
    for _offset, _key, _value in ctx.conn.execute('SELECT "offset", key, value FROM log ORDER BY "offset"'):
        n += 1
    return n


def sq_lookup(ctx: SqCtx, offset: int) -> bytes:
    # rowids start at 1: the record at log offset o is row o + 1
    row = ctx.conn.execute('SELECT key, value FROM log WHERE "offset" = ?', (offset + 1,)).fetchone()
    return row[0]  # type: ignore[no-any-return]


# ----------------------------------------------------------------------- groups


def produce_group(b: Bench) -> None:
    d, n = b.data, b.data.n
    per = d.per_batch
    print(f"produce ({n:,} records)", file=sys.stderr)

    def seg(result: Result, case: SegCase) -> None:
        prepare, body = case
        b.timed(result, lambda m: seg_setup(b, prepare(m) if prepare else None), body, seg_finish)

    def res(id: str, impl: str, case: str, vs_kp: str, vs_sq: str, target: Target | None = None) -> Result:
        return Result(id, "produce", impl, case, "records/s", n, vs_kp=vs_kp, vs_sqlite=vs_sq, target=target)

    send_t = Target("min_rate", 2_000_000)
    batch_t = Target("min_rate", 10_000_000)
    all_t = Target("ratio_of", 0.30, "S4")  # acks=all vs acks=1, both from THREADS threads
    if HAS_PRODUCER:
        impl = "seglog"
        seg(
            res("S1", impl, "seglog Producer.send(), acks=1, 1 record/call", "K1", "Q1", send_t),
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
            res("S3", impl, 'seglog Producer.send(), acks="all", 1 thread', "K2", "Q3"),
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
    else:
        impl = "seglog-standin"
        seg(
            res("S1", impl, STANDIN + "Store.append(), 1 record/call (for send())", "K1", "Q1", send_t),
            store_append_one_per_call(d),
        )
        seg(
            res(
                "S2",
                impl,
                STANDIN + f"Store.append(), {per} records/call (for send_batch())",
                "K1",
                "Q2",
                batch_t,
            ),
            store_append_chunks(d, durable=False, threads=1),
        )
        seg(
            res(
                "S3",
                impl,
                STANDIN + f"Store.append(durable=True), {per}/call, 1 thread (for acks=all)",
                "K2",
                "Q3",
            ),
            store_append_chunks(d, durable=True, threads=1),
        )
        seg(
            res(
                "S4",
                impl,
                STANDIN + f"Store.append(), {per}/call, {THREADS} threads (for acks=1)",
                "K3",
                "Q4",
            ),
            store_append_chunks(d, durable=False, threads=THREADS),
        )
        seg(
            res(
                "S5",
                impl,
                STANDIN + f"Store.append(durable=True), {per}/call, {THREADS} threads (for acks=all)",
                "K4",
                "Q5",
                all_t,
            ),
            store_append_chunks(d, durable=True, threads=THREADS),
        )

    def base(id: str, impl: str, case: str) -> Result:
        return Result(id, "produce", impl, case, "records/s", n)

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


def _consumer(store: Any, **config: Any) -> Any:
    return seglog.Consumer(
        store, TOPIC, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0, **config
    )


def consume_group(b: Bench) -> None:
    n = b.data.n
    print(f"consume ({n:,} records)", file=sys.stderr)

    def close_store(ctx: SegCtx) -> int:
        return seg_finish(ctx)

    if HAS_CONSUMER:

        def iterate(ctx: SegCtx) -> int:
            c = _consumer(ctx.store)
            seen = 0
            for r in c:
                r.offset, r.key, r.value  # noqa: B018
                seen += 1
            c.close()
            return seen

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
                "seglog: for record in Consumer",
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
    else:

        def read_loop(ctx: SegCtx) -> int:
            read, store = ctx.store.read, ctx.store
            offset, end = store.offsets(TOPIC, 0)
            seen = 0
            while offset < end:
                records = read(TOPIC, 0, offset)
                for r in records:
                    r.offset, r.key, r.value  # noqa: B018
                seen += len(records)
                offset = records[-1].offset + 1
            return seen

        b.timed_reads(
            Result(
                "C1",
                "consume",
                "seglog-standin",
                STANDIN + "Store.read() 1 MiB loop, every record (for Consumer iteration)",
                "records/s",
                n,
                vs_kp="K5",
                vs_sqlite="Q6",
                target=Target("min_rate", 2_000_000),
            ),
            lambda: seg_populate(b),
            read_loop,
            close_store,
        )
        print("  C2   Consumer.poll_arrow: not measured (seglog.Consumer not available)", file=sys.stderr)

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


def lookup_group(b: Bench) -> None:
    n = b.data.n
    print(f"random lookups ({LOOKUPS:,} over {n:,} records)", file=sys.stderr)

    def store_read(ctx: SegCtx, offset: int) -> bytes | None:
        return ctx.store.read(TOPIC, 0, offset, max_bytes=1, max_records=1)[0].key  # type: ignore[no-any-return]

    impl = "seglog" if HAS_PRODUCER or HAS_CONSUMER else "seglog-standin"
    b.timed_lookups(
        Result(
            "L1",
            "lookup",
            impl,
            "seglog Store.read(topic, 0, offset, max_bytes=1, max_records=1)",
            "us",
            LOOKUPS,
            vs_kp="K6",
            vs_sqlite="Q7",
            target=Target("max_us", 5),
        ),
        lambda: seg_populate(b),
        store_read,
        seg_finish,
    )
    if HAS_CONSUMER:

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
                target=Target("max_us", 5),
            ),
            setup,
            seek_poll,
            finish,
        )
        # The same with a fetch size of one batch (kafka-python's config name): poll()
        # otherwise reads and decodes max_partition_fetch_bytes (1 MiB) per lookup.
        try:
            _assigned_consumer(None, probe=True, max_partition_fetch_bytes=1)
        except (TypeError, ValueError, seglog.SeglogError):
            print("  L3   Consumer(max_partition_fetch_bytes=1): not supported", file=sys.stderr)
        else:
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
                    target=Target("max_us", 5),
                ),
                lambda: setup(max_partition_fetch_bytes=1),
                seek_poll,
                finish,
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


def _assigned_consumer(store: Any, probe: bool = False, **config: Any) -> tuple[Any, Any]:
    """A Consumer assigned to partition 0 (per the contract: assign, then seek).
    With ``probe``, only checks that the Consumer takes ``config`` (on a scratch store)."""
    if probe:
        with tempfile.TemporaryDirectory() as tmp, seglog.open(tmp) as scratch:
            scratch.create_topic(TOPIC)
            seglog.Consumer(scratch, group_id=None, **config).close()
        return None, None
    tp = (TOPIC, 0)
    try:
        c = seglog.Consumer(
            store, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0, **config
        )
    except TypeError:  # topics may be a required argument
        c = _consumer(store, **config)
    c.assign([tp])
    return c, tp


def machine_group(b: Bench, nbytes: int) -> None:
    n = b.data.n
    print(f"machine limits ({nbytes:,} bytes)", file=sys.stderr)
    block = random.Random(7).randbytes(MIB)

    def setup(_n: int = 0) -> tuple[Path, int]:
        path = b.fresh_dir()
        return path, os.open(path / "seq", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(ctx: tuple[Path, int], sync: bool) -> None:
        fd = ctx[1]
        left = nbytes
        while left > 0:
            left -= os.write(fd, block if left >= MIB else block[:left])
        if sync:
            os.fdatasync(fd)

    def finish(ctx: tuple[Path, int], _n: int) -> int:
        size = os.fstat(ctx[1]).st_size
        os.close(ctx[1])
        _rmtree(ctx[0])
        return size

    b.timed(
        Result("M1", "machine", "machine", "sequential os.write, 1 MiB blocks (page cache)", "records/s", n),
        setup,
        lambda ctx, _n: write(ctx, False),
        finish,
        warmup_n=n,
    )
    b.timed(
        Result(
            "M2", "machine", "machine", "sequential os.write, 1 MiB blocks, + os.fdatasync", "records/s", n
        ),
        setup,
        lambda ctx, _n: write(ctx, True),
        finish,
        warmup_n=n,
    )

    def read_setup() -> tuple[Path, int]:
        ctx = setup()
        write(ctx, True)
        return ctx

    def read_all(ctx: tuple[Path, int]) -> int:
        fd = ctx[1]
        os.lseek(fd, 0, os.SEEK_SET)
        total = 0
        while chunk := os.read(fd, MIB):
            total += len(chunk)
        if total != nbytes:
            raise AssertionError(f"read {total} bytes, expected {nbytes}")
        return n

    b.timed_reads(
        Result("M3", "machine", "machine", "sequential os.read, 1 MiB blocks (page cache)", "records/s", n),
        read_setup,
        read_all,
        lambda ctx: finish(ctx, 0),
    )

    # fdatasync latency after a small write, median of 50 per run
    small = block[:4096]
    r = Result("M4", "machine", "machine", "os.fdatasync after a 4 KiB write (median of 50)", "us", 50)
    ctx = setup()
    try:
        for _ in range(5):
            os.write(ctx[1], small)
            os.fdatasync(ctx[1])
        pooled = []
        for _ in range(b.repeats):
            lat = []
            for _ in range(50):
                os.write(ctx[1], small)
                t0 = time.perf_counter_ns()
                os.fdatasync(ctx[1])
                lat.append(time.perf_counter_ns() - t0)
            r.runs_us.append(statistics.median(lat) / 1e3)
            pooled += lat
        pooled.sort()
        r.p99_us = pooled[int(len(pooled) * 0.99)] / 1e3
    finally:
        finish(ctx, 0)
    b.report.add(r)


# ----------------------------------------------------------------------- output

GROUPS = [
    ("produce", "Produce"),
    ("consume", "Consume (page cache)"),
    ("lookup", f"Random lookups ({LOOKUPS:,}, median per lookup)"),
    ("machine", "Machine limits (same byte count as the seglog log)"),
]


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.2f}x" if x >= 0.1 else f"{x:.2g}x"


def tables(rep: Report) -> str:
    out = []
    for group, title in GROUPS:
        rows = [r for r in rep.results.values() if r.group == group]
        if not rows:
            continue
        unit = f"median {US}" if group == "lookup" else "records/s"
        if group == "machine":
            unit = f"records/s equiv. (or {US})"
        out.append(f"### {title}\n")
        out.append(f"| case | {unit} | MB/s | vs kafka-python | vs sqlite | target | met? |")
        out.append("|---|---:|---:|---:|---:|---|---|")
        for r in rows:
            assert r.value is not None
            if r.unit == "us":
                val = f"{r.value:,.2f} {US}"
                if r.p99_us is not None:
                    val += f" (p99 {r.p99_us:,.0f})"
            else:
                val = f"{r.value:,.0f}"
            mb = "—" if r.mb_s is None else f"{r.mb_s:,.1f}"
            target = r.target.text() if r.target else "—"
            met = "—" if r.met is None else ("yes" if r.met else "**no**")
            if r.note:
                met += f" ({r.note})"
            case = f"{r.id} {r.case}"
            out.append(
                f"| {case} | {val} | {mb} | {_fmt_ratio(r.ratio_kp)} | {_fmt_ratio(r.ratio_sqlite)} "
                f"| {target} | {met} |"
            )
        out.append("")
    return "\n".join(out)


def notes(rep: Report) -> list[str]:
    rs = rep.results
    lines = []

    def v(i: str) -> float | None:
        return rs[i].value if i in rs else None

    def mb(i: str) -> float | None:
        return rs[i].mb_s if i in rs else None

    if (s2 := mb("S2")) and (m1 := mb("M1")):
        lines.append(f"- S2 writes at {s2 / m1:.0%} of the sequential page-cache write bandwidth (M1).")
    if (c1 := mb("C2") or mb("C1")) and (m3 := mb("M3")):
        lines.append(
            f"- the fastest seglog consume reads at {c1 / m3:.0%} of sequential page-cache read (M3)."
        )
    if (s5 := v("S5")) and (s1 := v("S1")):
        lines.append(f"- S5 (acks=all, {THREADS} threads) is {s5 / s1:.0%} of S1 (acks=1, 1 thread).")
    if (s3 := v("S3")) and (m4 := v("M4")):
        per_sync = s3 * m4 / 1e6
        lines.append(
            f"- S3 (acks=all, 1 thread): {s3:,.0f} records/s is {per_sync:,.0f} records "
            "per fdatasync latency (M4)."
        )
    return lines


def chart(rep: Report, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "seglog": "#1f77b4",
        "seglog-standin": "#7fb3e0",
        "kafka-python": "#ff7f0e",
        "sqlite": "#2ca02c",
        "machine": "#7f7f7f",
    }
    panels = [
        ("produce", "Produce: records/s (higher is better)", lambda r: r.value, ["M1", "M2"]),
        ("consume", "Consume: records/s (higher is better)", lambda r: r.value, ["M3"]),
        ("lookup", f"Random lookup: median {US} (lower is better)", lambda r: r.value, ["M4"]),
        ("machine", "Machine: MB/s", lambda r: r.mb_s, []),
    ]
    heights = []
    for group, _, _, extra in panels:
        heights.append(max(2, sum(1 for r in rep.results.values() if r.group == group) + len(extra)))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 0.42 * sum(heights) + 3), height_ratios=heights)
    for ax, (group, label, val, extra) in zip(axes, panels, strict=True):
        rows = [r for r in rep.results.values() if r.group == group and val(r)]
        rows += [rep.results[i] for i in extra if i in rep.results]
        names = [f"{r.id} {r.case}" if r.group == group else f"{r.id} (machine) {r.case}" for r in rows]
        values = [val(r) if r.group == group or group == "lookup" else r.value for r in rows]
        ys = list(range(len(rows)))[::-1]
        ax.barh(ys, values, color=[colors[r.impl] for r in rows])
        for y, r, x in zip(ys, rows, values, strict=True):
            ax.text(x, y, f" {x:,.0f}" if x >= 100 else f" {x:,.2f}", va="center", fontsize=7)
            t = r.target
            if t is not None and t.kind in ("min_rate", "max_us") and r.group == group:
                ax.plot([t.value], [y], marker="|", color="red", markersize=14, mew=2)
        ax.set_yticks(ys, [nm[:78] for nm in names], fontsize=7)
        ax.set_xscale("log")
        ax.set_title(label, fontsize=9, loc="left")
        ax.grid(axis="x", which="both", alpha=0.3)
    present = [impl for impl in colors if any(r.impl == impl for r in rep.results.values())]
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[impl]) for impl in present]
    fig.legend(handles, present, loc="upper right", fontsize=7, ncol=5)
    fig.suptitle(title + "   (red | = target)", fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------- main


def _fs_type(path: Path) -> str:
    best, fstype = "", "?"
    real = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fstype = mnt, parts[2]
    return fstype


def bench_root(requested: str | None) -> Path:
    base = Path(requested) if requested else Path(tempfile.gettempdir())
    if _fs_type(base) in ("tmpfs", "ramfs") and not requested:
        base = Path("/var/tmp")
    if _fs_type(base) in ("tmpfs", "ramfs"):
        raise SystemExit(f"{base} is in memory ({_fs_type(base)}); pass --dir on a real disk")
    return Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=base))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000, help="records per case (default 1,000,000)")
    ap.add_argument("--quick", action="store_true", help="100,000 records")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per case, median reported (default 5)")
    ap.add_argument(
        "--prefault",
        type=float,
        default=2.0,
        help="GiB of memory to touch and free first, so page-cache writes do not pay a VM's "
        "first-touch cost for fresh guest memory (default 2; 0 to skip)",
    )
    ap.add_argument("--dir", help="where to put the temporary stores (a local disk; default: the temp dir)")
    ap.add_argument("--json", type=Path, default=RESULTS_JSON)
    ap.add_argument("--png", type=Path, default=CHART_PNG)
    ap.add_argument("--only", default="produce,consume,lookup,machine", help="groups to run")
    args = ap.parse_args(argv)
    n = 100_000 if args.quick else args.records
    groups = set(args.only.split(","))

    started = time.monotonic()
    load_before = _cpu_busy()
    cpu0 = _cpu_ticks()
    root = bench_root(args.dir)
    prefault_s = prefault(args.prefault)
    prefault_note = (
        f"{args.prefault:g} GiB of memory touched and freed first ({prefault_s:.1f} s)"
        if args.prefault > 0
        else "no memory prefault"
    )
    api = (
        "seglog.Producer / seglog.Consumer"
        if HAS_PRODUCER and HAS_CONSUMER
        else "Store stand-ins ([Store stand-in] rows): seglog.Producer/Consumer not in this build"
        if not (HAS_PRODUCER or HAS_CONSUMER)
        else f"mixed: Producer={HAS_PRODUCER}, Consumer={HAS_CONSUMER}"
    )
    print(
        f"seglog {seglog.__version__}; API measured: {api}; work dir {root} ({_fs_type(root)})",
        file=sys.stderr,
    )
    data = Data(n)
    report = Report()
    b = Bench(root, args.repeat, data, report)
    try:
        if "produce" in groups:
            produce_group(b)
        if "consume" in groups:
            consume_group(b)
        if "lookup" in groups:
            lookup_group(b)
        if "machine" in groups:
            ctx = seg_populate(b)
            log_bytes = int(ctx.store.describe(TOPIC).partitions[0].size_bytes)
            seg_finish(ctx)
            machine_group(b, log_bytes)
    finally:
        _rmtree(root)
    report.compare()
    elapsed = time.monotonic() - started
    other = _other_cpu(cpu0, elapsed)
    busy = (
        " **(other work was using the CPUs: figures may be low)**" if max(load_before, other) > 0.15 else ""
    )

    header = (
        f"## seglog benchmarks: {n:,} records ({KEY_BYTES}-byte keys, {VALUE_BYTES}-byte values), "
        f"median of {args.repeat} runs ({MIN_REPEATS} for cases whose runs take long)\n\n"
        f"- seglog {seglog.__version__}, API measured: **{api}**\n"
        f"- kafka-python {_version('kafka-python')} (CRC-32C: {_crc_impl()}), "
        f"SQLite {sqlite3.sqlite_version}, Python {platform.python_version()}\n"
        f"- {os.cpu_count()} CPUs, {_mem_gib():.0f} GiB, stores on {_fs_type(root)} "
        f"({root.parent}); {data.per_batch} records per 16 KiB batch; "
        f"CPU used by other work: {load_before:.0%} just before the run, about {other:.0%} "
        f"during it{busy}; "
        f"{prefault_note}\n"
        f"- tree: {_git_rev()}\n"
        "- ratios: >1 means seglog is better (throughput ratio; baseline/seglog latency for lookups); "
        "MB/s = bytes stored (log or database files) / time\n"
    )
    text = header + "\n" + tables(report)
    extra = notes(report)
    if extra:
        text += "\nNotes:\n" + "\n".join(extra) + "\n"
    text += f"\n(run took {elapsed:,.0f} s)\n"
    print(text)

    args.json.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "records": n,
        "key_bytes": KEY_BYTES,
        "value_bytes": VALUE_BYTES,
        "repeats": args.repeat,
        "api": api,
        "has_producer": HAS_PRODUCER,
        "has_consumer": HAS_CONSUMER,
        "seglog_version": seglog.__version__,
        "kafka_python_version": _version("kafka-python"),
        "crc32c": _crc_impl(),
        "sqlite_version": sqlite3.sqlite_version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mem_gib": round(_mem_gib(), 1),
        "fs": _fs_type(root),
        "records_per_batch": data.per_batch,
        "cpu_busy_before": round(load_before, 3),
        "cpu_other_during": round(other, 3),
        "prefault_gib": args.prefault,
        "git": _git_rev(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "elapsed_s": round(elapsed, 1),
    }
    args.json.write_text(
        json.dumps({"meta": meta, "results": [asdict(r) for r in report.results.values()]}, indent=1) + "\n"
    )
    md = args.json.with_suffix(".md")
    md.write_text(text)
    try:
        chart(report, args.png, f"seglog {seglog.__version__}: {n:,} records, {api}")
    except ImportError as e:
        print(f"no chart: {e} (install matplotlib)", file=sys.stderr)
    print(f"wrote {args.json}, {md} and {args.png}", file=sys.stderr)
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _crc_impl() -> str:
    from kafka.record import util

    return "C crc32c module" if getattr(util, "crc32c_c", None) is not None else "pure Python"


def prefault(gib: float) -> float:
    """Touch ``gib`` GiB of fresh memory and free it; returns the seconds it took.

    On a virtual machine, the first write to a guest page the host has not backed
    yet costs far more than a normal page fault (about 3 ms per MB measured here,
    against microseconds): page-cache writes landing on such pages run 5-10x slower
    than on pages used before, which makes write figures swing from run to run. The
    freed pages go back to the kernel's free lists and serve the page cache next.
    """
    if gib <= 0:
        return 0.0
    t0 = time.perf_counter()
    buf = bytearray(int(gib * (1 << 30)))
    view = memoryview(buf)
    for i in range(0, len(buf), 4096):
        view[i] = 1
    del view, buf
    return time.perf_counter() - t0


def _cpu_busy(seconds: float = 1.0) -> float:
    """The fraction of all CPUs' time spent busy over ``seconds`` (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields[:8]), idle

    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
    except OSError:
        return 0.0
    return 1 - (i1 - i0) / max(t1 - t0, 1)


def _cpu_ticks() -> tuple[float, float]:
    """(all CPUs' busy seconds so far, this process's CPU seconds so far)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    busy = sum(fields[:8]) - fields[3] - fields[4]
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system


def _other_cpu(start: tuple[float, float], elapsed: float) -> float:
    """The share of all CPUs' time used outside this process since ``start``
    (kernel threads doing this run's I/O count as outside: a small share is normal)."""
    end = _cpu_ticks()
    other = (end[0] - start[0]) - (end[1] - start[1])
    return max(0.0, other / max(elapsed * (os.cpu_count() or 1), 1e-9))


def _git_rev() -> str:
    import subprocess

    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return rev + (" + uncommitted changes" if dirty else "")


def _mem_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)


if __name__ == "__main__":
    sys.exit(main())
