"""seglog.testing's pytest plugin as a user's project meets it: the fixtures in this
suite (loaded through the ``pytest11`` entry point, as in any project with seglog
installed), their skip and fail rules in a separate pytest run, and a tiny separate
project whose tests run against the installed wheel with confluent-kafka, no Java and
no Docker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

import seglog
from seglog.testing import LocalCluster

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent


def test_the_plugin_is_loaded_by_its_entry_point(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("seglog")
    assert plugin is not None and plugin.__name__ == "seglog.testing.plugin"


def test_seglog_store_is_a_writable_store(seglog_store: seglog.Store, tmp_path: Path) -> None:
    assert Path(seglog_store.path).parent == tmp_path
    seglog_store.create_topic("t")
    assert seglog_store.append("t", 0, [b"a", b"b"]) == (0, 1)


@pytest.fixture
def seglog_broker_config() -> Mapping[str, object]:
    # Overridden as a user's conftest would: the broker is built with it.
    return {"node.id": 7}


def test_seglog_broker_serves_kafka_clients(seglog_broker: seglog.Broker, seglog_store: seglog.Store) -> None:
    assert seglog_broker.node_id == 7
    assert seglog_broker.store is seglog_store
    servers = seglog_broker.bootstrap_servers
    p = Producer({"bootstrap.servers": servers})
    for i in range(5):
        p.produce("orders", key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": servers,
            "group.id": "plugin-test",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe(["orders"])
        got: list[bytes] = []
        while len(got) < 5:
            msgs = c.consume(5, timeout=30)
            assert msgs, "nothing consumed in 30 s"
            got += [m.value() for m in msgs if m.error() is None]
    finally:
        c.close()
    assert sorted(got) == [b"v%d" % i for i in range(5)]
    # The same log, through the store the test also holds.
    assert seglog_store.offsets("orders", 0) == (0, 5)


@pytest.mark.cluster
def test_seglog_cluster_is_ready_for_replicated_topics(seglog_cluster: LocalCluster) -> None:
    assert seglog_cluster.broker_ids == [1, 2, 3]
    admin = AdminClient({"bootstrap.servers": seglog_cluster.bootstrap_servers})
    admin.create_topics([NewTopic("r", num_partitions=2, replication_factor=3)])["r"].result(60)
    md = admin.list_topics("r", timeout=30)
    assert {b for b in md.brokers} == {1, 2, 3}
    for p in md.topics["r"].partitions.values():
        assert sorted(p.replicas) == [1, 2, 3]


USER_TEST = textwrap.dedent(
    """
    def test_cluster(seglog_cluster):
        raise AssertionError("a cluster without ZooKeeper")
    """
)


@pytest.mark.parametrize("required", [False, True])
def test_seglog_cluster_without_zookeeper_is_skipped_with_the_reason(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, required: bool
) -> None:
    jar = tmp_path / "no" / "zookeeper.jar"
    monkeypatch.setenv("SEGLOG_ZOOKEEPER_JAR", str(jar))
    monkeypatch.setenv("SEGLOG_TESTING_REQUIRE_ZOOKEEPER", "1" if required else "0")
    pytester.makepyfile(USER_TEST)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    if required:
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines([f"*{jar} is missing*SEGLOG_TESTING_REQUIRE_ZOOKEEPER=1 asks for it*"])
    else:
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines([f"SKIPPED*a seglog cluster needs ZooKeeper and Java: {jar} is missing*"])


def _wheel(tmp_path: Path) -> Path:
    """The abi3 wheel of this tree, built by maturin (release, as ``make wheel``)."""
    out = tmp_path / "dist"
    subprocess.run(
        [str(Path(sys.executable).with_name("maturin")), "build", "--release", "--quiet", "--out", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("seglog-*.whl")
    return wheel


USER_PROJECT_TEST = textwrap.dedent(
    """
    from confluent_kafka import Consumer, Producer

    def test_round_trip(seglog_broker):
        servers = seglog_broker.bootstrap_servers
        p = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
        for i in range(3):
            p.produce("events", key=b"k", value=b"event %d" % i)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": servers, "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe(["events"])
        got = []
        while len(got) < 3:
            msgs = c.consume(3, timeout=30)
            assert msgs
            got += [m.value() for m in msgs if m.error() is None]
        c.close()
        assert got == [b"event 0", b"event 1", b"event 2"]

    def test_store(seglog_store):
        seglog_store.create_topic("t", partitions=2)
        assert [t for t in seglog_store.topics()] == ["t"]
    """
)


@pytest.mark.wheel
def test_a_separate_project_uses_the_installed_wheel(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    # pytest and confluent-kafka at the versions this suite runs (from pip's cache when there).
    pins = [f"pytest=={pytest.__version__}", f"confluent-kafka=={_version('confluent_kafka')}"]
    subprocess.run([*pip, str(wheel), *pins], check=True, capture_output=True)
    project = tmp_path / "userproject"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_events.py").write_text(USER_PROJECT_TEST)
    # Nothing of this tree or its venv, no java on PATH: only the user's venv.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JAVA"))}
    env["PATH"] = str(venv / "bin")
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed" in out.stdout
    assert shutil.which("java", path=env["PATH"]) is None
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import seglog; print(seglog.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), where


def _version(module: str) -> str:
    from importlib.metadata import version

    return version(module.replace("_", "-"))


def test_a_link_forwards_until_cut_and_again_once_healed() -> None:
    """A Link carries bytes both ways unchanged; cut() breaks the open connection and
    refuses new ones; heal() lets new ones through."""
    import socket
    import threading

    from seglog.testing import Link

    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    with Link(f"127.0.0.1:{server.getsockname()[1]}") as link:

        def round_trip(s: socket.socket, payload: bytes) -> bytes:
            s.sendall(payload)
            got = b""
            while len(got) < len(payload) and (chunk := s.recv(65536)):
                got += chunk
            return got

        payload = bytes(range(256)) * 1000
        first = socket.create_connection(("127.0.0.1", link.port), timeout=10)
        assert round_trip(first, payload) == payload
        link.cut()
        assert link.is_cut
        assert first.recv(1) == b""  # the open connection is broken
        refused = socket.create_connection(("127.0.0.1", link.port), timeout=10)
        assert refused.recv(1) == b""  # a new one is closed at once
        link.heal()
        again = socket.create_connection(("127.0.0.1", link.port), timeout=10)
        assert round_trip(again, b"after") == b"after"
        for s in (first, refused, again):
            s.close()
    server.close()
