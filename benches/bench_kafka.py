"""`seglog serve` beside Apache Kafka's own broker, measured with Kafka's own tools.

    .venv/bin/python benches/bench_kafka.py [--records N] [--runs R] [--json FILE]

One ZooKeeper; a Kafka 3.9 broker (ZooKeeper mode, from the kafka_2.13 artifact `make
java` resolves) started as `kafka-server-start.sh` starts it on a small machine (the
script's defaults: a 1 GiB heap, G1 with a 20 ms pause goal); and `seglog serve` as a
process of its own. Each runs alone while it is measured (the other one is stopped),
so that neither takes CPU from the other on two cores. Per broker, in rounds:

- `kafka-producer-perf-test` with 100-byte and 1 KiB records at acks=1 and acks=all
  (one producer, `linger.ms=5`, `batch.size=65536`, no compression, idempotence as the
  client's default), into a fresh topic of 2 partitions: records/s and MB/s;
- `kafka-consumer-perf-test` over the 100-byte records: records/s and MB/s;
- `kafka-e2e-latency` (one record at a time, produced with acks=1 and consumed back):
  the p50, p99 and p99.9 of its round trips;
- the broker process's CPU seconds per GB moved and its resident memory (current, its
  anonymous part, which leaves out mapped log files, and peak), read from /proc;
- the CPU cores each perf tool kept busy (a client near one core limits the figure).

Prints the median and range of each figure over the rounds and seglog's ratio to Kafka's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from seglog.testing import ZooKeeper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # Kafka's own broker and tools, as the tests run them

from java_helpers import java, tool_class, tools_classpath  # noqa: E402
from kafka_reference import REFERENCE_VERSION, KafkaBroker  # noqa: E402

#: kafka-run-class.sh's heap for the perf tools, and the JVM's own JIT and collector.
TOOL_JVM = ["-Xmx512m", "-Dlog4j.configuration=file:/dev/null"]
PRODUCER = ["linger.ms=5", "batch.size=65536"]
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


class Process:
    """A broker process's CPU time and memory, from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime

    def memory(self) -> dict[str, int]:
        status = Path(f"/proc/{self.pid}/status").read_text()
        keys = ("VmRSS", "RssAnon", "VmHWM")  # RssAnon: the heap, without mapped log files
        return {k: int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M)[1]) << 10 for k in keys}  # type: ignore[index]


@contextmanager
def seglog_serve(store: Path) -> Iterator[tuple[str, Process]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--store", str(store), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"listening on (\S+)", line)
        if m is None:
            raise RuntimeError(f"seglog serve did not start: {line!r}")
        yield m[1], Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)


@contextmanager
def kafka_broker(log_dirs: Path, zookeeper: str) -> Iterator[tuple[str, Process]]:
    with KafkaBroker(log_dirs, zookeeper, fast_start=False) as kafka:
        assert kafka.proc is not None
        yield kafka.bootstrap_servers, Process(kafka.proc.pid)


def perf_tool(name: str, *args: str) -> tuple[str, float]:
    """The tool's output, and the CPU cores it kept busy on average (user + system time
    over wall time): near 1 or more, the client is what limits the figure."""
    before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(
        [
            java(),
            *TOOL_JVM,
            "-cp",
            tools_classpath(REFERENCE_VERSION),
            tool_class(REFERENCE_VERSION, name),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    wall, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(f"{name} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return out.stdout, cpu / wall


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> dict[str, float]:
    out, cores = perf_tool(
        "kafka-producer-perf-test",
        *("--topic", topic, "--num-records", str(n), "--record-size", str(size), "--throughput", "-1"),
        *("--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", *PRODUCER),
    )
    m = re.search(rf"^{n} records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", out, re.M)
    if m is None:
        raise RuntimeError(f"unexpected kafka-producer-perf-test output:\n{out[-2000:]}")
    return {"records_per_s": float(m[1]), "mb_per_s": float(m[2]), "client_cores": cores}


def consume(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    out, cores = perf_tool(
        "kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(n)
    )
    header, row = [x for x in out.splitlines() if x.strip()][-2:]
    cols = dict(zip([c.strip() for c in header.split(",")], [c.strip() for c in row.split(",")], strict=True))
    if int(cols["data.consumed.in.nMsg"]) != n:
        raise RuntimeError(f"consumed {cols['data.consumed.in.nMsg']} of {n}")
    fetched = {"records_per_s": float(cols["fetch.nMsg.sec"]), "mb_per_s": float(cols["fetch.MB.sec"])}
    return {**fetched, "client_cores": cores}


def latency(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    out, _ = perf_tool("kafka-e2e-latency", bootstrap, topic, str(n), "1", "100")
    avg = re.search(r"Avg latency: ([\d.]+) ms", out)
    m = re.search(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99.9th = ([\d.]+)", out)
    if m is None or avg is None:
        raise RuntimeError(f"unexpected kafka-e2e-latency output:\n{out[-2000:]}")
    # The tool's percentiles are whole milliseconds; its average is not.
    return {"avg_ms": float(avg[1]), "p50_ms": float(m[1]), "p99_ms": float(m[2]), "p99.9_ms": float(m[3])}


def one_round(bootstrap: str, broker: Process, n: int, tag: str) -> dict[str, dict[str, float]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cases: list[tuple[str, int, str]] = [("100B acks=1", 100, "1"), ("100B acks=all", 100, "all")]
    cases += [("1KiB acks=1", 1024, "1"), ("1KiB acks=all", 1024, "all")]
    topics = {name: f"{tag}-{i}" for i, (name, _, _) in enumerate(cases)} | {"latency": f"{tag}-lat"}
    for f in admin.create_topics(
        [NewTopic(t, 2 if t != topics["latency"] else 1, 1) for t in topics.values()]
    ).values():
        f.result()
    out: dict[str, dict[str, float]] = {}

    def measured(name: str, moved_bytes: int, run: Callable[..., dict[str, float]], *args: object) -> None:
        cpu = broker.cpu_s()
        out[name] = run(*args)
        out[name]["broker_cpu_s_per_gb"] = (broker.cpu_s() - cpu) / (moved_bytes / 1e9)

    for name, size, acks in cases:
        count = n if size == 100 else n // 4
        measured(f"produce {name}", count * size, produce, bootstrap, topics[name], count, size, acks)
    measured("consume 100B", n * 100, consume, bootstrap, topics["100B acks=1"], n)
    measured("e2e latency", 2000 * 100, latency, bootstrap, topics["latency"], 2000)
    out["memory"] = {k: float(v) for k, v in broker.memory().items()}
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000, help="100-byte records per producer run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    rounds: dict[str, list[dict[str, dict[str, float]]]] = {"seglog": [], "kafka": []}
    with tempfile.TemporaryDirectory() as tmp, ZooKeeper(Path(tmp) / "zookeeper") as zk:
        root = Path(tmp)
        for r in range(args.runs):
            for name in ("kafka", "seglog"):  # alternately, each alone while it runs
                where = root / f"{name}-{r}"  # a fresh directory each round, for both
                broker = seglog_serve(where) if name == "seglog" else kafka_broker(where, zk.connect_string)
                with broker as (bootstrap, process):
                    t = time.perf_counter()
                    rounds[name].append(one_round(bootstrap, process, args.records, f"r{r}"))
                    print(f"round {r + 1}/{args.runs}, {name}: {time.perf_counter() - t:.0f}s", flush=True)
    figures = {
        name: {case: {k: [x[case][k] for x in runs] for k in runs[0][case]} for case in runs[0]}
        for name, runs in rounds.items()
    }
    s, k = figures["seglog"], figures["kafka"]
    med = statistics.median
    print(
        f"\nseglog serve vs Kafka {REFERENCE_VERSION} (ZooKeeper mode), one broker; "
        f"median (range) of {args.runs} rounds"
    )
    print(f"{'case':22} {'figure':20} {'seglog':>26} {'Kafka':>26} {'seglog/Kafka':>13}")
    for case in s:
        for fig in s[case]:
            ratio = med(s[case][fig]) / med(k[case][fig]) if med(k[case][fig]) else float("nan")
            scale = 1 / (1 << 20) if case == "memory" else 1
            a = spread([v * scale for v in s[case][fig]])
            b = spread([v * scale for v in k[case][fig]])
            unit = f"{fig} MiB" if case == "memory" else fig
            print(f"{case:22} {unit:20} {a:>26} {b:>26} {ratio:>12.2f}x")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
