"""kill -9 a writer at random moments: nothing acknowledged as durable is lost,
nothing corrupt is ever read back, and the log goes on after recovery."""

from __future__ import annotations

import hashlib
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import seglog

WRITER = textwrap.dedent(
    """
    import hashlib, sys, threading, seglog
    path, first, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = seglog.open(path)
    if "t" not in store.topics():
        config = {"segment.bytes": 64 * 1024, "index.interval.bytes": 512}
        store.create_topic("t", partitions=2, config=config)
    lock = threading.Lock()
    counter = [first]

    def value(g):
        return hashlib.sha256(str(g).encode()).digest() * (g % 13 + 1)

    def work(p):
        codecs = ["none", "gzip", "lz4", "zstd", "snappy"]
        while True:
            with lock:
                g0 = counter[0]
                n = g0 % 40 + 1
                counter[0] += n
            recs = [(str(g).encode(), value(g)) for g in range(g0, g0 + n)]
            base, last = store.append("t", p, recs, compression_type=codecs[g0 % 5], durable=True)
            with lock:
                print(f"ack {p} {base} {last} {g0}", flush=True)

    print("ready", flush=True)
    for t in [threading.Thread(target=work, args=(i % 2,), daemon=True) for i in range(threads)]:
        t.start()
    threading.Event().wait()
    """
)


def run_until_killed(code: str, args: list[str], after: float) -> list[str]:
    """Runs `code` in a child process, waits for it to print "ready", lets it
    work for `after` seconds, kills it with SIGKILL, and returns what it printed."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lines.extend, args=(child.stdout,))
    reader.start()
    deadline = time.monotonic() + 30
    while "ready\n" not in lines and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.005)
    if "ready\n" not in lines:
        child.kill()
        child.wait()
        reader.join()
        raise AssertionError(f"the child never got ready: {child.stderr.read()}")
    time.sleep(after)
    child.send_signal(signal.SIGKILL)
    child.wait()
    reader.join()
    child.stdout.close()
    child.stderr.close()
    return lines


def expected_value(g: int) -> bytes:
    return hashlib.sha256(str(g).encode()).digest() * (g % 13 + 1)


def read_all(store: seglog.Store, partition: int) -> list[seglog.ConsumerRecord]:
    out: list[seglog.ConsumerRecord] = []
    offset, end = store.offsets("t", partition)
    while offset < end:
        recs = store.read("t", partition, offset)
        out.extend(recs)
        offset = recs[-1].offset + 1
    return out


@pytest.mark.crash
def test_kill_9_loses_nothing_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "store"
    rng = random.Random(20261122)
    acked: dict[tuple[int, int], int] = {}  # (partition, offset) -> global sequence number
    next_g = 0
    recovered_rounds = 0
    for round_no in range(24):
        lines = run_until_killed(
            WRITER, [str(path), str(next_g), str(1 + round_no % 4)], rng.uniform(0.02, 0.4)
        )
        for line in lines:
            if not line.startswith("ack ") or not line.endswith("\n"):
                continue
            _, p, base, last, g0 = line.split()
            for i in range(int(last) - int(base) + 1):
                acked[(int(p), int(base) + i)] = int(g0) + i
                next_g = max(next_g, int(g0) + i + 1)
        next_g += 1000  # unacknowledged sequence numbers are never reused

        with seglog.open(path) as store:
            assert not store.clean_shutdown
            recovered_rounds += store.recovery[0] > 0
            for p in (0, 1):
                records = read_all(store, p)
                by_offset = {r.offset: r for r in records}
                assert [r.offset for r in records] == list(range(len(records))), "no gaps, no duplicates"
                for r in records:  # every record that comes back is intact
                    g = int(r.key)
                    assert r.value == expected_value(g)
                for (ap, off), g in acked.items():
                    if ap == p:
                        assert off in by_offset, f"round {round_no}: acknowledged offset {off} lost"
                        assert by_offset[off].key == str(g).encode()
    assert len(acked) > 1000, "the writers made progress"
    assert recovered_rounds == 24, "every reopen ran recovery"


CLEANER = textwrap.dedent(
    """
    import sys, seglog
    path, first = sys.argv[1], int(sys.argv[2])
    store = seglog.open(path)
    if "c" not in store.topics():
        store.create_topic("c", config={"cleanup.policy": "compact", "segment.bytes": 16 * 1024,
                                        "min.cleanable.dirty.ratio": 0.01, "file.delete.delay.ms": 0})
    print("ready", flush=True)
    seq = first
    while True:
        recs = [(b"key-%d" % (s % 300), b"%d:" % s + b"v" * 150) for s in range(seq, seq + 500)]
        store.append("c", 0, recs, durable=True)
        print("ack", seq, seq + 499, flush=True)
        seq += 500
        store.clean_topic("c")
    """
)


@pytest.mark.crash
def test_kill_9_during_compaction_keeps_the_latest_value_per_key(tmp_path: Path) -> None:
    path = tmp_path / "store"
    rng = random.Random(4242)
    latest_acked: dict[bytes, int] = {}  # key -> sequence number of its latest acknowledged value
    next_seq = 0
    interrupted = 0  # rounds whose kill left a cleaning's temporary files
    for round_no in range(22):
        lines = run_until_killed(CLEANER, [str(path), str(next_seq)], rng.uniform(0.05, 0.6))
        for line in lines:
            if line.startswith("ack ") and line.endswith("\n"):
                _, first, last = line.split()
                for s in range(int(first), int(last) + 1):
                    latest_acked[b"key-%d" % (s % 300)] = s
                next_seq = max(next_seq, int(last) + 1)
        next_seq += 1000  # unacknowledged sequence numbers are never reused
        interrupted += any(p.suffix in (".cleaned", ".swap", ".deleted") for p in path.rglob("*"))

        with seglog.open(path) as store:
            tmp = [p.name for p in path.rglob("*") if p.suffix in (".cleaned", ".swap", ".deleted")]
            assert tmp == [], f"round {round_no}: temporary files left after recovery: {tmp}"
            offset, end = store.offsets("c", 0)
            latest: dict[bytes, int] = {}
            seen: list[int] = []
            while offset < end and (records := store.read("c", 0, offset)):
                offset = records[-1].offset + 1
                for r in records:
                    seq = int(r.value.split(b":")[0])
                    assert r.key == b"key-%d" % (seq % 300), "record intact"
                    latest[r.key] = seq
                    seen.append(r.offset)
            assert seen == sorted(set(seen)), "offsets in order, none twice"
            for key, seq in latest_acked.items():
                # The acknowledged latest value, or a later one that was written
                # but not yet acknowledged when the process died.
                assert latest.get(key, -1) >= seq, f"round {round_no}: {key!r} lost its latest value"
    assert len(latest_acked) == 300
    assert interrupted > 0, "no kill landed inside a cleaning: the test did not test it"
    print(f"{interrupted} of 22 kills interrupted a cleaning")
