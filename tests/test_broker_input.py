"""The broker on hostile input: garbage, bad sizes, cut frames, unknown APIs and versions,
malformed bodies, idle and never-reading clients. Each connection may be closed (and
counted), but the broker stays up and Kafka's clients keep working. The broker runs as a
`seglog serve` child here, so that a broker that dies shows up as a failed test rather
than taking the test run down with it."""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import seglog
from broker_helpers import (
    UNSUPPORTED_VERSION,
    Served,
    api_versions,
    assert_serves,
    closed_by_peer,
    connect,
    fetch_request_v4,
    frame,
    parse_api_versions_v0,
    produce_request_v3,
    record_batch,
    recv_response,
    start_serve,
    string,
)

SERVED_APIS = {0, 1, 2, 3, 18}  # Produce, Fetch, ListOffsets, Metadata, ApiVersions
NOT_CONTROLLER = 41


def metric(served: Served, name: str) -> float:
    """A counter from the broker's Prometheus endpoint."""
    [address] = [
        m.group(1) for line in served.stderr if (m := re.search(r"metrics on http://(\S+)/metrics", line))
    ]
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    assert m, f"no {name} in the metrics"
    return float(m.group(1))


@contextlib.contextmanager
def serve(path: Path, *args: str) -> Iterator[Served]:
    served = start_serve(path, "--metrics", "127.0.0.1:0", *args)
    try:
        deadline = time.monotonic() + 10
        while not any("metrics on" in line for line in served.stderr) and time.monotonic() < deadline:
            time.sleep(0.01)
        yield served
    finally:
        if served.proc.stdout is not None and not served.proc.stdout.closed:
            served.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(
        tmp_path_factory.mktemp("input") / "store", "--config", "socket.request.max.bytes=1048576"
    ) as s:
        yield s


def alive(served: Served) -> None:
    assert served.proc.poll() is None, (
        f"the broker died ({served.proc.returncode}):\n{''.join(served.stderr[-20:])}"
    )


# ---------------------------------------------------------------- bad input, one connection each


def metadata_v1(count: int, names: list[str]) -> bytes:
    return struct.pack(">i", count) + b"".join(string(n) for n in names)


CLOSING_INPUT = {
    "garbage": b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "binary garbage": struct.pack(">i", 256) + bytes(range(255, -1, -1)),
    "huge length": struct.pack(">i", 200 << 20) + b"\0" * 64,
    "just over socket.request.max.bytes": struct.pack(">i", (1 << 20) + 1) + b"\0" * 64,
    "negative length": struct.pack(">i", -5) + b"\0" * 16,
    "length below a header": struct.pack(">i", 3) + b"abc",
    "unknown api key": frame(999, 0, 1, b""),
    "api not served (CreateTopics)": frame(19, 2, 1, b"\0\0\0\0\0\0\0\0"),
    "Produce v2 (below the served range)": frame(0, 2, 1, produce_request_v3("t", 0, record_batch([b"x"]))),
    "Produce v99": frame(0, 99, 1, produce_request_v3("t", 0, record_batch([b"x"]))),
    "Fetch v3": frame(1, 3, 1, fetch_request_v4("t", 0, 0)),
    "malformed Metadata: 5 topics, 1 there": frame(3, 1, 1, metadata_v1(5, ["a"])),
    "ControlledShutdown v2 without its broker epoch": frame(7, 2, 1, struct.pack(">i", 1)),
    "ControlledShutdown v0 (a header of its own, not served)": frame(7, 0, 1, struct.pack(">i", 1)),
    "malformed Metadata: a string longer than the frame": frame(3, 1, 1, struct.pack(">ih", 1, 300) + b"abc"),
    "malformed Produce: records longer than the frame": frame(
        0, 3, 1, produce_request_v3("t", 0, b"")[:-4] + struct.pack(">i", 10_000) + b"x" * 10
    ),
}


@pytest.mark.parametrize("data", list(CLOSING_INPUT.values()), ids=list(CLOSING_INPUT))
def test_bad_input_closes_its_connection_and_is_counted(served: Served, data: bytes) -> None:
    errors = metric(served, "seglog_connection_errors_total")
    with connect(served.port) as s:
        s.sendall(data)
        assert closed_by_peer(s), "the broker kept a connection it cannot serve"
    alive(served)
    assert metric(served, "seglog_connection_errors_total") == errors + 1
    assert_serves(served.bootstrap)


def test_a_frame_cut_short_by_the_client_is_counted(served: Served) -> None:
    errors = metric(served, "seglog_connection_errors_total")
    whole = frame(3, 1, 1, metadata_v1(1, ["cut"]))
    for cut in (2, 9, len(whole) - 1):  # inside the size, inside the header, inside the body
        with connect(served.port) as s:
            s.sendall(whole[:cut])
            s.shutdown(socket.SHUT_WR)
            assert closed_by_peer(s)
    deadline = time.monotonic() + 10
    while metric(served, "seglog_connection_errors_total") < errors + 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert metric(served, "seglog_connection_errors_total") == errors + 3
    alive(served)
    assert_serves(served.bootstrap)


def test_controlled_shutdown_asked_of_a_broker_outside_a_cluster_is_not_controller(served: Served) -> None:
    """ControlledShutdown (encoded by hand, as Kafka's inter-broker API) is advertised
    and answered: a broker that is not a controller says NOT_CONTROLLER, in v1 and in the
    flexible v3."""
    _, apis = api_versions(served.port)
    assert apis[7] == (1, 3)
    with connect(served.port) as s:
        s.sendall(frame(7, 1, 41, struct.pack(">i", 5)))
        corr, resp = recv_response(s)
        assert corr == 41 and resp == struct.pack(">hi", NOT_CONTROLLER, 0)
        header = struct.pack(">hhi", 7, 3, 42) + string("broker-5") + b"\0"
        body = struct.pack(">iq", 5, 1234) + b"\0"
        s.sendall(struct.pack(">i", len(header + body)) + header + body)
        corr, resp = recv_response(s)
        # Response header v1 (no tagged fields), error, an empty compact array, no tags.
        assert corr == 42 and resp == b"\0" + struct.pack(">h", NOT_CONTROLLER) + b"\x01\0"
    alive(served)


def api_versions_flexible(version: int, correlation_id: int) -> bytes:
    """ApiVersions as a client sends v3+: header v2 (tagged fields), compact strings."""
    header = struct.pack(">hhi", 18, version, correlation_id) + string("future-client") + b"\0"
    body = b"\x04seg" + b"\x021" + b"\0"  # client software name and version, no tags
    return struct.pack(">i", len(header + body)) + header + body


def test_api_versions_of_an_unknown_version_gets_unsupported_version_in_v0(served: Served) -> None:
    with connect(served.port) as s:
        # Header v2, as a flexible request would be sent: the broker must not try to decode it.
        s.sendall(api_versions_flexible(99, 31))
        corr, resp = recv_response(s)
        assert corr == 31
        error, apis = parse_api_versions_v0(resp)
        assert error == UNSUPPORTED_VERSION
        assert set(apis) >= SERVED_APIS and apis[18] == (0, 3)
        # The client retries on the same connection, with a version the broker has.
        s.sendall(frame(18, 0, 32, b""))
        corr, resp = recv_response(s)
        assert corr == 32 and parse_api_versions_v0(resp)[0] == 0
    with connect(served.port) as s:
        s.sendall(api_versions_flexible(3, 33))
        corr, resp = recv_response(s)  # v3 answers with header v0 too
        assert corr == 33 and struct.unpack_from(">h", resp)[0] == 0
        assert resp[2] - 1 == len(apis), "a compact array of the same APIs"
    alive(served)


def test_an_array_count_beyond_its_frame_does_not_kill_the_broker(tmp_path: Path) -> None:
    # 22 bytes: Metadata v1 claiming i32::MAX topics. A decoder that reserves room for the
    # claimed count before reading asks for ~100 GB, and the failed allocation aborts.
    with serve(tmp_path / "store") as served:
        with connect(served.port) as s:
            s.sendall(frame(3, 1, 1, metadata_v1(0x7FFFFFFF, [])))
            assert closed_by_peer(s)
        time.sleep(0.2)
        alive(served)
        assert_serves(served.bootstrap)


# ---------------------------------------------------------------- idle and slow clients


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(store: seglog.Store) -> None:
    with seglog.Broker(store, connections_max_idle_ms=300) as broker:
        with connect(broker.port) as idle, connect(broker.port) as busy:
            # The busy connection talks, a request per look at the idle one, until the
            # idle one is closed: opened together, only the silent one goes.
            corr = 0
            while not closed_by_peer(idle, timeout=0.1):
                busy.sendall(frame(18, 0, corr, b""))
                assert recv_response(busy)[0] == corr
                corr += 1
                assert corr < 300, "the idle connection was never closed"
            busy.sendall(frame(18, 0, 99, b""))
            assert recv_response(busy)[0] == 99
        stats = broker.stats()
        assert stats["connection_errors"] == 0, "an idle close is not an error"
        assert stats["connections_idle_closed"] == 1


@pytest.mark.parametrize("sendfile", ["true", "false"])
def test_a_client_that_never_reads_cannot_grow_the_broker_s_memory(tmp_path: Path, sendfile: str) -> None:
    path = tmp_path / "store"
    with seglog.open(path) as store:
        store.create_topic("big", partitions=1)
        chunk = bytes(range(256)) * 3000  # 768 kB, incompressible enough
        for i in range(40):
            store.append("big", 0, [(b"%d" % i, chunk)])  # ~30 MB
    with serve(path, "--config", f"socket.sendfile.enable={sendfile}") as served:
        assert_serves(served.bootstrap)
        baseline = served.rss_kib()
        request = frame(1, 4, 7, fetch_request_v4("big", 0, 0, max_bytes=64 << 20))
        peak = baseline
        sent = 0
        with connect(served.port) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.setblocking(False)
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                try:
                    sent += s.send(request * 64)
                except BlockingIOError:
                    time.sleep(0.05)
                peak = max(peak, served.rss_kib())
            # Each request asks for the whole ~30 MB topic: a broker reading ahead of its
            # writes would hold (sent / len(request)) responses.
            assert sent // len(request) > 100
            for _ in range(20):
                peak = max(peak, served.rss_kib())
                time.sleep(0.05)
            alive(served)
        assert peak - baseline < 200 * 1024, f"RSS grew from {baseline} to {peak} KiB"
        assert_serves(served.bootstrap)


# ---------------------------------------------------------------- property: random frames


def seeds() -> list[bytes]:
    """Valid requests of each served API, framed."""
    return [
        frame(18, 0, 1, b""),
        frame(3, 1, 2, metadata_v1(1, ["fuzz"])),
        frame(3, 1, 3, struct.pack(">i", -1)),
        frame(0, 3, 4, produce_request_v3("fuzz", 0, record_batch([b"a", b"bb"]))),
        frame(1, 4, 5, fetch_request_v4("fuzz", 0, 0, max_wait_ms=0)),
        frame(2, 1, 6, struct.pack(">ii", -1, 1) + string("fuzz") + struct.pack(">iiq", 1, 0, -2)),
    ]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds())))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "int32", "length"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "int32" and at + 4 <= len(data):
            value = draw(
                st.sampled_from([-1, 0, 1, 0x7FFFFFFF, -0x80000000, 1 << 20])
                | st.integers(-(2**31), 2**31 - 1)
            )
            data[at : at + 4] = struct.pack(">i", value)
        elif kind == "length" and len(data) >= 4:
            # A size prefix that disagrees with what follows.
            data[0:4] = struct.pack(">i", draw(st.integers(-10, len(data) + 10)))
    return bytes(data)


FRAMES = st.one_of(
    st.binary(max_size=300),
    st.binary(min_size=1, max_size=200).map(lambda b: struct.pack(">i", len(b)) + b),
    mutated(),
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serve(tmp_path_factory.mktemp("fuzz") / "store") as s:
        yield s


@settings(
    max_examples=200,
    deadline=None,
    database=None,
    # A dead broker fails every later example: shrinking would only report noise.
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(frame(2, 1, 9, struct.pack(">ii", -1, 0x7FFFFFFF)))  # ListOffsets, 2^31-1 topics
@given(data=FRAMES)
def test_after_any_frame_the_broker_still_answers_api_versions(fuzzed: Served, data: bytes) -> None:
    alive(fuzzed)
    with connect(fuzzed.port, timeout=2) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(0.3)
            while s.recv(1 << 16):
                pass
        except OSError:
            pass  # answered, closed, or still waiting on a long poll: all fine
    error, apis = api_versions(fuzzed.port)
    assert error == 0 and set(apis) >= SERVED_APIS
    alive(fuzzed)
