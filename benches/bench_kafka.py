"""`seglog serve` beside Apache Kafka's own broker, measured with Kafka's own tools.

    .venv/bin/python benches/bench_kafka.py [--records N] [--runs R] [--setups single,rf3]
                                            [--json FILE]

One ZooKeeper; Kafka 3.9 brokers (ZooKeeper mode, from the kafka_2.13 artifact `make
java` resolves) started as `kafka-server-start.sh` starts them on a small machine (the
script's defaults: a 1 GiB heap, G1 with a 20 ms pause goal); and `seglog serve`
processes. Two setups: one broker, and three brokers on one ZooKeeper with every topic
at replication factor 3 and min.insync.replicas=2 (Kafka's brokers in one chroot; seglog's
a `seglog.testing.LocalCluster`). Each side runs alone while it is measured (the other
one is stopped), so that neither takes CPU from the other on two cores. Per setup and
side, in rounds:

- `kafka-producer-perf-test` with 100-byte and 1 KiB records at acks=1 and acks=all
  (one producer, `linger.ms=5`, `batch.size=65536`, no compression, idempotence as the
  client's default), into a fresh topic of 2 partitions: records/s and MB/s;
- the same 100-byte acks=1 run by two producers at once (a fresh topic), their records/s
  and MB/s summed: one producer keeps about one core busy, so two show what the broker
  takes when the client is not the limit;
- `kafka-consumer-perf-test` over the 100-byte records: records/s and MB/s; then two at
  once, each in a group of its own reading every record, summed;
- `kafka-e2e-latency` (one record at a time, produced with acks=1 and consumed back):
  the p50, p99 and p99.9 of its round trips;
- the broker processes' CPU seconds per GB moved and their resident memory (current, its
  anonymous part, which leaves out mapped log files, and peak), read from /proc and
  summed over the brokers of a setup;
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

from seglog.testing import LocalCluster, ZooKeeper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # Kafka's own broker and tools, as the tests run them

from java_helpers import java, tool_class, tools_classpath  # noqa: E402
from kafka_reference import REFERENCE_VERSION, KafkaBroker  # noqa: E402

#: kafka-run-class.sh's heap for the perf tools, and the JVM's own JIT and collector.
TOOL_JVM = ["-Xmx512m", "-Dlog4j.configuration=file:/dev/null"]
PRODUCER = ["linger.ms=5", "batch.size=65536"]
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


class Brokers:
    """Broker processes' CPU time and memory, from /proc, summed over the processes."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def cpu_s(self) -> float:
        total = 0.0
        for pid in self.pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
        return total

    def memory(self) -> dict[str, int]:
        keys = ("VmRSS", "RssAnon", "VmHWM")  # RssAnon: the heap, without mapped log files
        total = dict.fromkeys(keys, 0)
        for pid in self.pids:
            status = Path(f"/proc/{pid}/status").read_text()
            for k in keys:
                total[k] += int(re.search(rf"^{k}:\s+(\d+) kB", status, re.M)[1]) << 10  # type: ignore[index]
        return total


@contextmanager
def seglog_serve(store: Path) -> Iterator[tuple[str, Brokers]]:
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
        yield m[1], Brokers([proc.pid])
    finally:
        proc.terminate()
        proc.wait(60)


@contextmanager
def seglog_cluster(dir: Path, zookeeper: ZooKeeper) -> Iterator[tuple[str, Brokers]]:
    with LocalCluster(dir, 3, zookeeper=zookeeper) as cluster:
        cluster.wait_until_ready()
        pids = [cluster.pid(n) for n in cluster.broker_ids]
        yield cluster.bootstrap_servers, Brokers([p for p in pids if p is not None])


@contextmanager
def kafka_brokers(dir: Path, zookeeper: str, count: int) -> Iterator[tuple[str, Brokers]]:
    chroot = f"kafka-{dir.name}"
    brokers = [
        KafkaBroker(dir / f"b{n}", zookeeper, fast_start=False, broker_id=n, chroot=chroot)
        for n in range(count)
    ]
    try:
        for b in brokers:
            b.start()
        if count > 1:
            wait_for_brokers(brokers[0].bootstrap_servers, count)
        pids = [b.proc.pid for b in brokers if b.proc is not None]
        yield ",".join(b.bootstrap_servers for b in brokers), Brokers(pids)
    finally:
        for b in brokers:
            b.stop()


def wait_for_brokers(bootstrap: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {count} brokers registered after {timeout}s")
        time.sleep(0.2)


def perf_tool(name: str, *args: str) -> tuple[str, float]:
    """The tool's output, and the CPU cores it kept busy on average (user + system time
    over wall time): near 1 or more, the client is what limits the figure."""
    (out,), cores = perf_tools(name, [list(args)])
    return out, cores


def perf_tools(name: str, runs: list[list[str]]) -> tuple[list[str], float]:
    """Runs of one tool at once, each with its arguments: their outputs, and the CPU
    cores they kept busy together."""
    before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    cmd = [java(), *TOOL_JVM, "-cp", tools_classpath(REFERENCE_VERSION), tool_class(REFERENCE_VERSION, name)]
    procs = [
        subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for args in runs
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"{name} exited {p.returncode}:\n{out[-2000:]}\n{err[-2000:]}")
        outs.append(out)
    wall, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return outs, cpu / wall


def produce(bootstrap: str, topic: str, n: int, size: int, acks: str, producers: int = 1) -> dict[str, float]:
    """``producers`` perf-test producers at once, ``n`` records each: their rates summed."""
    args = ["--topic", topic, "--num-records", str(n), "--record-size", str(size), "--throughput", "-1"]
    args += ["--producer-props", f"bootstrap.servers={bootstrap}", f"acks={acks}", *PRODUCER]
    outs, cores = perf_tools("kafka-producer-perf-test", [args] * producers)
    total = {"records_per_s": 0.0, "mb_per_s": 0.0, "client_cores": cores}
    for out in outs:
        m = re.search(rf"^{n} records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", out, re.M)
        if m is None:
            raise RuntimeError(f"unexpected kafka-producer-perf-test output:\n{out[-2000:]}")
        total["records_per_s"] += float(m[1])
        total["mb_per_s"] += float(m[2])
    return total


def consume(bootstrap: str, topic: str, n: int, groups: int = 1) -> dict[str, float]:
    """``groups`` perf-test consumers at once, each in a group of its own reading the
    topic's ``n`` records: their fetch rates summed."""
    runs = [
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--messages",
            str(n),
            "--group",
            f"perf-{topic}-{groups}-{g}",
        ]
        for g in range(groups)
    ]
    outs, cores = perf_tools("kafka-consumer-perf-test", runs)
    total = {"records_per_s": 0.0, "mb_per_s": 0.0, "client_cores": cores}
    for out in outs:
        # The header line, then the figures (after a warning line, if the tool gave up).
        lines = [x for x in out.splitlines() if x.strip() and not x.startswith("WARNING")]
        at = next((i for i, x in enumerate(lines) if x.startswith("start.time")), None)
        if at is None or at + 1 >= len(lines):
            raise RuntimeError(f"unexpected kafka-consumer-perf-test output:\n{out[-2000:]}")
        header, row = lines[at], lines[at + 1]
        cols = dict(
            zip([c.strip() for c in header.split(",")], [c.strip() for c in row.split(",")], strict=True)
        )
        if int(cols["data.consumed.in.nMsg"]) != n:
            raise RuntimeError(f"consumed {cols['data.consumed.in.nMsg']} of {n}:\n{out[-2000:]}")
        total["records_per_s"] += float(cols["fetch.nMsg.sec"])
        total["mb_per_s"] += float(cols["fetch.MB.sec"])
    return total


def latency(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    out, _ = perf_tool("kafka-e2e-latency", bootstrap, topic, str(n), "1", "100")
    avg = re.search(r"Avg latency: ([\d.]+) ms", out)
    m = re.search(r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99.9th = ([\d.]+)", out)
    if m is None or avg is None:
        raise RuntimeError(f"unexpected kafka-e2e-latency output:\n{out[-2000:]}")
    # The tool's percentiles are whole milliseconds; its average is not.
    return {"avg_ms": float(avg[1]), "p50_ms": float(m[1]), "p99_ms": float(m[2]), "p99.9_ms": float(m[3])}


def one_round(bootstrap: str, broker: Brokers, n: int, tag: str, rf: int) -> dict[str, dict[str, float]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cases: list[tuple[str, int, str]] = [("100B acks=1", 100, "1"), ("100B acks=all", 100, "all")]
    cases += [("1KiB acks=1", 1024, "1"), ("1KiB acks=all", 1024, "all")]
    topics = {name: f"{tag}-{i}" for i, (name, _, _) in enumerate(cases)}
    topics |= {"latency": f"{tag}-lat", "two producers": f"{tag}-two"}
    config = {"min.insync.replicas": "2"} if rf > 1 else {}
    new = [NewTopic(t, 2 if t != topics["latency"] else 1, rf, config=config) for t in topics.values()]
    for f in admin.create_topics(new).values():
        f.result()
    out: dict[str, dict[str, float]] = {}

    def measured(name: str, moved_bytes: int, run: Callable[..., dict[str, float]], *args: object) -> None:
        cpu = broker.cpu_s()
        out[name] = run(*args)
        out[name]["broker_cpu_s_per_gb"] = (broker.cpu_s() - cpu) / (moved_bytes / 1e9)

    for name, size, acks in cases:
        count = n if size == 100 else n // 4
        measured(f"produce {name}", count * size, produce, bootstrap, topics[name], count, size, acks)
    measured("produce 100B x2", 2 * n * 100, produce, bootstrap, topics["two producers"], n, 100, "1", 2)
    measured("consume 100B", n * 100, consume, bootstrap, topics["100B acks=1"], n)
    measured("consume 100B x2", 2 * n * 100, consume, bootstrap, topics["100B acks=1"], n, 2)
    measured("e2e latency", 2000 * 100, latency, bootstrap, topics["latency"], 2000)
    out["memory"] = {k: float(v) for k, v in broker.memory().items()}
    return out


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2_000_000, help="100-byte records per producer run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--setups", default="single,rf3", help="single (one broker), rf3 (three, RF 3)")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument("--chart", type=Path, help="also draw seglog's advantage per row (a PNG)")
    args = ap.parse_args()
    setups = [x for x in args.setups.split(",") if x]
    if not set(setups) <= {"single", "rf3"}:
        ap.error(f"--setups takes single and rf3, got {args.setups}")
    figures: dict[str, dict[str, dict[str, dict[str, list[float]]]]] = {}
    with tempfile.TemporaryDirectory() as tmp, ZooKeeper(Path(tmp) / "zookeeper") as zk:
        root = Path(tmp)
        for setup in setups:
            rounds: dict[str, list[dict[str, dict[str, float]]]] = {"seglog": [], "kafka": []}
            rf = 3 if setup == "rf3" else 1
            for r in range(args.runs):
                for name in ("kafka", "seglog"):  # alternately, each alone while it runs
                    where = root / f"{setup}-{name}-{r}"  # a fresh directory each round, for both
                    if name == "seglog":
                        broker = seglog_serve(where) if rf == 1 else seglog_cluster(where, zk)
                    else:
                        broker = kafka_brokers(where, zk.connect_string, rf)
                    with broker as (bootstrap, processes):
                        t = time.perf_counter()
                        rounds[name].append(one_round(bootstrap, processes, args.records, f"r{r}", rf))
                        took = time.perf_counter() - t
                        print(f"{setup} round {r + 1}/{args.runs}, {name}: {took:.0f}s", flush=True)
            figures[setup] = {
                name: {case: {k: [x[case][k] for x in runs] for k in runs[0][case]} for case in runs[0]}
                for name, runs in rounds.items()
            }
            report(figures[setup], setup, args.runs)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    if args.chart:
        chart(figures, args.chart, args.runs)


#: The chart's rows: (label, case, figure, higher is better).
CHART_ROWS = [
    ("produce 100B acks=1", "produce 100B acks=1", "records_per_s", True),
    ("produce 100B acks=all", "produce 100B acks=all", "records_per_s", True),
    ("produce 1KiB acks=1", "produce 1KiB acks=1", "records_per_s", True),
    ("produce 1KiB acks=all", "produce 1KiB acks=all", "records_per_s", True),
    ("2 producers 100B", "produce 100B x2", "records_per_s", True),
    ("consume 100B", "consume 100B", "records_per_s", True),
    ("2 consumer groups 100B", "consume 100B x2", "records_per_s", True),
    ("e2e latency p99", "e2e latency", "p99_ms", False),
    ("broker CPU per GB produced", "produce 100B acks=1", "broker_cpu_s_per_gb", False),
    ("broker resident memory", "memory", "VmRSS", False),
]


def chart(figures: dict[str, dict[str, dict[str, dict[str, list[float]]]]], path: Path, runs: int) -> None:
    """One bar per row and setup: how many times better seglog's median is than Kafka's
    (throughput: seglog/Kafka; latency, CPU and memory: Kafka/seglog)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    med = statistics.median
    fig, ax = plt.subplots(figsize=(10, 5.5))
    height = 0.8 / len(figures)
    widest = 1.0
    for i, (setup, f) in enumerate(figures.items()):
        ratios = []
        for _, case, key, higher in CHART_ROWS:
            s, k = med(f["seglog"][case][key]), med(f["kafka"][case][key])
            ratios.append(s / k if higher else k / s)
        widest = max(widest, *ratios)
        ys = [r + i * height for r in range(len(CHART_ROWS))]
        label = "one broker" if setup == "single" else "3 brokers, RF 3"
        bars = ax.barh(ys, ratios, height=height, label=label)
        ax.bar_label(bars, labels=[f"{x:.2f}x" for x in ratios], padding=3, fontsize=8)
    ax.set_yticks([r + height * (len(figures) - 1) / 2 for r in range(len(CHART_ROWS))])
    ax.set_yticklabels([label for label, *_ in CHART_ROWS])
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(0.8, widest * 1.5)  # room for the labels
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("times better than Kafka (log scale; 1 = the same)")
    ax.set_title(f"seglog serve vs Kafka {REFERENCE_VERSION}, Kafka's perf tools, 2 cores; median of {runs}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(figures: dict[str, dict[str, dict[str, list[float]]]], setup: str, runs: int) -> None:
    s, k = figures["seglog"], figures["kafka"]
    med = statistics.median
    what = "one broker" if setup == "single" else "three brokers, RF 3, min.insync.replicas=2"
    print(
        f"\nseglog serve vs Kafka {REFERENCE_VERSION} (ZooKeeper mode), {what}; "
        f"median (range) of {runs} rounds"
    )
    print(f"{'case':22} {'figure':20} {'seglog':>26} {'Kafka':>26} {'seglog/Kafka':>13}")
    for case in s:
        for fig in s[case]:
            ratio = med(s[case][fig]) / med(k[case][fig]) if med(k[case][fig]) else float("nan")
            scale = 1 / (1 << 20) if case == "memory" else 1
            a = spread([v * scale for v in s[case][fig]])
            b = spread([v * scale for v in k[case][fig]])
            unit = f"{fig} MiB" if case == "memory" else fig
            print(f"{case:22} {unit:20} {a:>26} {b:>26} {ratio:>12.2f}x", flush=True)


if __name__ == "__main__":
    main()
