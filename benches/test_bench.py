"""Micro-benchmarks with pytest-benchmark (not part of the normal test run):

    .venv/bin/python -m pytest benches/test_bench.py --benchmark-only

Each group has seglog and the same work done by kafka-python (its RecordBatch v2
builder/parser on a plain file) and by sqlite3 (WAL mode), so pytest-benchmark's
tables compare them. seglog goes through ``Producer``/``Consumer``, and ``Store.read``
for lookups.

``test_broker_rows_smoke`` runs ``make bench``'s broker group (cases/broker.py) on
2,000 records, once, so that code cannot rot between full runs; ``test_kcat_rows_smoke``
its kcat rows (cases/kcat.py), skipped with a note where kcat is not installed.
"""

from __future__ import annotations

import bisect
import os
import random
import shutil
import sqlite3
import struct
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import seglog

pytest.importorskip("pytest_benchmark")

# Importing `kafka` imports its admin client, which calls a deprecated
# importlib.resources function (pytest runs with warnings as errors).
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

    # run.py's modules (benches/ is on sys.path, as for run.py itself).
    from harness import Bench, Data, Report
    from report import tables

N = 10_000
TOPIC = "bench"
BATCH_BYTES = 16384

_rng = random.Random(1)
KEYS = [i.to_bytes(8, "big") for i in range(N)]
VALUES = [_rng.randbytes(100) for _ in range(N)]
RECORDS = list(zip(KEYS, VALUES, strict=True))
LOOKUPS = [_rng.randrange(N) for _ in range(1000)]


def _cycle(offsets: list[int]) -> Callable[[], int]:
    it: Iterator[int] = iter(())

    def nxt() -> int:
        nonlocal it
        for o in it:
            return o
        it = iter(offsets)
        return next(it)

    return nxt


# ----------------------------------------------------------------- fixtures


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Any]:
    s = seglog.open(tmp_path / "store")
    s.create_topic(TOPIC)
    yield s
    s.close()


@pytest.fixture
def full_store(store: Any) -> Any:
    """N records in batches of about 16 KiB (138 records), as a producer makes them."""
    for lo in range(0, N, 138):
        store.append(TOPIC, 0, RECORDS[lo : lo + 138])
    return store


def _builder() -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, BATCH_BYTES)


class KpLog:
    """kafka-python batches appended to a file, with an in-memory offset index."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.path = path
        self.next = 0
        self.pos = 0
        self.index: list[tuple[int, int, int]] = []  # (base offset, position, size)

    def write(self, buf: bytearray, count: int) -> None:
        struct.pack_into(">q", buf, 0, self.next)
        os.write(self.fd, buf)
        self.index.append((self.next, self.pos, len(buf)))
        self.next += count
        self.pos += len(buf)

    def produce(self, records: list[tuple[bytes, bytes]]) -> None:
        b, count = _builder(), 0
        for key, value in records:
            if b.append(count, None, key, value, ()) is None:
                self.write(b.build(), count)
                b, count = _builder(), 0
                b.append(0, None, key, value, ())
            count += 1
        if count:
            self.write(b.build(), count)


@pytest.fixture
def kp_log(tmp_path: Path) -> Iterator[KpLog]:
    log = KpLog(tmp_path / "00000000000000000000.log")
    yield log
    os.close(log.fd)


def _sqlite(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute('CREATE TABLE log ("offset" INTEGER PRIMARY KEY, key BLOB, value BLOB)')
    return conn


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = _sqlite(tmp_path / "log.db")
    yield conn
    conn.close()


def _sq_insert(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO log (key, value) VALUES (?, ?)", RECORDS)
    conn.execute("COMMIT")


# ------------------------------------------------------- send a batch of 10k


@pytest.mark.benchmark(group="send 10k")
def test_send_batch_seglog(benchmark: Any, store: Any) -> None:
    producer = seglog.Producer(store, batch_size=BATCH_BYTES, linger_ms=5)

    def send() -> None:
        producer.send_batch(TOPIC, VALUES, keys=KEYS)
        producer.flush()

    benchmark.extra_info["api"] = "Producer.send_batch + flush"
    benchmark(send)
    producer.close()
    assert store.offsets(TOPIC, 0)[1] % N == 0


@pytest.mark.benchmark(group="send 10k")
def test_send_batch_kafka_python(benchmark: Any, kp_log: KpLog) -> None:
    benchmark(kp_log.produce, RECORDS)


@pytest.mark.benchmark(group="send 10k")
def test_send_batch_sqlite(benchmark: Any, db: sqlite3.Connection) -> None:
    benchmark(_sq_insert, db)


# ----------------------------------------------------------------- read 10k


@pytest.mark.benchmark(group="read 10k")
def test_read_seglog(benchmark: Any, full_store: Any) -> None:
    def consume() -> int:
        n = 0
        c = seglog.Consumer(
            full_store, TOPIC, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0
        )
        for r in c:
            r.offset, r.key, r.value  # noqa: B018
            n += 1
        c.close()
        return n

    benchmark.extra_info["api"] = "Consumer iteration"
    assert benchmark(consume) == N


@pytest.mark.benchmark(group="read 10k")
def test_read_kafka_python(benchmark: Any, kp_log: KpLog) -> None:
    kp_log.produce(RECORDS)

    def read() -> int:
        n = 0
        with open(kp_log.path, "rb") as f:
            for batch in MemoryRecords(f.read()):
                for r in batch:
                    r.offset, r.key, r.value  # noqa: B018
                    n += 1
        return n

    assert benchmark(read) == N


@pytest.mark.benchmark(group="read 10k")
def test_read_sqlite(benchmark: Any, db: sqlite3.Connection) -> None:
    _sq_insert(db)

    def read() -> int:
        return sum(1 for _ in db.execute('SELECT "offset", key, value FROM log ORDER BY "offset"'))

    assert benchmark(read) == N


# ------------------------------------------------------------ random lookup


@pytest.mark.benchmark(group="random lookup")
def test_lookup_seglog(benchmark: Any, full_store: Any) -> None:
    nxt = _cycle(LOOKUPS)

    def lookup() -> bytes:
        return full_store.read(TOPIC, 0, nxt(), max_bytes=1)[0].key  # type: ignore[no-any-return]

    benchmark.extra_info["api"] = "Store.read(max_bytes=1)"
    assert len(benchmark(lookup)) == 8


@pytest.mark.benchmark(group="random lookup")
def test_lookup_kafka_python(benchmark: Any, kp_log: KpLog) -> None:
    kp_log.produce(RECORDS)
    bases = [b for b, _, _ in kp_log.index]
    nxt = _cycle(LOOKUPS)

    def lookup() -> bytes | None:
        offset = nxt()
        _, pos, size = kp_log.index[bisect.bisect_right(bases, offset) - 1]
        for r in DefaultRecordBatch(os.pread(kp_log.fd, size, pos)):
            if r.offset == offset:
                return r.key  # type: ignore[no-any-return]
        return None

    assert benchmark(lookup) is not None


@pytest.mark.benchmark(group="random lookup")
def test_lookup_sqlite(benchmark: Any, db: sqlite3.Connection) -> None:
    _sq_insert(db)
    nxt = _cycle(LOOKUPS)

    def lookup() -> bytes:
        return db.execute('SELECT key, value FROM log WHERE "offset" = ?', (nxt() + 1,)).fetchone()[0]  # type: ignore[no-any-return]

    assert len(benchmark(lookup)) == 8


# ------------------------------------------------------ the bench code itself


@pytest.mark.benchmark(group="bench code smoke")
def test_broker_rows_smoke(benchmark: Any, tmp_path: Path) -> None:
    """The broker group end to end on 2,000 records, one run per case: brokers in
    their own processes, confluent-kafka clients, the latency and loopback peers."""
    pytest.importorskip("confluent_kafka")
    from cases.broker import broker_group

    report = Report()
    b = Bench(tmp_path, 1, Data(2000), report)
    # pedantic, one round: it runs under --benchmark-only too, which skips plain tests.
    benchmark.pedantic(broker_group, args=(b, ("confluent-kafka",)), rounds=1, iterations=1)
    report.compare()
    rs = report.results
    assert {"S1", "S3", "C1", "BL1", "BL2", "B1", "B2", "B3", "B4", "B5"} <= rs.keys()
    for id in ("B1", "B2", "B3", "B4"):
        assert rs[id].ratio_embedded is not None and rs[id].ratio_loopback is not None, id
        assert rs[id].met is not None or rs[id].target is None, id
    # Which path carried Fetch's bytes, by the broker's own counters.
    b3, b4 = rs["B3"].counters, rs["B4"].counters
    assert b3 is not None and b4 is not None
    assert b3["fetch_sendfile_bytes"] > 0 and b3["fetch_copied_bytes"] == 0
    assert b4["fetch_copied_bytes"] > 0 and b4["fetch_sendfile_bytes"] == 0
    b1 = rs["B1"].counters
    assert b1 is not None and b1["bytes_in"] == rs["B1"].stored_bytes and b1["messages_in"] == 2000
    assert b1["broker_cpu_pct"] >= 0 and b1["client_cpu_pct"] > 0
    assert rs["B5"].p99_us is not None and rs["B5"].met is not None
    assert "| B5 end-to-end latency at 50,000 records/s" in tables(report)
    assert list(tmp_path.iterdir()) == []  # every case's directory removed


@pytest.mark.benchmark(group="bench code smoke")
def test_kcat_rows_smoke(benchmark: Any, tmp_path: Path) -> None:
    """The broker group's kcat rows (BK1-BK6) on 2,000 records, one run per case."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed: the BK broker rows are not checked (make bench installs it)")
    from cases.broker import broker_group

    report = Report()
    b = Bench(tmp_path, 1, Data(2000), report)
    benchmark.pedantic(broker_group, args=(b, ("kcat",)), rounds=1, iterations=1)
    report.compare()
    rs = report.results
    assert {"S1", "S3", "C1", "BL1", "BL2", "BK1", "BK2", "BK3", "BK4", "BK5", "BK6"} <= rs.keys()
    assert not {"B1", "B3", "B5"} & rs.keys()  # the confluent-kafka rows were not asked for
    for id in ("BK1", "BK2", "BK3", "BK4"):
        assert rs[id].ratio_embedded is not None and rs[id].ratio_loopback is not None, id
        assert rs[id].met is not None, id
        c = rs[id].counters
        assert c is not None and c["broker_cpu_pct"] >= 0 and c["client_cpu_pct"] > 0, id
    k1 = rs["BK1"].counters
    assert k1 is not None and k1["bytes_in"] == rs["BK1"].stored_bytes and k1["messages_in"] == 2000
    k3, k4 = rs["BK3"].counters, rs["BK4"].counters
    assert k3 is not None and k4 is not None
    assert k3["fetch_sendfile_bytes"] > 0 and k3["fetch_copied_bytes"] == 0
    assert k4["fetch_copied_bytes"] > 0 and k4["fetch_sendfile_bytes"] == 0
    for id in ("BK5", "BK6"):
        assert rs[id].value is not None and rs[id].value > 0, id
    text = tables(report)
    assert "| BK1 acks=1: kcat -P" in text and "| BK6 kcat start and exit" in text
    assert list(tmp_path.iterdir()) == []  # every case's directory removed
