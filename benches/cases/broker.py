"""The broker: Kafka's own client (confluent-kafka) producing to and consuming from
``seglog serve`` in another process, beside the embedded seglog Producer/Consumer
doing the same work and the loopback limit (a plain TCP pump between two processes).

- B1/B2 producer throughput: one ``Producer.produce(topic, value, key)`` per record,
  then ``flush()``, timed from ``Producer(...)`` to ``flush()`` returning, acks=1 and
  acks=all, with PRODUCER's settings; a fresh broker and store per run.
- B3/B4 consumer throughput: a fresh ``Consumer`` per pass, ``assign`` at offset 0,
  ``consume(num_messages=10000)`` until every record is seen (offset, key and value
  touched), ``close()``; on the consume cases' store (16 KiB batches), with the
  broker's ``socket.sendfile.enable`` true (B3) and false (B4). The data is in the
  page cache (warm): dropping it needs root. The broker's own counters
  (``fetch_sendfile_bytes``, ``fetch_copied_bytes``) say which path carried the bytes.
- B5 end-to-end latency: a producer process paced at LATENCY_RATE records/s in 1 ms
  ticks (``peers.py paced``, acks=1, linger.ms=0) and a consumer in this process;
  each value carries its produce() time in microseconds, and the consumer takes
  ``time.time_ns()`` when ``poll()`` hands it the record. The first 0.2 s of each
  run are not counted; p50 and p99 per run, then the median of the runs.
- BL1/BL2 loopback limit: the log's byte count from this process to a sink process
  (``peers.py sink``: ``recv_into`` a 1 MiB buffer), by ``socket.sendfile`` of a file
  in the page cache (BL1) and by ``sendall`` of one 1 MiB buffer over and over (BL2):
  a pump with no per-record work, the most any client/broker pair could move.

Every broker is ``python -m seglog serve`` in its own process (stopped by SIGTERM),
so the client here never shares a GIL with it; its counters are read from its
Prometheus endpoint (``--metrics``). MB/s is the record bytes the broker counted
in (Produce) or out (Fetch) over the time; the loopback ratio is MB/s over the
faster loopback row's. Each row also records the CPU the broker process and this
process (the client, librdkafka's threads included) used while timed, as a share of
one core: which side is the limit.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from environment import version
from harness import MIB, TOPIC, Bench, Result, Target, rmtree, seglog

from .consume import C1_CASE, iterate
from .produce import S1_CASE, S3_CASE, producer_send, seg_timed
from .stores import SegCtx, seg_finish, seg_populate

PEERS = Path(__file__).resolve().parent / "peers.py"
#: Where the broker and peer processes import seglog from: the package the bench measures.
SEGLOG_PATH = str(Path(seglog.__file__).resolve().parent.parent)

#: The producer rows' client settings (besides bootstrap.servers and acks).
PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "compression.type": "none",
    "enable.idempotence": False,  # plain produce: no producer id, no sequence numbers
    # room for every record of a run, so produce() never waits on a full queue
    "queue.buffering.max.messages": 10_000_000,
}
FETCH_MAX_BYTES = 64 * MIB
#: The consumer rows' client settings (besides bootstrap.servers).
CONSUMER = {
    "group.id": "seglog-bench",  # assign() only: no group is joined, nothing committed
    "enable.auto.commit": False,
    "fetch.max.bytes": FETCH_MAX_BYTES,
    "max.partition.fetch.bytes": FETCH_MAX_BYTES,
    "receive.message.max.bytes": FETCH_MAX_BYTES + MIB,
}
CONSUME_BATCH = 10_000
LATENCY_RATE = 50_000  # records/s
LATENCY_MAX_S = 10.0  # seconds of records per latency run, at most (n // 2 records otherwise)
#: The latency consumer: no Nagle delay, the fetch answered as soon as a byte is there.
LATENCY_CONSUMER = {**CONSUMER, "socket.nagle.disable": True, "fetch.wait.max.ms": 100}


class BrokerProcess:
    """``python -m seglog serve`` on ``store`` in a process of its own, until :meth:`stop`."""

    def __init__(self, store: Path, log: Path, **config: str) -> None:
        cmd = [sys.executable, "-m", "seglog", "serve", "--store", str(store)]
        cmd += ["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]
        for k, v in config.items():
            cmd += ["--config", f"{k}={v}"]
        self.log = log
        with open(log, "wb") as err:
            self.proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=err, env=_env(), start_new_session=True
            )
        assert self.proc.stdout is not None
        line = _readline(self.proc, self.proc.stdout, 30).decode()
        m = re.match(r"seglog: broker \d+ listening on (\S+)", line)
        if not m:
            self.kill()
            raise RuntimeError(f"seglog serve: unexpected first line {line!r}; stderr: {self._stderr()}")
        self.bootstrap = m.group(1)
        self.metrics_url = self._metrics_url()

    def _stderr(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def _metrics_url(self) -> str:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if m := re.search(r"metrics on (http://\S+)", self._stderr()):
                return m.group(1)
            time.sleep(0.01)
        self.kill()
        raise RuntimeError(f"seglog serve printed no metrics address; stderr: {self._stderr()}")

    def stats(self) -> dict[str, int]:
        """The broker's counters (``seglog_*_total``) by name without prefix and suffix."""
        with urllib.request.urlopen(self.metrics_url, timeout=10) as r:
            text = r.read().decode()
        out = {}
        for m in re.finditer(r"^seglog_(\w+)_total (\d+)$", text, re.MULTILINE):
            out[m.group(1)] = int(m.group(2))
        return out

    def stop(self) -> None:
        """SIGTERM, as an operator stops it; it must exit 0 (a clean close of the store)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"seglog serve did not stop on SIGTERM; stderr: {self._stderr()}") from None
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        if rc != 0:
            raise RuntimeError(f"seglog serve exited {rc}; stderr: {self._stderr()}")

    def cpu_s(self) -> float:
        """The broker process's CPU seconds so far (all its threads, user + system)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SEGLOG_PATH, env.get("PYTHONPATH")) if p)
    return env


def _readline(proc: subprocess.Popen[bytes], pipe: Any, timeout: float) -> bytes:
    """One line from a child's stdout, or an error if it exits or says nothing in time."""
    ready, _, _ = select.select([pipe], [], [], timeout)
    if not ready:
        proc.kill()
        raise RuntimeError(f"{proc.args!r} printed nothing in {timeout:g} s")
    return pipe.readline()  # type: ignore[no-any-return]


@dataclass
class BrokerCtx:
    path: Path  # the case's directory: the store and the broker's stderr
    broker: BrokerProcess
    counters: dict[str, int] = field(default_factory=dict)
    # (wall, broker CPU, client CPU) seconds of each timed body, to say which side is the limit
    cpu: list[tuple[float, float, float]] = field(default_factory=list)


@contextlib.contextmanager
def _accounted(ctx: BrokerCtx, client_cpu: Callable[[], float] | None = None) -> Iterator[None]:
    """Adds the block's wall time and the CPU time the broker and the client spent
    in it to ``ctx.cpu``; the client is this process (with librdkafka's threads)
    unless ``client_cpu`` says otherwise."""
    clock = client_cpu or _own_cpu
    w0, b0, c0 = time.perf_counter(), ctx.broker.cpu_s(), clock()
    yield
    ctx.cpu.append((time.perf_counter() - w0, ctx.broker.cpu_s() - b0, clock() - c0))


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def _cpu_shares(runs: list[tuple[float, float, float]]) -> dict[str, int]:
    """CPU time as a percentage of the wall time (100 = one core busy throughout)."""
    wall = sum(r[0] for r in runs) or 1e-9
    return {
        "broker_cpu_pct": round(100 * sum(r[1] for r in runs) / wall),
        "client_cpu_pct": round(100 * sum(r[2] for r in runs) / wall),
    }


def _start(path: Path, **config: str) -> BrokerCtx:
    return BrokerCtx(path, BrokerProcess(path / "store", path / "broker.log", **config))


def _stop(ctx: BrokerCtx) -> dict[str, int]:
    """Stops the broker; its counters, read just before."""
    try:
        stats = ctx.broker.stats()
    finally:
        ctx.broker.stop()
    return stats


def fresh_broker(b: Bench) -> BrokerCtx:
    """A broker on a fresh store holding the topic (one partition): a produce run's."""
    path = b.fresh_dir()
    store = seglog.open(path / "store")
    store.create_topic(TOPIC, partitions=1)
    store.close()
    return _start(path)


def produced(ctx: BrokerCtx, m: int, result: Result, cpu: list[tuple[float, float, float]]) -> int:
    """Stops a produce run's broker, checks the log end offset and the broker's count
    are ``m``, sets the row's counters (CPU over all its runs so far, in ``cpu``),
    removes the store; returns the bytes the broker took in."""
    stats = _stop(ctx)
    store = seglog.open(ctx.path / "store")
    try:
        end = store.offsets(TOPIC, 0)[1]
    finally:
        store.close()
    rmtree(ctx.path)
    if end != m or stats["messages_in"] != m:
        got = stats["messages_in"]
        raise AssertionError(f"{result.id}: log end offset {end}, messages in {got}, expected {m}")
    cpu += ctx.cpu
    result.counters = {k: stats[k] for k in ("bytes_in", "messages_in")} | _cpu_shares(cpu)
    return int(stats["bytes_in"])


def reading_broker(populated: SegCtx, sendfile: bool) -> BrokerCtx:
    """A broker on the consume cases' store, Fetch by sendfile or by a copy; its
    counters as it starts, to subtract."""
    ctx = BrokerCtx(
        populated.path,
        BrokerProcess(
            populated.path / "store",
            populated.path / "broker.log",
            **{"socket.sendfile.enable": str(sendfile).lower()},
        ),
    )
    ctx.counters = ctx.broker.stats()
    return ctx


def consumed(ctx: BrokerCtx, result: Result) -> int:
    """Stops a consume row's broker; sets the row's counters (which path carried the
    bytes, CPU); returns the bytes out per pass."""
    before = ctx.counters
    after = _stop(ctx)
    passes = len(result.runs_ns) + 1  # with the warm-up
    keys = ("bytes_out", "fetch_sendfile_bytes", "fetch_copied_bytes")
    result.counters = {k: after[k] - before.get(k, 0) for k in keys}
    result.counters |= {"passes": passes} | _cpu_shares(ctx.cpu)
    return after["bytes_out"] // passes


#: The clients the broker rows are measured with: confluent-kafka from this process
#: (B1-B5) and kcat, librdkafka's command-line client, as its own process (BK1-BK6).
CLIENTS = ("confluent-kafka", "kcat")


def broker_group(b: Bench, clients: Sequence[str] = CLIENTS) -> None:
    from .kcat import kcat_path, kcat_rows, kcat_version

    ck: Any = None
    if "confluent-kafka" in clients:
        try:
            import confluent_kafka as ck
        except ImportError:
            print("broker: confluent-kafka not installed: no B1-B5 rows", file=sys.stderr)
    kcat = "kcat" in clients and kcat_path() is not None
    if "kcat" in clients and not kcat:
        print(
            "broker: kcat not found on PATH: no BK rows (make bench installs it: apt-get install kcat)",
            file=sys.stderr,
        )
    if ck is None and not kcat:
        return
    d, n = b.data, b.data.n
    using = []
    if ck is not None:
        using.append(f"confluent-kafka {version('confluent-kafka')}, librdkafka {ck.libversion()[0]}")
    if kcat:
        using.append(kcat_version())
    print(f"broker ({n:,} records; {'; '.join(using)})", file=sys.stderr)
    rs = b.report.results
    # The embedded rows compared with, unless this run measured them already.
    if "S1" not in rs:
        seg_timed(b, Result("S1", "produce", "seglog", S1_CASE, "records/s", n), producer_send(d, 1, 1))
    if "S3" not in rs:
        seg_timed(b, Result("S3", "produce", "seglog", S3_CASE, "records/s", n), producer_send(d, "all", 1))
    if "C1" not in rs:
        c1 = Result("C1", "consume", "seglog", C1_CASE, "records/s", n)
        b.timed_reads(c1, lambda: seg_populate(b), iterate, seg_finish)

    # The store the consume rows read: the consume cases' layout, closed here first
    # (the broker opens it as its writer). Its size is the loopback rows' byte count.
    populated = seg_populate(b)
    log_size = int(populated.store.describe(TOPIC).partitions[0].size_bytes)
    populated.store.close()
    try:
        lb = loopback_rows(b, log_size)
        if ck is not None:
            produce_rows(b, lb)
            consume_rows(b, populated, lb)
        if kcat:
            kcat_rows(b, populated, lb)
        if ck is not None:
            latency_row(b)
    finally:
        rmtree(populated.path)


def produce_rows(b: Bench, loopback: str) -> None:
    from confluent_kafka import Producer

    d, n = b.data, b.data.n
    shown = ("linger.ms", "batch.size", "compression.type")
    settings = ", ".join(f"{k}={PRODUCER[k]}" for k in shown)

    def body(ctx: BrokerCtx, m: int, acks: str) -> None:
        with _accounted(ctx):
            p = Producer({"bootstrap.servers": ctx.broker.bootstrap, "acks": acks, **PRODUCER})
            produce, poll = p.produce, p.poll
            keys, values = d.keys, d.values
            for i in range(m):
                try:
                    produce(TOPIC, values[i], keys[i])
                except BufferError:  # the client's queue is full: let it drain
                    poll(0.01)
                    produce(TOPIC, values[i], keys[i])
            left = p.flush(60)
        if left:
            raise AssertionError(f"{left} records not delivered after flush(60)")

    cpu: dict[str, list[tuple[float, float, float]]] = {"B1": [], "B2": []}
    target = Target("min_rate", 1_000_000)
    for id, acks, embedded in [("B1", "1", "S1"), ("B2", "all", "S3")]:
        r = Result(
            id,
            "broker",
            "broker",
            f"acks={acks}: confluent-kafka produce() per record, {settings}",
            "records/s",
            n,
            vs_embedded=embedded,
            vs_loopback=loopback,
            target=target,
        )
        b.timed(
            r,
            lambda _m: fresh_broker(b),
            lambda ctx, m, a=acks: body(ctx, m, a),
            lambda ctx, m, r=r: produced(ctx, m, r, cpu[r.id]),
        )


def consume_rows(b: Bench, populated: SegCtx, loopback: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    n = b.data.n

    def body(ctx: BrokerCtx) -> int:
        with _accounted(ctx):
            c = Consumer({"bootstrap.servers": ctx.broker.bootstrap, **CONSUMER})
            c.assign([TopicPartition(TOPIC, 0, 0)])
            consume = c.consume
            seen = 0
            while seen < n:
                msgs = consume(min(CONSUME_BATCH, n - seen), 10.0)
                if not msgs:
                    raise AssertionError(f"no records in 10 s after {seen}")
                for msg in msgs:
                    if msg.error():
                        raise AssertionError(f"consume: {msg.error()}")
                    msg.offset(), msg.key(), msg.value()
                seen += len(msgs)
            c.close()
        return seen

    for id, sendfile in [("B3", True), ("B4", False)]:
        r = Result(
            id,
            "broker",
            "broker",
            f"socket.sendfile.enable={str(sendfile).lower()}: confluent-kafka consume({CONSUME_BATCH:,}), "
            f"fetch.max.bytes={FETCH_MAX_BYTES // MIB} MiB",
            "records/s",
            n,
            vs_embedded="C1",
            vs_loopback=loopback,
            target=Target("min_rate", 2_000_000) if sendfile else None,
        )
        b.timed_reads(
            r, lambda s=sendfile: reading_broker(populated, s), body, lambda ctx, r=r: consumed(ctx, r)
        )


def latency_row(b: Bench) -> None:
    from confluent_kafka import Consumer, TopicPartition

    n = b.data.n
    count = max(100, min(n // 2, int(LATENCY_RATE * LATENCY_MAX_S)))
    skip = min(count // 10, LATENCY_RATE // 5)  # the first 0.2 s: connections warming up
    r = Result(
        "B5",
        "broker",
        "broker",
        f"end-to-end latency at {LATENCY_RATE:,} records/s, acks=1, linger.ms=0: produce() in one "
        "process -> broker -> poll() in another",
        "us",
        count - skip,
        target=Target("max_p99_us", 2000),
    )
    path = b.fresh_dir()
    store = seglog.open(path / "store")
    store.create_topic(TOPIC, partitions=1)
    store.close()
    ctx = _start(path)
    c = Consumer({"bootstrap.servers": ctx.broker.bootstrap, **LATENCY_CONSUMER})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        c.poll(0.5)  # connected and fetching before the first record
        rates = []

        def run(m: int) -> list[int]:
            producer = subprocess.Popen(
                [sys.executable, str(PEERS), "paced", ctx.broker.bootstrap, TOPIC, str(m), str(LATENCY_RATE)],
                stdout=subprocess.PIPE,
                env=_env(),
            )
            lat = []
            poll, now_us, unpack = c.poll, time.time_ns, struct.Struct(">q").unpack_from
            deadline = time.monotonic() + m / LATENCY_RATE + 30
            try:
                while len(lat) < m:
                    msg = poll(0.1)
                    if msg is None:
                        if time.monotonic() > deadline or producer.poll() not in (None, 0):
                            raise AssertionError(f"B5: {len(lat)} of {m} records arrived")
                        continue
                    t = now_us() // 1000
                    if msg.error():
                        raise AssertionError(f"B5 consume: {msg.error()}")
                    lat.append(t - unpack(msg.value())[0])
                out, _ = producer.communicate(timeout=60)
            finally:
                if producer.returncode is None:
                    producer.kill()
                    producer.communicate()
            sent, secs = out.split()
            if int(sent) != m or producer.returncode != 0:
                raise AssertionError(f"B5: the paced producer delivered {sent} of {m}")
            rates.append(m / float(secs))
            return lat

        run(max(100, count // 10))  # warm-up
        for _ in range(b.runs_for(count / LATENCY_RATE + 1)):
            with _accounted(ctx):
                got = run(count)
            lat = sorted(got[skip:])
            r.runs_us.append(float(statistics.median(lat)))
            r.runs_p99_us.append(float(lat[int(len(lat) * 0.99)]))
        r.counters = {"achieved_rate_min": int(min(rates[1:]))} | _cpu_shares(ctx.cpu)
    finally:
        c.close()
        _stop(ctx)
        rmtree(path)
    b.report.add(r)


def loopback_rows(b: Bench, nbytes: int) -> str:
    """Measures BL1 and BL2; the id of the faster, the loopback limit the broker rows are held to."""
    n = b.data.n
    path = b.fresh_dir()
    block = os.urandom(MIB)
    src = path / "bytes"
    with open(src, "wb") as f:
        for lo in range(0, nbytes, MIB):
            f.write(block[: min(MIB, nbytes - lo)])
    sink = subprocess.Popen([sys.executable, str(PEERS), "sink"], stdout=subprocess.PIPE, env=_env())
    try:
        assert sink.stdout is not None
        port = int(_readline(sink, sink.stdout, 30))

        def pump(use_sendfile: bool) -> int:
            with socket.create_connection(("127.0.0.1", port)) as s:
                if use_sendfile:
                    with open(src, "rb") as f:
                        s.sendfile(f)
                else:
                    view = memoryview(block)
                    for lo in range(0, nbytes, MIB):
                        s.sendall(view[: min(MIB, nbytes - lo)])
                s.shutdown(socket.SHUT_WR)
                got = struct.unpack(">q", s.recv(8))[0]
            if got != nbytes:
                raise AssertionError(f"the sink read {got} bytes, expected {nbytes}")
            return n

        for id, use_sendfile, case in [
            ("BL1", True, "loopback pump, 2 processes: socket.sendfile -> recv_into(1 MiB)"),
            ("BL2", False, "loopback pump, 2 processes: sendall(1 MiB) -> recv_into(1 MiB)"),
        ]:
            b.timed_reads(
                Result(id, "broker", "machine", f"{case}, {nbytes:,} bytes", "records/s", n),
                lambda: None,
                lambda _ctx, s=use_sendfile: pump(s),
                lambda _ctx: nbytes,
            )
    finally:
        sink.kill()
        sink.wait()
        assert sink.stdout is not None
        sink.stdout.close()
        rmtree(path)
    rs = b.report.results
    return max(("BL1", "BL2"), key=lambda id: rs[id].mb_s or 0.0)
