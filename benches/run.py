#!/usr/bin/env python3
"""seglog's benchmark suite: produce, consume, random lookups and the broker, against
baselines doing the same work in the same run, and against the machine's own limits.

    .venv/bin/python benches/run.py            # 1,000,000 records (about 6 minutes, 2 of
                                               # them the broker rows)
    .venv/bin/python benches/run.py --quick    # 100,000 records

Records have 8-byte keys and 100-byte values. Every case runs on a fresh directory
under a temporary directory on the local disk (never tmpfs), is warmed up once, is
timed ``--repeat`` times with ``time.perf_counter_ns`` and reported as the median.

seglog is measured through ``seglog.Producer`` / ``seglog.Consumer``, and
``Store.read`` for lookups; the broker rows through confluent-kafka against
``seglog serve`` in another process (``cases/broker.py`` says how).

    .venv/bin/python benches/run.py --only broker --quick   # the broker rows alone
    .venv/bin/python benches/run.py --no-broker             # everything else

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
  broker rows   the embedded seglog Producer/Consumer rows (S1, S3, C1), and the
                loopback limit: the same bytes pumped between two processes over
                127.0.0.1 with no per-record work.

Output: markdown tables on stdout, ``benches/results/latest.json`` and
``docs/bench.png``.

This file is the command line; ``harness.py`` times the cases, ``cases/`` holds
them by group, ``baselines/`` the baselines' code and ``report.py`` the output.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cases.broker import broker_group
from cases.consume import consume_group
from cases.lookup import lookup_group
from cases.machine import machine_group
from cases.produce import produce_group
from cases.replication import replication_group
from cases.stores import log_bytes
from environment import bench_root, cpu_busy, cpu_ticks, fs_type, other_cpu, prefault
from harness import Bench, Data, Report, rmtree, seglog
from report import API, CHART_PNG, RESULTS_JSON, Run, write

GROUPS = ("produce", "consume", "lookup", "machine", "broker", "replication")


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
    ap.add_argument(
        "--png",
        type=Path,
        help=f"the chart (default: {CHART_PNG.relative_to(CHART_PNG.parents[1])} for a run of every "
        "group but the broker's and replication's, else benches/results/latest.png)",
    )
    groups_help = f"groups to run, comma-separated (default: {','.join(GROUPS)})"
    ap.add_argument("--only", default=",".join(GROUPS), help=groups_help)
    ap.add_argument("--no-broker", action="store_true", help="skip the broker and replication groups")
    args = ap.parse_args(argv)
    n = 100_000 if args.quick else args.records
    groups = set(args.only.split(","))
    if unknown := groups - set(GROUPS):
        ap.error(f"--only: unknown groups {sorted(unknown)}; expected some of {','.join(GROUPS)}")
    if args.no_broker:
        groups -= {"broker", "replication"}
    if args.png is None:
        # The chart in docs/ is the one the README shows: a run of some groups
        # only leaves it alone.
        whole = set(GROUPS) - {"broker", "replication"} <= groups
        args.png = CHART_PNG if whole else RESULTS_JSON.with_name("latest.png")

    started = time.monotonic()
    load_before = cpu_busy()
    cpu0 = cpu_ticks()
    root = bench_root(args.dir)
    prefault_s = prefault(args.prefault)
    print(
        f"seglog {seglog.__version__}; API measured: {API}; work dir {root} ({fs_type(root)})",
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
            machine_group(b, log_bytes(b))
        if "broker" in groups:
            broker_group(b)
        if "replication" in groups:
            replication_group(b)
    finally:
        rmtree(root)
    report.compare()
    elapsed = time.monotonic() - started
    run = Run(
        records=n,
        repeats=args.repeat,
        root=root,
        records_per_batch=data.per_batch,
        cpu_busy_before=load_before,
        cpu_other_during=other_cpu(cpu0, elapsed),
        prefault_gib=args.prefault,
        prefault_s=prefault_s,
        elapsed_s=elapsed,
    )
    write(report, run, args.json, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
