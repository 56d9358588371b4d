"""What a run prints and writes: one markdown table per group with the ratios
and targets, notes, ``benches/results/latest.json`` and ``.md``, and the chart."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from environment import ROOT, crc_impl, fs_type, git_rev, kcat_version, mem_gib, version
from harness import KEY_BYTES, LOOKUPS, MIN_REPEATS, THREADS, US, VALUE_BYTES, Report, seglog, target_list

RESULTS_JSON = Path(__file__).resolve().parent / "results" / "latest.json"
CHART_PNG = ROOT / "docs" / "bench.png"

GROUPS = [
    ("produce", "Produce"),
    ("consume", "Consume (page cache)"),
    ("lookup", f"Random lookups ({LOOKUPS:,}, median per lookup)"),
    ("machine", "Machine limits (same byte count as the seglog log)"),
    (
        "broker",
        "Broker (confluent-kafka or kcat <-> seglog serve in another process, over loopback TCP; "
        "enable.idempotence=false)",
    ),
    (
        "replication",
        "Replication (a 3-broker cluster with ZooKeeper on loopback; confluent-kafka producing)",
    ),
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
        vs: tuple[str, ...] = ("vs naive Python", "vs sqlite", "vs kafka-python")
        if group == "broker":
            unit, vs = "records/s (or latency)", ("vs embedded seglog", "vs loopback (MB/s)")
        if group == "replication":
            unit, vs = "records/s (or time)", ("vs RF 1 (R1)", "—")
        out.append(f"### {title}\n")
        out.append(f"| case | {unit} | MB/s | {' | '.join(vs)} | target | met? |")
        out.append("|---|---:|---:|" + "---:|" * len(vs) + "---|---|")
        for r in rows:
            assert r.value is not None
            ratios: tuple[float | None, ...] = (r.ratio_naive, r.ratio_sqlite, r.ratio_kp)
            if group in ("broker", "replication"):
                ratios = (r.ratio_embedded, r.ratio_loopback)
            if r.runs_p99_us:
                assert r.p99_us is not None
                val = f"p50 {r.value / 1000:,.2f} ms, p99 {r.p99_us / 1000:,.2f} ms"
            elif r.unit == "us":
                val = f"{r.value:,.2f} {US}"
                if r.p99_us is not None:
                    val += f" (p99 {r.p99_us:,.0f})"
            else:
                val = f"{r.value:,.0f}"
            mb = "—" if r.mb_s is None else f"{r.mb_s:,.1f}"
            target = " and ".join(t.text() for t in target_list(r.target)) or "—"
            met = "—" if r.met is None else ("yes" if r.met else "**no**")
            if r.note:
                met += f" ({r.note})"
            case = f"{r.id} {r.case}"
            shown = " | ".join(_fmt_ratio(x) for x in ratios)
            out.append(f"| {case} | {val} | {mb} | {shown} | {target} | {met} |")
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
    if (c2 := v("C2")) and (c2f := v("C2f")) and (m5 := v("M5")):
        # A first pass in a new process writes its columns into fresh memory: at
        # best the warm pass plus that first touch.
        best = 1 / (1 / c2 + 1 / m5)
        lines.append(
            f"- C2f (first pass, fresh process) is {c2f / c2:.0%} of C2 (warm); a warm pass plus the "
            f"first touch of as much fresh memory (M5) would be {best / c2:.0%}."
        )
    if (s5 := v("S5")) and (s1 := v("S1")):
        lines.append(f"- S5 (acks=all, {THREADS} threads) is {s5 / s1:.0%} of S1 (acks=1, 1 thread).")
    if (s3 := v("S3")) and (m4 := v("M4")):
        per_sync = s3 * m4 / 1e6
        lines.append(
            f"- S3 (acks=all, 1 thread): {s3:,.0f} records/s is {per_sync:,.0f} records "
            "per fdatasync latency (M4)."
        )
    lines += broker_notes(rep)
    return lines


def broker_notes(rep: Report) -> list[str]:
    """Which rows the broker rows are compared with, and its own counters."""
    rs = rep.results
    lines = []
    against: dict[str, list[str]] = {}
    for r in rs.values():
        if r.group == "broker" and r.vs_embedded is not None and r.vs_embedded in rs:
            against.setdefault(r.vs_embedded, []).append(r.id)
    for eid, ids in against.items():
        e = rs[eid]
        lines.append(f"- {', '.join(ids)} vs embedded is against {e.id} ({e.case}): {e.value:,.0f}/s.")
    if lb := next((r.vs_loopback for r in rs.values() if r.vs_loopback in rs), None):
        pump = f"{rs[lb].mb_s:,.0f} MB/s, the faster pump"
        lines.append(f"- the loopback ratios are MB/s over {lb}'s ({pump}).")
    for id in ("B3", "B4", "BK3", "BK4"):
        if id in rs and (c := rs[id].counters):
            lines.append(
                f"- {id}: the broker's counters over {c['passes']} passes: fetch_sendfile_bytes "
                f"{c['fetch_sendfile_bytes']:,}, fetch_copied_bytes {c['fetch_copied_bytes']:,}."
            )
    for r in rs.values():
        if r.group == "broker" and r.counters and "broker_cpu_pct" in r.counters:
            c = r.counters
            client = "the client (with librdkafka's threads)"
            if r.id == "B5":
                client = "the consumer process"
            elif r.id.startswith("BK"):
                client = "kcat"
            lines.append(
                f"- {r.id}, CPU while timed: the broker {c['broker_cpu_pct']} % of one core, "
                f"{client} {c['client_cpu_pct']} %."
            )
    if (b3 := rs.get("B3")) and (b4 := rs.get("B4")) and b3.value and b4.value:
        lines.append(
            f"- Fetch with sendfile (B3) is {b3.value / b4.value:.2f}x the rate with a copy through a "
            "buffer (B4), on the same data, warm in the page cache."
        )
    if (k3 := rs.get("BK3")) and (k4 := rs.get("BK4")) and k3.value and k4.value:
        lines.append(
            f"- kcat: Fetch with sendfile (BK3) is {k3.value / k4.value:.2f}x the rate with a copy (BK4)."
        )
    for start, rows in (("BK5", ("BK1", "BK2")), ("BK6", ("BK3", "BK4"))):
        if not (s := rs.get(start)) or s.value is None:
            continue
        shares = [
            f"{s.value / 1e6 / (rs[id].records / rs[id].value):.0%} of {id}'s run"
            for id in rows
            if id in rs and rs[id].value
        ]
        lines.append(
            f"- {start}: kcat's start and exit, {s.value / 1000:,.1f} ms (median of {len(s.runs_us)} runs), "
            f"is {', '.join(shares) or 'in every run'}; not subtracted."
        )
    if (b5 := rs.get("B5")) and (c := b5.counters):
        lines.append(
            f"- B5: {b5.records:,} records per run counted (after the first 0.2 s); the paced "
            f"producer held at least {c['achieved_rate_min']:,} records/s; p50 and p99 are "
            "the medians of the runs' p50 and p99."
        )
    return lines


def chart(rep: Report, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {
        "seglog": "#1f77b4",
        "kafka-python": "#ff7f0e",
        "sqlite": "#2ca02c",
        "naive": "#d62728",
        "machine": "#7f7f7f",
        "broker": "#9467bd",
    }
    panels = [
        ("produce", "Produce: records/s (higher is better)", lambda r: r.value, ["M1", "M2"]),
        ("consume", "Consume: records/s (higher is better)", lambda r: r.value, ["M3", "M5"]),
        ("lookup", f"Random lookup: median {US} (lower is better)", lambda r: r.value, ["M4"]),
        ("machine", "Machine: MB/s", lambda r: r.mb_s, []),
        (
            "broker",
            "Broker (confluent-kafka, kcat over loopback): records/s (higher is better)",
            lambda r: r.value if r.unit != "us" else None,
            ["S1", "C1"],
        ),
    ]
    heights = []
    for group, _, _, extra in panels:
        heights.append(max(2, sum(1 for r in rep.results.values() if r.group == group) + len(extra)))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 0.42 * sum(heights) + 3), height_ratios=heights)
    for ax, (group, label, val, extra) in zip(axes, panels, strict=True):
        rows = [r for r in rep.results.values() if r.group == group and val(r)]
        rows += [rep.results[i] for i in extra if i in rep.results]
        names = [f"{r.id} {r.case}" if r.group == group else f"{r.id} ({r.group}) {r.case}" for r in rows]
        values = [val(r) if r.group == group or group == "lookup" else r.value for r in rows]
        ys = list(range(len(rows)))[::-1]
        ax.barh(ys, values, color=[colors[r.impl] for r in rows])
        for y, r, x in zip(ys, rows, values, strict=True):
            ax.text(x, y, f" {x:,.0f}" if x >= 100 else f" {x:,.2f}", va="center", fontsize=7)
            for t in target_list(r.target):
                if t.kind in ("min_rate", "max_us") and r.group == group:
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


def librdkafka() -> str:
    try:
        import confluent_kafka
    except ImportError:
        return "?"
    return str(confluent_kafka.libversion()[0])


#: What seglog is measured through.
API = "seglog.Producer / seglog.Consumer"


@dataclass
class Run:
    """What the report says about the run itself, beside its figures."""

    records: int
    repeats: int
    root: Path  # the work directory the stores were in
    records_per_batch: int
    cpu_busy_before: float
    cpu_other_during: float
    prefault_gib: float
    prefault_s: float
    elapsed_s: float


def markdown(report: Report, run: Run) -> str:
    """The header on the run and the machine, the tables and the notes."""
    load_before, other = run.cpu_busy_before, run.cpu_other_during
    busy = (
        " **(other work was using the CPUs: figures may be low)**" if max(load_before, other) > 0.15 else ""
    )
    prefault_note = (
        f"{run.prefault_gib:g} GiB of memory touched and freed first ({run.prefault_s:.1f} s)"
        if run.prefault_gib > 0
        else "no memory prefault"
    )
    header = (
        f"## seglog benchmarks: {run.records:,} records ({KEY_BYTES}-byte keys, {VALUE_BYTES}-byte values), "
        f"median of {run.repeats} runs ({MIN_REPEATS} for cases whose runs take long)\n\n"
        f"- seglog {seglog.__version__}, API measured: **{API}**\n"
        f"- kafka-python {version('kafka-python')} (CRC-32C: {crc_impl()}), "
        f"SQLite {sqlite3.sqlite_version}, Python {platform.python_version()}\n"
        f"- {os.cpu_count()} CPUs, {mem_gib():.0f} GiB, stores on {fs_type(run.root)} "
        f"({run.root.parent}); {run.records_per_batch} records per 16 KiB batch; "
        f"CPU used by other work: {load_before:.0%} just before the run, about {other:.0%} "
        f"during it{busy}; "
        f"{prefault_note}\n"
        f"- tree: {git_rev()}\n"
        "- naive Python: `struct.pack` + one buffered write per record, no CRC, no index file; "
        "read back by unpacking 1 MiB reads; lookups by a sparse in-memory index + `os.pread`\n"
        "- ratios: >1 means seglog is better (throughput ratio; baseline/seglog latency for lookups); "
        "MB/s = bytes stored (log or database files) / time\n"
    )
    if any(r.group == "broker" for r in report.results.values()):
        header += (
            f"- broker rows: confluent-kafka {version('confluent-kafka')} (librdkafka {librdkafka()}) "
            "against `seglog serve` in another process; MB/s = record bytes the broker counted in or out "
            "/ time; vs embedded = records/s over the embedded row's; vs loopback = MB/s over "
            "the faster loopback pump's (BL1, BL2)\n"
        )
    if any(r.id.startswith("BK") for r in report.results.values()):
        header += (
            f"- kcat rows (BK): {kcat_version() or 'kcat ?'}, one process per run, timed from start to exit "
            "(BK5 and BK6 are that start and exit alone)\n"
        )
    text = header + "\n" + tables(report)
    extra = notes(report)
    if extra:
        text += "\nNotes:\n" + "\n".join(extra) + "\n"
    text += f"\n(run took {run.elapsed_s:,.0f} s)\n"
    return text


def meta(run: Run) -> dict[str, object]:
    """The run and the machine, as latest.json records them."""
    return {
        "records": run.records,
        "key_bytes": KEY_BYTES,
        "value_bytes": VALUE_BYTES,
        "repeats": run.repeats,
        "api": API,
        "seglog_version": seglog.__version__,
        "kafka_python_version": version("kafka-python"),
        "confluent_kafka_version": version("confluent-kafka"),
        "librdkafka_version": librdkafka(),
        "kcat_version": kcat_version(),
        "crc32c": crc_impl(),
        "sqlite_version": sqlite3.sqlite_version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mem_gib": round(mem_gib(), 1),
        "fs": fs_type(run.root),
        "records_per_batch": run.records_per_batch,
        "cpu_busy_before": round(run.cpu_busy_before, 3),
        "cpu_other_during": round(run.cpu_other_during, 3),
        "prefault_gib": run.prefault_gib,
        "git": git_rev(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "elapsed_s": round(run.elapsed_s, 1),
    }


def write(report: Report, run: Run, json_path: Path, png_path: Path) -> None:
    """Print the markdown, write it with the JSON of every run beside it, draw the chart."""
    text = markdown(report, run)
    print(text)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(
        json.dumps({"meta": meta(run), "results": [asdict(r) for r in report.results.values()]}, indent=1)
        + "\n"
    )
    md = json_path.with_suffix(".md")
    md.write_text(text)
    try:
        chart(report, png_path, f"seglog {seglog.__version__}: {run.records:,} records, {API}")
    except ImportError as e:
        print(f"no chart: {e} (install matplotlib)", file=sys.stderr)
    print(f"wrote {json_path}, {md} and {png_path}", file=sys.stderr)
