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

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

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


# ---------------------------------------------------------------- connection and creation limits


def api_versions_answered(s: socket.socket, correlation_id: int, timeout: float = 10) -> bool:
    """Sends ApiVersions v0 and says whether its answer comes within `timeout`."""
    s.sendall(frame(18, 0, correlation_id, b""))
    s.settimeout(timeout)
    try:
        return recv_response(s)[0] == correlation_id
    except TimeoutError:
        return False


def test_an_address_over_max_connections_per_ip_is_closed_at_once(tmp_path: Path) -> None:
    with serve(tmp_path / "store", "--config", "max.connections.per.ip=3") as served:
        held = [connect(served.port) for _ in range(3)]
        try:
            assert all(api_versions_answered(s, i) for i, s in enumerate(held))
            with connect(served.port) as extra:
                assert closed_by_peer(extra), "a fourth connection from 127.0.0.1 is closed"
            assert metric(served, "seglog_connections_rejected_total") == 1
            held.pop().close()
            wait_until("the closed connection given back", lambda: metric(served, "seglog_connections") == 2)
            with connect(served.port) as again:
                assert api_versions_answered(again, 9), "a place freed is taken again"
        finally:
            for s in held:
                s.close()
        alive(served)


def test_at_max_connections_accepting_waits_until_one_closes(tmp_path: Path) -> None:
    with serve(tmp_path / "store", "--config", "max.connections=3") as served:
        held = [connect(served.port) for _ in range(3)]
        try:
            assert all(api_versions_answered(s, i) for i, s in enumerate(held))
            # The kernel completes the fourth handshake; the broker does not accept it.
            waiting = connect(served.port)
            waiting.sendall(frame(18, 0, 7, b""))
            wait_until("accepting stopped", lambda: metric(served, "seglog_connection_slot_waits_total") >= 1)
            assert metric(served, "seglog_connections_created_total") == 3, "the fourth is not accepted"
            held.pop().close()
            waiting.settimeout(10)
            assert recv_response(waiting)[0] == 7, "accepted and answered once a connection closed"
            assert metric(served, "seglog_connections_created_total") == 4
            waiting.close()
        finally:
            for s in held:
                s.close()
        alive(served)


def test_a_listener_at_its_own_max_connections_waits_while_the_others_serve(tmp_path: Path) -> None:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "listener.name.internal.max.connections": "1",
    }
    with seglog.Broker(tmp_path / "store", config=config) as broker:
        port = {name: int(address.rsplit(":", 1)[1]) for name, (_, address) in broker.listeners.items()}
        held = connect(port["INTERNAL"])
        assert api_versions_answered(held, 1)
        waiting = connect(port["INTERNAL"])
        waiting.sendall(frame(18, 0, 7, b""))
        wait_until("accepting on INTERNAL stopped", lambda: broker.stats()["connection_slot_waits"] >= 1)
        others = [connect(port["PLAINTEXT"]) for _ in range(3)]
        assert all(api_versions_answered(s, i) for i, s in enumerate(others, 10)), "PLAINTEXT accepts on"
        assert broker.stats()["connections_created"] == 4, "the second INTERNAL connection is not accepted"
        held.close()
        waiting.settimeout(10)
        assert recv_response(waiting)[0] == 7, "accepted and answered once the first closed"
        for s in [waiting, *others]:
            s.close()
    with pytest.raises(seglog.InvalidConfigError, match="there is no listener NOWHERE"):
        seglog.Broker(tmp_path / "other", config={"listener.name.nowhere.max.connections": "1"})


def create_topics_request(correlation_id: int, topics: list[tuple[str, int]], validate_only: bool) -> bytes:
    """CreateTopics v2: each topic with a partition count, replication factor -1."""
    body = struct.pack(">i", len(topics))
    for name, partitions in topics:
        body += string(name) + struct.pack(">ihii", partitions, -1, 0, 0)
    body += struct.pack(">i?", 30000, validate_only)
    return frame(19, 2, correlation_id, body)


def parse_create_topics_v2(body: bytes) -> dict[str, tuple[int, str | None]]:
    (count,) = struct.unpack_from(">i", body, 4)  # after throttle_time_ms
    pos, answers = 8, {}
    for _ in range(count):
        (n,) = struct.unpack_from(">h", body, pos)
        name = body[pos + 2 : pos + 2 + n].decode()
        pos += 2 + n
        code, m = struct.unpack_from(">hh", body, pos)
        pos += 4
        message = None if m < 0 else body[pos : pos + m].decode()
        pos += max(m, 0)
        answers[name] = (code, message)
    return answers


def create_topics(port: int, topics: list[tuple[str, int]], validate_only: bool = False) -> dict:
    with connect(port, timeout=120) as s:
        s.sendall(create_topics_request(3, topics, validate_only))
        corr, body = recv_response(s)
        assert corr == 3
        return parse_create_topics_v2(body)


def metadata_v1(port: int, names: list[str]) -> None:
    """Metadata v1 naming `names` (a version that always asks to create them); the answer
    is read and dropped."""
    body = struct.pack(">i", len(names)) + b"".join(string(n) for n in names)
    with connect(port, timeout=300) as s:
        s.sendall(frame(3, 1, 5, body))
        assert recv_response(s)[0] == 5


POLICY_VIOLATION = 44
TOO_MANY = "Excessively large number of partitions per request."


def test_one_request_creates_at_most_ten_thousand_partitions(tmp_path: Path) -> None:
    """Kafka 4's bound on what one request may create, all its topics together: over it,
    every topic of the request is refused with POLICY_VIOLATION and nothing is made."""
    path = tmp_path / "store"
    with serve(path) as served:
        over = create_topics(served.port, [("a", 4000), ("b", 4000), ("c", 2001)], validate_only=True)
        assert over == {t: (POLICY_VIOLATION, TOO_MANY) for t in "abc"}
        at = create_topics(served.port, [("a", 4000), ("b", 4000), ("c", 2000)], validate_only=True)
        assert at == {t: (0, None) for t in "abc"}
        assert create_topics(served.port, [("huge", 100_000)]) == {"huge": (POLICY_VIOLATION, TOO_MANY)}
        # CreatePartitions counts what each topic adds, in order: the topic past the bound
        # is refused, the one before it is not.
        assert create_topics(served.port, [("grow-a", 1), ("grow-b", 1)]) == {
            "grow-a": (0, None),
            "grow-b": (0, None),
        }
        admin = AdminClient({"bootstrap.servers": served.bootstrap})
        grown = admin.create_partitions(
            [NewPartitions("grow-a", 6000), NewPartitions("grow-b", 6000)], validate_only=True
        )
        grown["grow-a"].result(30)
        with pytest.raises(KafkaException) as refused:
            grown["grow-b"].result(30)
        assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION, refused.value
        assert refused.value.args[0].str() == TOO_MANY
        # Metadata's auto-creation counts the same way: 10,001 new names make nothing.
        metadata_v1(served.port, [f"auto-{i}" for i in range(10_001)])
        metadata_v1(served.port, ["auto-a", "auto-b"])
        alive(served)
    with seglog.open(path) as store:
        assert sorted(store.topics()) == ["auto-a", "auto-b", "grow-a", "grow-b"]
        assert [store.partition_count(t) for t in ("grow-a", "grow-b")] == [1, 1]


def descriptor_limit(served: Served) -> int:
    """The broker's soft limit on open files, from /proc."""
    for line in Path(f"/proc/{served.proc.pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no Max open files")


def test_a_flood_of_connections_and_creations_leaves_the_broker_serving(tmp_path: Path) -> None:
    """2,000 connections, each with requests pipelined and never read; a Metadata request
    naming 10,000 new topics; CreateTopics asking for 100,000 partitions, in one topic and
    over ten. The broker stays up within its descriptors and memory, and a well-behaved
    client is served throughout."""
    path = tmp_path / "store"
    with serve(path) as served:
        assert_serves(served.bootstrap)
        fds = baseline_fds(served)
        rss = served.rss_kib()
        socks = []
        try:
            pipelined = b"".join(frame(3, 1, i, struct.pack(">i", -1)) for i in range(20))
            for _ in range(2000):
                s = connect(served.port)
                s.sendall(pipelined)
                socks.append(s)
            wait_until("2,000 connections open", lambda: metric(served, "seglog_connections") >= 2000, 60)
            metadata_v1(served.port, [f"flood-{i}" for i in range(10_000)])
            one = create_topics(served.port, [("huge", 100_000)])
            assert one == {"huge": (POLICY_VIOLATION, TOO_MANY)}, one
            ten = create_topics(served.port, [(f"big-{i}", 10_000) for i in range(10)])
            assert {code for code, _ in ten.values()} == {POLICY_VIOLATION}, ten
            assert_serves(served.bootstrap)
            open_now = open_fds(served)
            print(f"descriptors {open_now} (baseline {fds}), RSS grew {served.rss_kib() - rss} KiB")
            # Each connection and each new partition's open segment take one descriptor.
            assert open_now <= fds + 2000 + 10_000 + 50, open_now
            assert open_now < descriptor_limit(served)
            assert served.rss_kib() - rss < 512 * 1024, "RSS within half a GiB of its baseline"
        finally:
            for s in socks:
                reset(s)
        wait_until("the connections gone", lambda: metric(served, "seglog_connections") == 0, 60)
        assert_serves(served.bootstrap)
        alive(served)
    with seglog.open(path) as store:
        made = store.topics()
        assert sum(1 for t in made if t.startswith("flood-")) == 10_000
        assert not [t for t in made if t.startswith(("huge", "big-"))]
