"""Phases timed in a fresh Python process: what a Spark task or a command-line
tool pays on its first read, with no mapping, cache or decoder warmed up by an
earlier pass. The parent runs this file as a script; the child times from open
to close and prints the nanoseconds (and the records it saw) as JSON.

    python cases/fresh.py arrow STORE TOPIC
    python cases/fresh.py lookup STORE TOPIC OFFSET
    python cases/fresh.py sqlite-lookup DB OFFSET
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def fresh(*args: str | int) -> dict[str, int]:
    """Runs this script in a new interpreter with ``args``; its JSON answer.

    With OPENBLAS_NUM_THREADS=1: pyarrow imports numpy, whose OpenBLAS starts a
    thread per CPU that spins for a while after the import; on 2 CPUs that takes
    half the machine from the first pass (0.29-0.51 s instead of 0.21 s). A Spark
    task, what this row stands for, runs in a worker forked from a daemon that
    imported pyarrow long before, and a fork carries no such threads."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, *map(str, args)], check=True, capture_output=True, text=True, env=env
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _arrow(store_path: str, topic: str) -> dict[str, int]:
    # Imported before the clock starts, as in a Spark worker (pyarrow's import
    # alone is ~0.2 s on a 2-core VM, most of a first pass over 300k records).
    import pyarrow  # noqa: F401

    import seglog

    t0 = time.perf_counter_ns()
    store = seglog.open(store_path, read_only=True)
    c = seglog.Consumer(store, topic, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0)
    seen = 0
    while True:
        batch = c.poll_arrow(max_records=1_000_000)
        if batch.num_rows == 0:
            break
        seen += batch.num_rows
    c.close()
    store.close()
    return {"ns": time.perf_counter_ns() - t0, "records": seen}


def _lookup(store_path: str, topic: str, offset: int) -> dict[str, int]:
    import seglog

    t0 = time.perf_counter_ns()
    store = seglog.open(store_path, read_only=True)
    key = store.read(topic, 0, offset, max_bytes=1, max_records=1)[0].key
    t1 = time.perf_counter_ns()
    store.close()
    return {"ns": t1 - t0, "key": int.from_bytes(key, "big")}


def _sqlite_lookup(db: str, offset: int) -> dict[str, int]:
    import sqlite3

    t0 = time.perf_counter_ns()
    conn = sqlite3.connect(db)
    key = conn.execute('SELECT key, value FROM log WHERE "offset" = ?', (offset + 1,)).fetchone()[0]
    t1 = time.perf_counter_ns()
    conn.close()
    return {"ns": t1 - t0, "key": int.from_bytes(key, "big")}


def main(argv: list[str]) -> None:
    kind, *rest = argv
    if kind == "arrow":
        answer = _arrow(rest[0], rest[1])
    elif kind == "lookup":
        answer = _lookup(rest[0], rest[1], int(rest[2]))
    elif kind == "sqlite-lookup":
        answer = _sqlite_lookup(rest[0], int(rest[1]))
    else:
        raise SystemExit(f"unknown phase {kind!r}")
    print(json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
