"""What the broker's tests share: Kafka's clients pointed at a broker, `seglog serve`
as a child process, and Kafka requests built and parsed by hand with struct (so a
test can send what no client would)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder

# Kafka's error codes the tests look for.
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35

# ---------------------------------------------------------------- Kafka's clients


def producer(bootstrap: str, **conf: Any) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": False, "acks": "all", "linger.ms": 5, **conf}
    )


def consumer(bootstrap: str, **conf: Any) -> Consumer:
    # group.id is required by librdkafka; with assign() and explicit offsets no group API is used.
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **conf,
        }
    )


def produce_all(p: Producer, topic: str, items: list[dict[str, Any]], timeout: float = 30) -> list[Message]:
    """Produces each item (produce() keywords) and returns the delivery reports in send order;
    fails on any delivery error."""
    reports: dict[int, Message] = {}
    errors: list[tuple[int, KafkaError]] = []

    def report(i: int):  # type: ignore[no-untyped-def]
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append((i, err))
            reports[i] = msg

        return cb

    for i, item in enumerate(items):
        p.produce(topic, on_delivery=report(i), **item)
        p.poll(0)
    left = p.flush(timeout)
    assert left == 0, f"{left} records not delivered in {timeout}s"
    assert not errors, errors[:5]
    return [reports[i] for i in range(len(items))]


def consume_n(
    bootstrap: str, topic: str, partition: int, n: int, timeout: float = 30, **conf: Any
) -> list[Message]:
    """The first `n` records of one partition, read with assign() from the beginning."""
    c = consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append(m)
        assert len(out) == n, f"got {len(out)} of {n} records from {topic}/{partition}"
        return out
    finally:
        c.close()


def assert_serves(bootstrap: str, topic: str = "alive") -> None:
    """A real client still produces to the broker and reads its record back."""
    value = uuid.uuid4().bytes
    p = producer(bootstrap, **{"message.timeout.ms": 15000})
    [md] = produce_all(p, topic, [{"value": value, "partition": 0}])
    got = consume_n(bootstrap, topic, 0, md.offset() + 1)
    assert got[md.offset()].value() == value


# ---------------------------------------------------------------- seglog serve


def env() -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != "SEGLOG_STORE"}
    python = str(Path(__file__).resolve().parent.parent / "python")
    base["PYTHONPATH"] = os.pathsep.join(p for p in (python, base.get("PYTHONPATH")) if p)
    return base


class Served:
    """A `seglog serve` child process and what it printed."""

    def __init__(self, proc: subprocess.Popen[str], line: str) -> None:
        self.proc = proc
        self.line = line
        self.bootstrap = line.rsplit(" ", 1)[1]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        self.stderr: list[str] = []
        self.rest = ""
        assert proc.stderr is not None
        self._reader = threading.Thread(target=self.stderr.extend, args=(proc.stderr,), daemon=True)
        self._reader.start()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        """Signals the broker, waits for it and closes its pipes; its exit status.
        What it printed on stdout after the listening line is kept in `rest`."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self._reader.join(5)
            assert self.proc.stdout is not None and self.proc.stderr is not None
            self.rest = self.proc.stdout.read()
            self.proc.stdout.close()
            self.proc.stderr.close()
        return code

    def rss_kib(self, field: str = "VmRSS") -> int:
        """The process's resident memory (``VmRSS``, or ``RssFile``/``RssAnon``) in KiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise AssertionError(f"no {field}")


def start_serve(store: Path, *args: str, timeout: float = 30) -> Served:
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog", "serve", "--store", str(store), "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not lines or not lines[0].startswith("seglog: broker "):
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"seglog serve did not start: stdout {lines!r}, stderr {err}")
    return Served(proc, lines[0].rstrip("\n"))


@contextlib.contextmanager
def serving(store: Path, *args: str) -> Iterator[Served]:
    served = start_serve(store, *args)
    try:
        yield served
    finally:
        if served.proc.stdout is not None and not served.proc.stdout.closed:
            served.stop(signal.SIGTERM)


# ---------------------------------------------------------------- raw requests


def string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def frame(
    api_key: int, version: int, correlation_id: int, body: bytes, client_id: str | None = "raw"
) -> bytes:
    """A request with header v1 (every non-flexible request) and its size prefix."""
    msg = struct.pack(">hhi", api_key, version, correlation_id) + string(client_id) + body
    return struct.pack(">i", len(msg)) + msg


def connect(port: int, timeout: float = 10) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_response(s: socket.socket) -> tuple[int, bytes]:
    """(correlation id, body) of one response with header v0."""
    (size,) = struct.unpack(">i", recv_exact(s, 4))
    data = recv_exact(s, size)
    return struct.unpack_from(">i", data)[0], data[4:]


def closed_by_peer(s: socket.socket, timeout: float = 10) -> bool:
    """True if the broker closes the connection (EOF or reset) within `timeout`."""
    s.settimeout(timeout)
    try:
        while True:
            if not s.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def parse_api_versions_v0(body: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    """(error code, {api key: (min, max)}) of an ApiVersions v0 response body."""
    error, count = struct.unpack_from(">hi", body)
    apis = {}
    for i in range(count):
        key, lo, hi = struct.unpack_from(">hhh", body, 6 + 6 * i)
        apis[key] = (lo, hi)
    assert len(body) == 6 + 6 * count, "v0 has nothing after the api list"
    return error, apis


def api_versions(port: int, version: int = 0) -> tuple[int, dict[int, tuple[int, int]]]:
    """Asks ApiVersions on a fresh connection and parses the (v0-shaped) answer."""
    with connect(port) as s:
        s.sendall(frame(18, version, 4242, b""))
        corr, body = recv_response(s)
        assert corr == 4242
        return parse_api_versions_v0(body)


def init_producer_ids(port: int, n: int = 1) -> list[tuple[int, int, int]]:
    """(error code, producer id, epoch) of each of `n` InitProducerId v0 requests for an
    idempotent producer, asked one after another on one connection."""
    answers = []
    with connect(port) as s:
        for corr in range(n):
            s.sendall(frame(22, 0, corr, string(None) + struct.pack(">i", 60000)))
            got, body = recv_response(s)
            assert got == corr
            _throttle, error, pid, epoch = struct.unpack(">ihqh", body)
            answers.append((error, pid, epoch))
    return answers


def produce_request_v3(topic: str, partition: int, records: bytes, acks: int = -1) -> bytes:
    body = string(None) + struct.pack(">hi", acks, 10000)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">ii", partition, len(records)) + records
    return body


def topic_header(body: bytes, pos: int) -> tuple[str, int, int]:
    """A response's topic entry at ``pos``: its name, its partition count, and where
    its first partition starts."""
    (n,) = struct.unpack_from(">h", body, pos)
    name = body[pos + 2 : pos + 2 + n].decode()
    (nparts,) = struct.unpack_from(">i", body, pos + 2 + n)
    return name, nparts, pos + 6 + n


def parse_produce_v3(body: bytes) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, error code, base offset, log append time) per partition."""
    out = []
    (ntopics,) = struct.unpack_from(">i", body)
    pos = 4
    for _ in range(ntopics):
        name, nparts, pos = topic_header(body, pos)
        for _ in range(nparts):
            p, err, base, lat = struct.unpack_from(">ihqq", body, pos)
            pos += 22
            out.append((name, p, err, base, lat))
    return out


def fetch_request_v4(
    topic: str,
    partition: int,
    offset: int,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> bytes:
    body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", 1)
    body += struct.pack(">iqi", partition, offset, max_bytes)
    return body


def parse_fetch_v4(body: bytes) -> list[tuple[str, int, int, int, bytes]]:
    """(topic, partition, error code, high watermark, records) per partition."""
    out = []
    (_throttle, ntopics) = struct.unpack_from(">ii", body)
    pos = 8
    for _ in range(ntopics):
        name, nparts, pos = topic_header(body, pos)
        for _ in range(nparts):
            p, err, hw, _lso, naborted = struct.unpack_from(">ihqqi", body, pos)
            pos += 26 + max(naborted, 0) * 16
            (size,) = struct.unpack_from(">i", body, pos)
            pos += 4
            records = body[pos : pos + max(size, 0)]
            pos += max(size, 0)
            out.append((name, p, err, hw, records))
    return out


def record_batch(values: list[bytes], timestamp: int = 1_700_000_000_000) -> bytes:
    """A RecordBatch v2 built by kafka-python's own builder."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, v in enumerate(values):
        b.append(i, timestamp=timestamp + i, key=None, value=v, headers=[])
    return bytes(b.build())


def fetch_request_v11(
    session_id: int,
    epoch: int,
    partitions: list[tuple[str, int, int]],
    forgotten: list[tuple[str, int]] = (),  # type: ignore[assignment]
    max_wait_ms: int = 0,
) -> bytes:
    """A consumer's Fetch v11 body: the session (id, epoch), the (topic, partition,
    offset) to fetch and the (topic, partition) to forget."""
    body = struct.pack(">iiiibii", -1, max_wait_ms, 0, 1 << 20, 0, session_id, epoch)
    topics: dict[str, list[tuple[int, int]]] = {}
    for t, p, offset in partitions:
        topics.setdefault(t, []).append((p, offset))
    body += struct.pack(">i", len(topics))
    for t, ps in topics.items():
        body += string(t) + struct.pack(">i", len(ps))
        for p, offset in ps:
            body += struct.pack(">iiqqi", p, -1, offset, -1, 1 << 20)
    gone: dict[str, list[int]] = {}
    for t, p in forgotten:
        gone.setdefault(t, []).append(p)
    body += struct.pack(">i", len(gone))
    for t, ps in gone.items():
        body += string(t) + struct.pack(">i", len(ps)) + b"".join(struct.pack(">i", p) for p in ps)
    return body + string("")


def parse_fetch_v11(body: bytes) -> tuple[int, int, list[tuple[str, int, int, int, int]]]:
    """(error code, session id, [(topic, partition, error code, high watermark, record
    bytes)]) of a Fetch v11 response."""
    _throttle, error, session_id, ntopics = struct.unpack_from(">ihii", body)
    pos = 14
    out = []
    for _ in range(ntopics):
        name, nparts, pos = topic_header(body, pos)
        for _ in range(nparts):
            p, err, hw, _lso, _start, naborted = struct.unpack_from(">ihqqqi", body, pos)
            pos += 34 + max(naborted, 0) * 16 + 4  # and preferred_read_replica
            (size,) = struct.unpack_from(">i", body, pos)
            pos += 4 + max(size, 0)
            out.append((name, p, err, hw, max(size, 0)))
    return error, session_id, out
