"""The `seglog` command line, run as a separate process (`python -m seglog`) on real stores."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import seglog

SEGMENT = "00000000000000000000"


def cli(
    *args: str, input: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    base = {k: v for k, v in os.environ.items() if k != "SEGLOG_STORE"}
    return subprocess.run(
        [sys.executable, "-m", "seglog", *args],
        input=input,
        capture_output=True,
        env={**base, **(env or {})},
        timeout=timeout,
    )


def ok(*args: str, input: bytes | None = None) -> str:
    r = cli(*args, input=input)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def one_error_line(r: subprocess.CompletedProcess[bytes]) -> str:
    """An expected failure: exit status 1 and exactly one `seglog: error:` line."""
    err = r.stderr.decode()
    assert r.returncode == 1, (r.returncode, err)
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("seglog: error:")]
    assert len(lines) == 1, err
    return lines[0]


def batches(log: Path) -> list[tuple[int, int, int, int]]:
    """(position, size, base offset, last offset) of each batch, read with struct."""
    data = log.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append((pos, length + 12, base, base + delta))
        pos += length + 12
    return out


def test_topics_create_list_describe_alter_delete(store_path: Path) -> None:
    s = str(store_path)
    assert (
        ok(
            "topics",
            "create",
            "orders",
            "--store",
            s,
            "--partitions",
            "3",
            "--config",
            "segment.bytes=1048576",
        )
        == "Created topic orders.\n"
    )
    ok("--store", s, "topics", "create", "audit", "--config", "cleanup.policy=compact,delete")
    assert "already exists" in one_error_line(cli("topics", "create", "orders", "--store", s))
    ok("topics", "create", "orders", "--if-not-exists", "--store", s)
    assert ok("topics", "list", "--store", s) == "audit\norders\n"

    with seglog.open(store_path, read_only=True) as r:
        d = r.describe("orders")
    out = ok("topics", "describe", "orders", "--store", s)
    assert out == (
        f"Topic: orders\tTopicId: {d.topic_id}\tPartitionCount: 3\tConfigs: segment.bytes=1048576\n"
        + "".join(
            f"\tPartition: {p}\tLogStartOffset: 0\tLogEndOffset: 0\tSize: 0\tSegments: 1\tRecoveryPoint: 0\n"
            for p in range(3)
        )
    )
    out = ok("topics", "describe", "audit", "--all-configs", "--store", s)
    assert "Configs: cleanup.policy=[compact,delete]\n" in out
    assert "\tConfig: cleanup.policy=compact,delete\t(override)\n" in out
    assert "\tConfig: retention.ms=604800000\t(default)\n" in out

    out = ok(
        "topics", "alter-config", "orders", "--store", s,
        "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]",
        "--delete-config", "segment.bytes",
    )  # fmt: skip
    assert out == "Completed updating config for topic orders.\n"
    with seglog.open(store_path, read_only=True) as r:
        assert r.describe("orders").overrides == {
            "retention.ms": "3600000",
            "cleanup.policy": "compact,delete",
        }
    line = one_error_line(
        cli("topics", "alter-config", "orders", "--delete-config", "segment.bytes", "--store", s)
    )
    assert "segment.bytes" in line, "deleting an override that is not set is refused, as kafka-configs does"
    assert "retention.byte" in one_error_line(
        cli("topics", "alter-config", "orders", "--add-config", "retention.byte=5", "--store", s)
    )

    assert ok("topics", "delete", "orders", "--store", s) == "Deleted topic orders.\n"
    assert ok("topics", "list", "--store", s) == "audit\n"
    assert not (store_path / "orders-0").exists()
    assert "does not exist" in one_error_line(cli("topics", "delete", "orders", "--store", s))
    ok("topics", "delete", "orders", "--if-exists", "--store", s)


def test_store_option_before_or_after_the_command_or_from_env(store_path: Path) -> None:
    with seglog.open(store_path) as s:
        s.create_topic("t")
    p = str(store_path)
    for argv in (
        ["--store", p, "topics", "list"],
        ["topics", "--store", p, "list"],
        ["topics", "list", "--store", p],
    ):
        assert ok(*argv) == "t\n", argv
    r = cli("topics", "list", env={"SEGLOG_STORE": p})
    assert r.returncode == 0 and r.stdout == b"t\n"
    r = cli("--store", "/nonexistent", "topics", "list", env={"SEGLOG_STORE": "/also-not"})
    assert "no store at /nonexistent" in one_error_line(r), "--store wins over the environment"
    r = cli("topics", "list")
    assert r.returncode == 2 and b"SEGLOG_STORE" in r.stderr


def test_produce_lines_then_consume_in_each_format(store_path: Path) -> None:
    s = str(store_path)
    ok("topics", "create", "t", "--store", s)
    r = cli("produce", "t", "--store", s, input=b"alpha\nbeta\r\n\nnot utf-8 \xff\nlast")
    assert r.returncode == 0 and r.stderr == b"Produced 5 records to topic t.\n", r.stderr
    with seglog.open(store_path, read_only=True) as reader:
        records = reader.read("t", 0, 0)
    assert [(x.key, x.value) for x in records] == [
        (None, b"alpha"),
        (None, b"beta"),
        (None, b""),
        (None, b"not utf-8 \xff"),
        (None, b"last"),
    ]
    base = ["consume", "t", "--from-beginning", "--timeout-ms", "0", "--store", s]
    r = cli(*base)
    assert r.stdout == b"alpha\nbeta\n\nnot utf-8 \\xff\nlast\n"
    assert r.stderr == b"Processed a total of 5 messages\n"
    assert cli(*base, "--format", "raw").stdout == b"alpha\nbeta\n\nnot utf-8 \xff\nlast\n"
    assert ok(*base, "--print-offset", "--print-key") == (
        "Offset:0\tnull\talpha\nOffset:1\tnull\tbeta\nOffset:2\tnull\t\n"
        "Offset:3\tnull\tnot utf-8 \\xff\nOffset:4\tnull\tlast\n"
    )
    values = ['"alpha"', '"beta"', '""', '"bm90IHV0Zi04IP8=", "value_encoding": "base64"', '"last"']
    expected = [
        f'{{"topic": "t", "partition": 0, "offset": {x.offset}, "timestamp": {x.timestamp}, '
        f'"timestamp_type": "CreateTime", "key": null, "value": {v}, "headers": []}}\n'
        for x, v in zip(records, values, strict=True)
    ]
    assert ok(*base, "--format", "json") == "".join(expected)


def test_produce_with_key_separator_uses_kafkas_partitioner(store_path: Path) -> None:
    s = str(store_path)
    ok("topics", "create", "t", "--partitions", "3", "--store", s)
    lines = [f"user-{i}:event {i}:x" for i in range(20)]
    r = cli("produce", "t", "--key-separator", ":", "--store", s, input="\n".join(lines).encode() + b"\n")
    assert r.returncode == 0 and r.stderr == b"Produced 20 records to topic t.\n"
    with seglog.open(store_path, read_only=True) as reader:
        for p in range(3):
            recs = reader.read("t", p, 0)
            assert recs, "20 keys spread over 3 partitions"
            for x in recs:
                assert x.key is not None
                assert reader.partition_for_key("t", x.key) == p
                assert x.value == b"event " + x.key.split(b"-")[1] + b":x", "split at the first separator"
            out = ok(
                "consume", "t", "--partition", str(p), "--from-beginning", "--timeout-ms", "0",
                "--print-key", "--key-separator", "=", "--store", s,
            )  # fmt: skip
            assert out == "".join(f"{x.key.decode()}={x.value.decode()}\n" for x in recs)  # type: ignore[union-attr]

    r = cli(
        "produce",
        "t",
        "--key-separator",
        ":",
        "--partition",
        "1",
        "--store",
        s,
        input=b"k:v\nno separator\nz:z\n",
    )
    assert "line 2" in one_error_line(r) and b"Produced 1 record to topic t." in r.stderr
    with seglog.open(store_path, read_only=True) as reader:
        last = reader.read("t", 1, reader.offsets("t", 1)[1] - 1)
        assert [(x.key, x.value) for x in last] == [(b"k", b"v")], (
            "the lines before the bad one were produced"
        )


def test_produce_sticky_chunks_partition_option_and_oversized_lines(store_path: Path) -> None:
    s = str(store_path)
    ok("topics", "create", "t", "--partitions", "3", "--store", s)
    lines = b"".join(b"%d\n" % i for i in range(25))
    ok("produce", "t", "--batch-size", "10", "--store", s, input=lines)
    with seglog.open(store_path, read_only=True) as reader:
        runs = {p: [int(x.value or b"") for x in reader.read("t", p, 0)] for p in range(3)}
    assert sorted(len(v) for v in runs.values()) == [5, 10, 10], "one partition per chunk of 10 lines"
    first = next(p for p, v in runs.items() if v and v[0] == 0)
    assert runs[first] == list(range(10))
    assert runs[(first + 1) % 3] == list(range(10, 20)), "then the next partition, round-robin"
    assert runs[(first + 2) % 3] == list(range(20, 25))

    ok("topics", "create", "small", "--config", "max.message.bytes=1000", "--store", s)
    big = os.urandom(1500).hex().encode()  # too large even when compressed
    r = cli(
        "produce", "small", "--partition", "0", "--compression-type", "gzip", "--durable", "--store", s,
        input=b"a\n" + big + b"\nb\n",
    )  # fmt: skip
    err = r.stderr.decode()
    assert r.returncode == 1 and "line 2:" in err and "max.message.bytes" in err
    assert "Produced 2 records to topic small." in err and "Traceback" not in err
    with seglog.open(store_path, read_only=True) as reader:
        assert [x.value for x in reader.read("small", 0, 0)] == [b"a", b"b"], "the other lines went on"
    dump = ok("dump-log", str(store_path / "small-0" / f"{SEGMENT}.log"))
    assert "compresscodec: gzip" in dump


def test_consume_headers_nulls_and_binary_in_each_format(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("h")
        w.append("h", 0, [(b"k", b"v\xff", [("h1", b"x"), ("h2", None)], 1000), (None, None, None, 2000)])
    base = ["consume", "h", "--from-beginning", "--timeout-ms", "0", "--store", str(store_path)]
    assert ok(*base, "--format", "json") == (
        '{"topic": "h", "partition": 0, "offset": 0, "timestamp": 1000, "timestamp_type": "CreateTime", '
        '"key": "k", "value": "dv8=", "value_encoding": "base64", '
        '"headers": [{"key": "h1", "value": "x"}, {"key": "h2", "value": null}]}\n'
        '{"topic": "h", "partition": 0, "offset": 1, "timestamp": 2000, "timestamp_type": "CreateTime", '
        '"key": null, "value": null, "headers": []}\n'
    )
    flags = ["--print-timestamp", "--print-partition", "--print-offset", "--print-headers", "--print-key"]
    assert ok(*base, *flags) == (
        "CreateTime:1000\tPartition:0\tOffset:0\th1:x,h2:null\tk\tv\\xff\n"
        "CreateTime:2000\tPartition:0\tOffset:1\tNO_HEADERS\tnull\tnull\n"
    )
    assert cli(*base, "--format", "raw").stdout == b"v\xff\n\n"


def test_consume_from_offset_timestamp_and_max_messages(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        w.append("t", 0, [(None, b"v%d" % i, None, 1000 * (i + 1)) for i in range(5)])
        w.create_topic("multi", partitions=2)
    s = str(store_path)
    c = ["consume", "t", "--timeout-ms", "0", "--store", s]
    assert ok(*c, "--offset", "2") == "v2\nv3\nv4\n"
    assert ok(*c, "--partition", "0", "--offset", "4", "--print-offset") == "Offset:4\tv4\n"
    assert ok(*c, "--timestamp", "2500") == "v2\nv3\nv4\n"
    assert ok(*c, "--timestamp", "3000") == "v2\nv3\nv4\n"
    assert ok(*c, "--timestamp", "9999") == ""
    assert ok(*c, "--offset", "latest") == ""
    assert ok(*c) == "", "without a start option, from the end (Kafka's default)"
    assert ok(*c, "--offset", "earliest", "--max-messages", "2") == "v0\nv1\n"
    # --max-messages alone ends the run, with no timeout to rely on.
    assert ok("consume", "t", "--from-beginning", "--max-messages", "3", "--store", s) == "v0\nv1\nv2\n"
    assert "offset 6 is out of range" in one_error_line(cli(*c, "--offset", "6"))
    r = cli("consume", "multi", "--offset", "0", "--timeout-ms", "0", "--store", s)
    assert r.returncode == 2 and b"--offset needs --partition" in r.stderr


def test_consume_starts_at_the_end_and_follows_a_live_writer(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        w.append("t", 0, [b"old"])
        with subprocess.Popen(
            [
                sys.executable,
                "-m",
                "seglog",
                "consume",
                "t",
                "--max-messages",
                "2",
                "--store",
                str(store_path),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as consumer:
            i, deadline = 0, time.monotonic() + 30
            while consumer.poll() is None and time.monotonic() < deadline:
                w.append("t", 0, [b"new-%d" % i])
                i += 1
                time.sleep(0.05)
            out, err = consumer.communicate(timeout=10)
    assert consumer.returncode == 0, err
    lines = out.decode().splitlines()
    assert len(lines) == 2 and all(line.startswith("new-") for line in lines), lines
    a, b = (int(line.removeprefix("new-")) for line in lines)
    assert b == a + 1, "consecutive records, none skipped"
    assert err == b"Processed a total of 2 messages\n"


def test_consume_into_a_closed_pipe_is_quiet(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        w.append("t", 0, [b"%06d" % i + b"." * 100 for i in range(20_000)])
    with subprocess.Popen(
        [sys.executable, "-m", "seglog", "consume", "t", "--from-beginning", "--timeout-ms", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "SEGLOG_STORE": str(store_path)},
    ) as p:
        assert p.stdout is not None and p.stderr is not None
        assert p.stdout.readline().startswith(b"000000.")
        p.stdout.close()  # as `| head -1` does
        err = p.stderr.read()
        p.wait(timeout=30)
    assert p.returncode == 0 and b"Traceback" not in err and b"Error" not in err, err


def make_segments(store_path: Path, topic: str = "t", partitions: int = 1, appends: int = 40) -> None:
    with seglog.open(store_path) as w:
        w.create_topic(
            topic, partitions=partitions, config={"segment.bytes": 4096, "index.interval.bytes": 512}
        )
        for i in range(appends):
            for p in range(partitions):
                w.append(topic, p, [(b"k%d" % i, b"v" * 100, [("n", b"%d" % i)], 1000 + i)] * 3)


def test_dump_log_lists_every_batch_and_record(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        w.append("t", 0, [(b"k%d" % i, b"v%d" % i, None, 1000 + i) for i in range(4)])
        w.append("t", 0, [(b"k4", b"v4", [("h", b"x"), ("z", None)], 1004)], compression_type="gzip")
        w.append("t", 0, [(None, b"v%d" % i, None, 1000 + i) for i in range(5, 8)], compression_type="zstd")
    log = store_path / "t-0" / f"{SEGMENT}.log"
    out = ok("dump-log", str(log))
    lines = out.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    found = batches(log)
    assert len(found) == 3 and len(lines) == 5, "one line per batch"
    for line, (pos, size, base, last), codec, max_ts in zip(
        lines[2:], found, ["none", "gzip", "zstd"], [1003, 1004, 1007], strict=True
    ):
        assert line.startswith(
            f"baseOffset: {base} lastOffset: {last} count: {last - base + 1} baseSequence: -1"
        )
        assert f" position: {pos} CreateTime: {max_ts} size: {size} magic: 2 compresscodec: {codec} " in line
        assert line.endswith(" isvalid: true")
    data = ok("dump-log", "--print-data", str(log)).splitlines()
    assert len(data) == 2 + 3 + 8
    record = "| offset: 4 CreateTime: 1004 keySize: 2 valueSize: 2 sequence: -1"
    assert f"{record} headerKeys: [h,z] key: k4 payload: v4" in data
    # As Kafka prints them: no key field for a null key (nor payload for a null value).
    assert (
        "| offset: 7 CreateTime: 1007 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [] payload: v7"
        in data
    )


def test_dump_log_prints_index_and_timeindex_entries(store_path: Path) -> None:
    make_segments(store_path)
    seg = store_path / "t-0" / f"{SEGMENT}.index"
    entries = list(struct.iter_unpack(">ii", seg.read_bytes()))
    assert len(entries) >= 2
    out = ok("dump-log", str(seg))
    assert out == f"Dumping {seg}\n" + "".join(f"offset: {o} position: {p}\n" for o, p in entries)
    tseg = seg.with_suffix(".timeindex")
    tentries = list(struct.iter_unpack(">qi", tseg.read_bytes()))
    out = ok("dump-log", str(tseg))
    assert out == f"Dumping {tseg}\n" + "".join(f"timestamp: {t} offset: {o}\n" for t, o in tentries)
    # A writer preallocates its active segment's indexes: the empty slots are not entries.
    with seglog.open(store_path) as w:
        w.append("t", 0, [b"x" * 600] * 3)
        w.append("t", 0, [b"y" * 600] * 3)
        active = sorted((store_path / "t-0").glob("*.index"))[-1]
        used = [e for e in struct.iter_unpack(">ii", active.read_bytes()) if e != (0, 0)]
        lines = ok("dump-log", str(active)).splitlines()
    base = int(active.stem)
    assert lines[1 : 1 + len(used)] == [f"offset: {base + o} position: {p}" for o, p in used]
    assert lines[-1].endswith("unused preallocated entries)") and len(lines) == len(used) + 2


def test_dump_log_and_verify_find_a_corrupt_batch(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        for i in range(4):
            w.append("t", 0, [b"record %d-%d" % (i, j) for j in range(10)])
    log = store_path / "t-0" / f"{SEGMENT}.log"
    pos, size, base, last = batches(log)[2]
    data = bytearray(log.read_bytes())
    data[pos + size // 2] ^= 0x01
    log.write_bytes(bytes(data))

    r = cli("dump-log", str(log))
    out = r.stdout.decode()
    assert "invalid data in" in one_error_line(r) and str(log) in r.stderr.decode()
    assert out.count("isvalid: true") == 3, "the dump goes on past a batch with a bad CRC"
    assert f"baseOffset: {base} lastOffset: {last}" in out and f"position: {pos} " in out
    assert f"Invalid batch at position {pos}: CRC-32C mismatch" in out

    r = cli("verify", "--store", str(store_path))
    out = r.stdout.decode()
    assert "verification failed" in one_error_line(r)
    assert f"ERROR t-0/{SEGMENT}.log position {pos}: invalid batch (offsets {base}..{last}): CRC-32C" in out
    assert out.splitlines()[-1] == "1 segments, 4 batches, 30 records: 1 error(s)"


def test_dump_log_and_verify_find_a_torn_tail(store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
        for i in range(3):
            w.append("t", 0, [b"record %d" % i] * 5)
    log = store_path / "t-0" / f"{SEGMENT}.log"
    pos, size, _, _ = batches(log)[-1]
    os.truncate(log, pos + size - 7)
    r = cli("dump-log", str(log))
    assert r.returncode == 1 and r.stdout.decode().count("isvalid: true") == 2
    assert f"Found {size - 7} invalid bytes at position {pos}: batch of {size} bytes" in r.stdout.decode()
    r = cli("verify", "--store", str(store_path))
    assert r.returncode == 1
    assert f"ERROR t-0/{SEGMENT}.log position {pos}: batch of {size} bytes" in r.stdout.decode()


def test_verify_ok_on_a_multi_segment_store_even_while_a_writer_runs(store_path: Path) -> None:
    make_segments(store_path, partitions=2)
    logs = sorted(store_path.glob("t-*/*.log"))
    found = [b for log in logs for b in batches(log)]
    assert len(logs) > 4, "several segments per partition"
    r = cli("verify", "--store", str(store_path))
    out = r.stdout.decode().splitlines()
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert out[-1] == f"{len(logs)} segments, {len(found)} batches, {3 * len(found)} records: OK"
    for p in (0, 1):
        n = len(list((store_path / f"t-{p}").glob("*.log")))
        assert f"t-{p}: {n} segments, 40 batches, 120 records, offsets 0..119," in out[p] and out[p].endswith(
            ": OK"
        )
    # With a writer holding the store (its active indexes preallocated), read-only verify still passes.
    with seglog.open(store_path) as w:
        w.append("t", 0, [b"more"] * 3)
        r = cli("verify", "--store", str(store_path))
    assert r.returncode == 0, r.stdout.decode()
    assert r.stdout.decode().splitlines()[-1].endswith(f"{3 * len(found) + 3} records: OK")


def test_verify_reports_a_gap_as_a_warning_and_a_bad_index_entry_as_an_error(store_path: Path) -> None:
    make_segments(store_path)
    segments = sorted((store_path / "t-0").glob("*.log"))
    middle = segments[1]
    first_missing, next_base = int(middle.stem), int(segments[2].stem)
    for suffix in (".log", ".index", ".timeindex"):
        middle.with_suffix(suffix).unlink()
    r = cli("verify", "--store", str(store_path))
    out = r.stdout.decode()
    assert r.returncode == 0, out
    gap = f"gap: offsets {first_missing}..{next_base - 1} are missing"
    assert f"WARNING t-0/{segments[2].name} position 0: {gap}" in out
    assert out.splitlines()[-1].endswith("records: OK, 1 warning(s)")

    index = segments[0].with_suffix(".index")
    data = bytearray(index.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 0)
    struct.pack_into(">ii", data, 0, rel, pos + 1)
    index.write_bytes(bytes(data))
    r = cli("verify", "--store", str(store_path))
    assert r.returncode == 1
    assert (
        f"ERROR t-0/{SEGMENT}.index: entry 0 (offset {rel}, position {pos + 1}): no batch starts at position"
        in r.stdout.decode()
    )
    r = cli("dump-log", str(index))
    assert r.returncode == 1 and b"Invalid index entry: entry 0" in r.stdout


def test_verify_refuses_a_directory_that_is_not_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    (other / "sub").mkdir(parents=True)
    (other / "notes.txt").write_text("not a store\n")
    store = tmp_path / "store"
    make_segments(store)
    partition = store / "t-0"  # a partition directory given in place of its store
    for directory in (empty, other, partition):
        line = one_error_line(cli("verify", "--store", str(directory)))
        assert f"{directory} is not a seglog store" in line, line
    assert list(empty.iterdir()) == [], "verify creates nothing"

    fresh = tmp_path / "fresh"
    seglog.open(fresh).close()
    r = cli("verify", "--store", str(fresh))
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    assert r.stdout.decode() == "0 segments, 0 batches, 0 records: OK\n", "a store with no topics yet is fine"


def test_write_commands_fail_while_another_process_writes(store_path: Path) -> None:
    s = str(store_path)
    with seglog.open(store_path) as w:
        w.create_topic("t")
        for argv in (["topics", "create", "u"], ["topics", "delete", "t"], ["produce", "t"]):
            line = one_error_line(cli(*argv, "--store", s, input=b"x\n"))
            assert f"locked by another writer (pid {os.getpid()})" in line, line
        assert ok("topics", "list", "--store", s) == "t\n", "read-only commands still work"
        assert w.topics() == ["t"] and w.offsets("t", 0) == (0, 0)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["topics"],
        ["topics", "create"],
        ["topics", "create", "t", "--partitions", "0"],
        ["topics", "create", "t", "--config", "novalue"],
        ["topics", "alter-config", "t"],
        ["produce", "t", "--compression-type", "brotli"],
        ["consume", "t", "--from-beginning", "--offset", "3"],
        ["consume", "t", "--timeout-ms", "soon"],
        ["dump-log"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
    r = cli(*argv, env={"SEGLOG_STORE": str(store_path)})
    assert r.returncode == 2 and b"usage: seglog" in r.stderr and b"Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["consume", "nope", "--timeout-ms", "0"], 'topic "nope" does not exist'),
        (["topics", "describe", "nope"], 'topic "nope" does not exist'),
        (["topics", "create", "bad name"], "bad name"),
        (["topics", "create", "u", "--config", "segment.bytes=abc"], "segment.bytes"),
        (["consume", "t", "--partition", "5", "--timeout-ms", "0"], "no partition 5"),
        (["dump-log", "/nonexistent/00000000000000000000.log"], "/nonexistent"),
    ],
)
def test_expected_errors_are_one_line(argv: list[str], message: str, store_path: Path) -> None:
    with seglog.open(store_path) as w:
        w.create_topic("t")
    assert message in one_error_line(cli(*argv, env={"SEGLOG_STORE": str(store_path)}))


def test_read_commands_on_a_missing_store_and_help(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    assert (
        one_error_line(cli("topics", "list", "--store", missing)) == f"seglog: error: no store at {missing}"
    )
    assert one_error_line(cli("produce", "t", "--store", missing, input=b"x\n")).startswith(
        f"seglog: error: no store at {missing}"
    )
    assert not os.path.exists(missing), "a failed write command creates nothing"
    help_text = ok("consume", "--help")
    assert "--timeout-ms 0 stops at the end of the log" in help_text and "base64" in help_text


def test_consume_as_a_group_resumes_from_committed_offsets(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with seglog.open(store) as s:
        s.create_topic("g", partitions=2)
        s.append("g", 0, [b"a0", b"a1", b"a2"])
        s.append("g", 1, [b"b0"])
    args = ["consume", "g", "--store", str(store), "--group", "readers", "--timeout-ms", "0"]
    first = subprocess.run(
        [sys.executable, "-m", "seglog", *args, "--from-beginning", "--max-messages", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert first.returncode == 0, first.stderr
    got_first = first.stdout.split()
    assert len(got_first) == 2
    rest = subprocess.run([sys.executable, "-m", "seglog", *args], capture_output=True, text=True, timeout=60)
    assert rest.returncode == 0, rest.stderr
    # The second run resumes where the group stopped: together, each record exactly once.
    assert sorted(got_first + rest.stdout.split()) == ["a0", "a1", "a2", "b0"]
    again = subprocess.run(
        [sys.executable, "-m", "seglog", *args], capture_output=True, text=True, timeout=60
    )
    assert again.stdout == "", "everything was committed"
    with seglog.open(store) as s:
        assert "__consumer_offsets" in s.topics()
