"""What a client can make the broker hold, and for how long: long polls abandoned by
their clients, responses nobody reads, frames that claim more bytes than ever arrive.
Each test runs `seglog serve` as a child, counts its open descriptors and its resident
memory from /proc, and checks that a well-behaved Kafka client is served meanwhile and
that the descriptors return to their baseline once the hostile clients are gone."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import Producer

import seglog
from broker_helpers import (
    Served,
    assert_serves,
    closed_by_peer,
    connect,
    fetch_request_v4,
    frame,
    recv_response,
    string,
)
from cluster_helpers import wait_for
from test_broker_input import alive, metric, serve

NEVER = 0x7FFFFFFF  # Fetch's max_wait_ms and min_bytes at their largest


def open_fds(served: Served) -> int:
    return len(os.listdir(f"/proc/{served.proc.pid}/fd"))


def baseline_fds(served: Served) -> int:
    """The broker's descriptors once no client is connected (earlier clients' closes seen)."""
    wait_until("no client connected", lambda: metric(served, "seglog_connections") == 0)
    return open_fds(served)


def wait_until(what: str, check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.05)


def reset(s: socket.socket) -> None:
    """Closes with an RST (SO_LINGER 0), as a crashed client's kernel would."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@contextlib.contextmanager
def parked_fetches(served: Served, n: int, topic: str = "idle") -> Iterator[list[socket.socket]]:
    """`n` connections, each with a Fetch parked at the broker until the end of time."""
    request = frame(1, 4, 1, fetch_request_v4(topic, 0, 0, max_wait_ms=NEVER, min_bytes=NEVER))
    socks = []
    try:
        for _ in range(n):
            s = connect(served.port)
            s.sendall(request)
            socks.append(s)
        yield socks
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()


def test_abandoned_long_polls_are_dropped_with_their_connections(tmp_path: Path) -> None:
    with serve(tmp_path / "store") as served:
        assert_serves(served.bootstrap, topic="idle")
        baseline = baseline_fds(served)
        n = 400
        with parked_fetches(served, n) as socks:
            wait_until("every long poll parked", lambda: metric(served, "seglog_purgatory_parked") == n)
            # One descriptor per parked connection (the broker's own files may have
            # closed one or two since the baseline was taken).
            assert open_fds(served) >= n
            # (The same topic: a new one would open a segment, one more descriptor.)
            assert_serves(served.bootstrap, topic="idle")
            # Half go away with a reset, half with a plain close; none reads an answer.
            for i, s in enumerate(socks):
                if i % 2:
                    reset(s)
                else:
                    s.close()
        # At least n: the well-behaved consumer's own last long poll may be dropped too
        # when it closes.
        wait_until("every long poll dropped", lambda: metric(served, "seglog_requests_cancelled_total") >= n)
        wait_until("nothing parked", lambda: metric(served, "seglog_purgatory_parked") == 0)
        wait_until("the broker's descriptors back to their baseline", lambda: open_fds(served) <= baseline)
        assert_serves(served.bootstrap)
        alive(served)


def test_a_long_poll_behind_a_pipelined_request_is_dropped_too(tmp_path: Path) -> None:
    # The client sends a second request before the first is answered: the socket stays
    # readable, and the broker must still see the client go.
    with serve(tmp_path / "store") as served:
        assert_serves(served.bootstrap, topic="idle")
        baseline = baseline_fds(served)
        request = frame(1, 4, 1, fetch_request_v4("idle", 0, 0, max_wait_ms=NEVER, min_bytes=NEVER))
        s = connect(served.port)
        s.sendall(request + frame(18, 0, 2, b""))
        wait_until("the long poll parked", lambda: metric(served, "seglog_purgatory_parked") == 1)
        s.shutdown(socket.SHUT_WR)
        s.close()
        wait_until("the long poll dropped", lambda: metric(served, "seglog_requests_cancelled_total") == 1)
        wait_until("the broker's descriptors back to their baseline", lambda: open_fds(served) <= baseline)


def test_responses_nobody_reads_are_given_up_after_the_idle_time(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with seglog.open(path) as store:
        store.create_topic("big", partitions=1)
        chunk = os.urandom(900_000)
        for _ in range(28):
            store.append("big", 0, [(None, chunk)])
    with serve(path, "--config", "connections.max.idle.ms=1500") as served:
        assert_serves(served.bootstrap)
        baseline = baseline_fds(served)
        request = frame(1, 4, 7, fetch_request_v4("big", 0, 0, max_bytes=64 << 20))
        socks = []
        try:
            for _ in range(20):
                s = connect(served.port)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(request)
                socks.append(s)
            # The clients stay connected and never read: the broker closes them.
            wait_until(
                "every stalled response given up",
                lambda: metric(served, "seglog_connection_write_timeouts_total") == 20,
            )
            assert_serves(served.bootstrap)
            wait_until(
                "the broker's descriptors back to their baseline", lambda: open_fds(served) <= baseline
            )
        finally:
            for s in socks:
                s.close()
        alive(served)


def test_frames_claiming_bytes_that_never_arrive_hold_no_memory(tmp_path: Path) -> None:
    with serve(tmp_path / "store") as served:
        assert_serves(served.bootstrap)
        fds = baseline_fds(served)
        baseline = served.rss_kib()
        socks = []
        try:
            for i in range(64):
                s = connect(served.port)
                # A header claiming 64 MiB, the first 8 bytes of a request, then nothing.
                s.sendall(struct.pack(">ihhi", 64 << 20, 0, 3, i))
                socks.append(s)
            wait_until("every claim read", lambda: metric(served, "seglog_queued_request_bytes") >= 64 * 8)
            assert_serves(served.bootstrap)
            held = metric(served, "seglog_queued_request_bytes")
            # Each holds the first read's room (64 KiB), not its claim (4 GiB in all); the
            # well-behaved client's requests may add a little.
            assert held <= 65 * (64 << 10), held
            grown = served.rss_kib() - baseline
            assert grown < 64 * 1024, f"RSS grew by {grown} KiB"
        finally:
            for s in socks:
                s.close()
        wait_until("the broker's descriptors back to their baseline", lambda: open_fds(served) <= fds)
        wait_until("the claims' room given back", lambda: metric(served, "seglog_queued_request_bytes") == 0)
        alive(served)


def test_the_request_memory_bound_holds_back_readers_not_the_broker(tmp_path: Path) -> None:
    # queued.max.request.bytes at 2 MiB, and 8 clients each sending a 1 MiB request but
    # its last byte: two get room, the rest wait for it holding none (their first 64 KiB
    # read aside); small requests are served meanwhile; once the clients are gone, the
    # room comes back.
    with serve(
        tmp_path / "store",
        "--config",
        "queued.max.request.bytes=2097152",
        "--config",
        "socket.request.max.bytes=1048576",
    ) as served:
        assert_serves(served.bootstrap)
        socks = []
        try:
            for i in range(8):
                s = connect(served.port)
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.send(struct.pack(">ihhi", 1 << 20, 0, 3, i) + b"\0" * ((1 << 20) - 9))
                socks.append(s)
            wait_until("the pool used up", lambda: metric(served, "seglog_queued_request_bytes") >= 2 << 20)
            assert metric(served, "seglog_queued_request_bytes") <= (2 << 20) + 6 * (64 << 10)
            assert_serves(served.bootstrap)
        finally:
            for s in socks:
                reset(s)
        wait_until("the room given back", lambda: metric(served, "seglog_queued_request_bytes") == 0)
        assert_serves(served.bootstrap)
        alive(served)


def test_appends_wake_only_the_long_polls_of_their_partition(tmp_path: Path) -> None:
    # 500 Fetches parked on idle-0 beside a producer writing to busy-0: the appends to
    # busy wake none of them (the purgatory counts every wake-up); one append to idle
    # wakes each of them once, and they park again (min_bytes not reached).
    path = tmp_path / "store"
    with seglog.open(path) as store:
        store.create_topic("idle", partitions=2)
        store.create_topic("busy", partitions=1)
    with serve(path) as served:
        n = 500
        with parked_fetches(served, n) as socks:
            wait_until("every long poll parked", lambda: metric(served, "seglog_purgatory_parked") == n)
            before = metric(served, "seglog_purgatory_wakeups_total")
            p = producer_to(served)
            for i in range(200):
                p.produce("busy", b"%d" % i)
                p.flush(30)  # one request, one append each
            # The other partition of the same topic does not wake them either.
            p.produce("idle", b"elsewhere", partition=1)
            assert p.flush(30) == 0
            assert metric(served, "seglog_purgatory_wakeups_total") == before
            p.produce("idle", b"here", partition=0)
            assert p.flush(30) == 0
            wait_until(
                "each long poll woken once",
                lambda: metric(served, "seglog_purgatory_wakeups_total") >= before + n,
            )
            assert metric(served, "seglog_purgatory_wakeups_total") == before + n
            assert metric(served, "seglog_purgatory_parked") == n
            assert_serves(served.bootstrap)
            for s in socks:
                reset(s)
        wait_until("every long poll dropped", lambda: metric(served, "seglog_purgatory_parked") == 0)
        alive(served)


def producer_to(served: Served) -> Producer:
    return Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 0})


def metadata_of_empty_names(n: int) -> bytes:
    """Metadata v1 naming `n` topics, each an empty string: 2 bytes on the wire, a
    struct of about a hundred once decoded."""
    return frame(3, 1, 1, struct.pack(">i", n) + b"\0\0" * n)


def test_a_request_that_would_decode_past_the_request_memory_is_refused(tmp_path: Path) -> None:
    with serve(tmp_path / "store") as served:
        assert_serves(served.bootstrap)
        baseline = served.rss_kib()
        # 100,000 names (200 kB): charged 100 times its size, within the pool: answered.
        with connect(served.port, timeout=60) as s:
            s.sendall(metadata_of_empty_names(100_000))
            corr, body = recv_response(s)
            assert corr == 1
            (brokers,) = struct.unpack_from(">i", body)
            assert brokers == 1
        # 3,800,000 names (7.6 MB) would take about 100 times that decoded, more than
        # queued.max.request.bytes (512 MiB): the connection is closed before decoding.
        with connect(served.port, timeout=60) as s:
            s.sendall(metadata_of_empty_names(3_800_000))
            assert closed_by_peer(s, timeout=60)
        grown = served.rss_kib() - baseline
        assert grown < 200 * 1024, f"RSS grew by {grown} KiB"
        # The broker logs the refusal before it closes; its stderr reaches this
        # process through a reader thread, which may not have caught up yet.
        wait_for(
            "the refusal logged",
            lambda: any("more than queued.max.request.bytes" in line for line in served.stderr),
            10,
        )
        assert_serves(served.bootstrap)
        alive(served)


def slow_reader(port: int) -> socket.socket:
    """A connection whose receive window is a few kilobytes from the start."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s


def describe_configs(correlation_id: int, topic: str, copies: int) -> bytes:
    """DescribeConfigs v1 naming one topic `copies` times, with synonyms: a request of
    8 bytes a copy whose answer is about 2.4 kB a copy (Kafka's 36 topic keys)."""
    resource = struct.pack(">b", 2) + string(topic) + struct.pack(">i", -1)
    return frame(32, 1, correlation_id, struct.pack(">i", copies) + resource * copies + b"\x01")


def test_large_responses_nobody_reads_hold_at_most_the_response_memory(tmp_path: Path) -> None:
    # 50 clients each ask for a 5.6 MB answer with a 19 kB request (more than a
    # socket's send buffer takes) and never read it. The broker holds at most
    # queued.max.response.bytes of answers (held whole, they would take 280 MB); the
    # others wait for room holding nothing and are made again once there is some.
    # Clients with small answers are served throughout, and once the stalled clients
    # are gone a large answer is served again.
    path = tmp_path / "store"
    with seglog.open(path) as store:
        store.create_topic("t", partitions=1)
    cap = 8 << 20
    request = describe_configs(7, "t", 2400)
    with serve(path, "--config", f"queued.max.response.bytes={cap}") as served:
        assert_serves(served.bootstrap)
        with connect(served.port) as s:
            s.sendall(request)
            _, answer = recv_response(s)
        assert len(answer) > 5 << 20
        fds = baseline_fds(served)
        baseline = served.rss_kib()
        socks = []
        try:
            for _ in range(50):
                s = slow_reader(served.port)
                s.sendall(request)
                socks.append(s)
            wait_until(
                "answers waiting for room", lambda: metric(served, "seglog_responses_deferred_total") >= 45
            )
            held = metric(served, "seglog_queued_response_bytes")
            # The pool, plus a small answer of the well-behaved client's at most.
            assert held <= cap + (64 << 10), held
            grown = served.rss_kib() - baseline
            # The pool, and the answers being made (two at a time, each some tens of
            # megabytes before it is encoded); without the pool, 270 MB.
            assert grown < 112 * 1024, f"RSS grew by {grown} KiB"
            assert_serves(served.bootstrap)
        finally:
            for s in socks:
                reset(s)
        wait_until("the room given back", lambda: metric(served, "seglog_queued_response_bytes") == 0)
        wait_until("the broker's descriptors back to their baseline", lambda: open_fds(served) <= fds)
        with connect(served.port) as s:
            s.sendall(request)
            assert recv_response(s) == (7, answer)
        alive(served)
