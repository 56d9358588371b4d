"""The broker with a native client: kcat (librdkafka's command-line client, no
Python per record) producing to and consuming from ``seglog serve``, each kcat run
its own process timed whole, as Kafka's own perf tools (kafka-producer-perf-test,
kafka-consumer-perf-test) measure a broker.

- BK1/BK2 producer throughput: ``kcat -P -b ADDR -t bench -p -1 -K TAB`` reading the
  run's N records from a file written beforehand (one ``KEY<TAB>VALUE`` line per
  record: 8-character keys, 100-byte values made printable, so no value holds the
  delimiters), with the B rows' producer settings as ``-X`` (linger.ms=5,
  batch.size=1000000, compression none, idempotence off, queue.buffering.max.messages
  room for every record), ``-X acks=1`` (BK1) and ``-X acks=all`` (BK2). kcat exits
  once every record is acknowledged; a fresh broker and store per run, the log end
  offset checked to be N after.
- BK3/BK4 consumer throughput: ``kcat -C -b ADDR -t bench -p 0 -o beginning -c N -e
  -q -f '%o\\n'`` (offsets only, to a file checked after the clock stops: N lines, the
  last N-1), fetch.max.bytes and max.partition.fetch.bytes 64 MiB, queued.min.messages
  and queued.max.messages.kbytes at their maximum (see KCAT_CONSUMER), on the consume
  cases' store, with the broker's ``socket.sendfile.enable`` true (BK3) and false (BK4);
  the broker's counters say which path carried the bytes.
- BK5/BK6 kcat's own start and exit: the same commands for 1 record (BK5 ``-P``,
  acks=1, to a running broker; BK6 ``-C -c 1`` of the few records BK5 wrote, so that
  its one Fetch is small), timed the same way: what every BK1-BK4 run includes
  besides the records (nothing is subtracted from those).

The rows' CPU shares are the broker's (``/proc/PID/stat``) and kcat's (its process
and threads, from ``os.times()``'s children fields once it has exited).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO

from environment import kcat_version
from harness import KEY_BYTES, MIB, TOPIC, Bench, Data, Result, Target, rmtree

from .broker import (
    CONSUMER,
    FETCH_MAX_BYTES,
    PRODUCER,
    BrokerCtx,
    _accounted,
    _stop,
    consumed,
    fresh_broker,
    produced,
    reading_broker,
)
from .stores import SegCtx

__all__ = ["kcat_path", "kcat_rows", "kcat_version"]

KCAT_TIMEOUT_S = 300.0
#: kcat -P's -X settings besides acks: the B rows' producer settings.
KCAT_PRODUCER = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in PRODUCER.items()}
#: kcat -C's -X settings: the B rows' fetch sizes (no group: ``-p 0`` assigns the
#: partition), and room in librdkafka's fetch queue for every record: past
#: queued.min.messages (100,000 by default) or queued.max.messages.kbytes (64 MiB)
#: librdkafka 2.0 puts off the next Fetch until its 1 s timer (under strace: 0.7-0.9 s
#: between a 16 MiB response and the next request), which makes a run of 1,000,000
#: records take 1.3-7 s instead of about 1 s.
KCAT_CONSUMER = {
    k: str(CONSUMER[k]) for k in ("fetch.max.bytes", "max.partition.fetch.bytes", "receive.message.max.bytes")
} | {"queued.min.messages": "10000000", "queued.max.messages.kbytes": "2097151"}
KEY_DELIM = "\t"
OUT_FORMAT = "%o\\n"  # kcat reads the escape: one offset per line
#: 64 printable characters (no tab, no newline) the values' bytes are mapped onto.
_PRINTABLE = bytes(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i % 64] for i in range(256)
)
STARTUP_RUNS = 5


def kcat_path() -> str | None:
    return shutil.which("kcat")


def _x(conf: dict[str, str]) -> list[str]:
    return [a for k, v in conf.items() for a in ("-X", f"{k}={v}")]


def _client_cpu() -> float:
    """CPU seconds of this process and its exited children: kcat, once it has exited
    (the broker process, also a child, is only counted once reaped, after the row)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def write_input(d: Data, m: int, path: Path) -> Path:
    """The first ``m`` records as kcat -P input: ``KEY<TAB>VALUE\\n`` per record."""
    with open(path, "wb") as f:
        for lo in range(0, m, 100_000):
            hi = min(lo + 100_000, m)
            f.write(
                b"".join(
                    b"%0*d\t%s\n" % (KEY_BYTES, i, d.values[i].translate(_PRINTABLE)) for i in range(lo, hi)
                )
            )
    return path


def run_kcat(args: list[str], stdin: IO[bytes] | int, stdout: IO[bytes] | int, log: Path) -> None:
    """One kcat run to its exit; an error, with its stderr, if it fails."""
    kcat = kcat_path()
    assert kcat is not None
    with open(log, "ab") as err:
        start = err.tell()
        try:
            rc = subprocess.run(
                [kcat, *args], stdin=stdin, stdout=stdout, stderr=err, timeout=KCAT_TIMEOUT_S
            ).returncode
        except subprocess.TimeoutExpired:
            rc = None
    if rc != 0:
        with open(log, "rb") as f:
            f.seek(start)
            said = f.read()[-2000:].decode(errors="replace")
        what = f"exited {rc}" if rc is not None else f"still running after {KCAT_TIMEOUT_S:g} s"
        raise AssertionError(f"kcat {' '.join(args[:2])}: {what}; stderr: {said}")


def _producer_args(ctx: BrokerCtx, acks: str) -> list[str]:
    base = ["-P", "-b", ctx.broker.bootstrap, "-t", TOPIC, "-p", "-1", "-K", KEY_DELIM]
    return [*base, *_x(KCAT_PRODUCER), "-X", f"acks={acks}"]


def _consumer_args(ctx: BrokerCtx, count: int) -> list[str]:
    base = ["-C", "-b", ctx.broker.bootstrap, "-t", TOPIC, "-p", "0", "-o", "beginning"]
    return [*base, "-c", str(count), "-e", "-q", "-f", OUT_FORMAT, *_x(KCAT_CONSUMER)]


def kcat_rows(b: Bench, populated: SegCtx, loopback: str) -> None:
    """BK1-BK6 (see the module's docstring); ``populated`` is the consume cases' store,
    closed, ``loopback`` the id of the loopback row the MB/s are held to."""
    inputs = b.fresh_dir()
    try:
        produce_rows(b, inputs, loopback)
        consume_rows(b, populated, loopback)
        startup_rows(b, inputs)
    finally:
        rmtree(inputs)


def produce_rows(b: Bench, inputs: Path, loopback: str) -> None:
    d, n = b.data, b.data.n
    files: dict[int, Path] = {}

    def setup(m: int) -> BrokerCtx:
        if m not in files:  # written once, untimed; read from the page cache by every run
            files[m] = write_input(d, m, inputs / f"records-{m}.txt")
        return fresh_broker(b)

    def body(ctx: BrokerCtx, m: int, acks: str) -> None:
        with open(files[m], "rb") as src, _accounted(ctx, _client_cpu):
            run_kcat(_producer_args(ctx, acks), src, subprocess.DEVNULL, ctx.path / "kcat.log")

    cpu: dict[str, list[tuple[float, float, float]]] = {"BK1": [], "BK2": []}
    shown = ", ".join(f"{k}={KCAT_PRODUCER[k]}" for k in ("linger.ms", "batch.size"))
    for id, acks, embedded in [("BK1", "1", "S1"), ("BK2", "all", "S3")]:
        r = Result(
            id,
            "broker",
            "broker",
            f"acks={acks}: kcat -P, a process run, {n:,} records from a file, {shown}",
            "records/s",
            n,
            vs_embedded=embedded,
            vs_loopback=loopback,
            target=Target("min_rate", 1_000_000),
        )
        b.timed(
            r,
            setup,
            lambda ctx, m, a=acks: body(ctx, m, a),
            lambda ctx, m, r=r: produced(ctx, m, r, cpu[r.id]),
        )


def consume_rows(b: Bench, populated: SegCtx, loopback: str) -> None:
    n = b.data.n

    def body(ctx: BrokerCtx) -> int:
        with open(ctx.path / "kcat.out", "wb") as out, _accounted(ctx, _client_cpu):
            run_kcat(_consumer_args(ctx, n), subprocess.DEVNULL, out, ctx.path / "kcat.log")
        return 0

    def count(ctx: BrokerCtx, _: int) -> int:
        """The offsets kcat printed, checked after the clock stopped: 0 to N-1."""
        out = ctx.path / "kcat.out"
        lines = out.read_bytes().split()
        out.unlink()
        if lines and int(lines[-1]) != n - 1:
            raise AssertionError(f"kcat -C: last offset {int(lines[-1])}, expected {n - 1}")
        return len(lines)

    for id, sendfile in [("BK3", True), ("BK4", False)]:
        r = Result(
            id,
            "broker",
            "broker",
            f"socket.sendfile.enable={str(sendfile).lower()}: kcat -C, a process run, -c {n:,} -f '%o\\n', "
            f"fetch.max.bytes={FETCH_MAX_BYTES // MIB} MiB, queued.min.messages=10M",
            "records/s",
            n,
            vs_embedded="C1",
            vs_loopback=loopback,
            target=Target("min_rate", 2_000_000),
        )
        b.timed_reads(
            r, lambda s=sendfile: reading_broker(populated, s), body, lambda ctx, r=r: consumed(ctx, r), count
        )


def startup_rows(b: Bench, inputs: Path) -> None:
    """BK5/BK6: kcat runs for one record, one warm-up and then STARTUP_RUNS timed."""
    one = write_input(b.data, 1, inputs / "records-1.txt")

    def timed(result: Result, ctx: BrokerCtx, args: list[str], stdin: Path | None) -> None:
        for i in range(STARTUP_RUNS + 1):
            with contextlib.ExitStack() as stack:
                src = stack.enter_context(open(stdin, "rb")) if stdin else subprocess.DEVNULL
                t0 = time.perf_counter_ns()
                run_kcat(args, src, subprocess.DEVNULL, ctx.path / "kcat.log")
                t1 = time.perf_counter_ns()
            if i:
                result.runs_us.append((t1 - t0) / 1e3)

    p = Result(
        "BK5", "broker", "broker", "kcat start and exit: -P of 1 record, acks=1 (BK1's command)", "us", 1
    )
    c = Result(
        "BK6", "broker", "broker", "kcat start and exit: -C -c 1 of BK5's log (BK3's command)", "us", 1
    )
    # One broker for both: BK6 reads the few records BK5 wrote (from the consume
    # rows' store, its one Fetch would bring up to fetch.max.bytes for one record).
    ctx = fresh_broker(b)
    try:
        timed(p, ctx, _producer_args(ctx, "1"), one)
        timed(c, ctx, _consumer_args(ctx, 1), None)
    finally:
        stats = _stop(ctx)
        rmtree(ctx.path)
    if stats["messages_in"] != STARTUP_RUNS + 1:
        raise AssertionError(f"BK5: messages in {stats['messages_in']}, expected {STARTUP_RUNS + 1}")
    b.report.add(p)
    b.report.add(c)
