"""The ZooKeeper a cluster runs on, as seglog starts it: standalone and as a three-node
ensemble that outlives one node; the error when Debian's package is missing; and the
command line that points a broker at it (``seglog serve --zookeeper --rack``), while a
broker started without it keeps serving alone, as before."""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

import seglog
import seglog.cli.serve
from broker_helpers import assert_serves, env, serving
from seglog import cli
from seglog.testing import LocalCluster, ZooKeeper, ZooKeeperNotInstalledError
from seglog.testing.zookeeper import four_letter_word, missing


def kazoo(connect: str) -> KazooClient:
    client = KazooClient(hosts=connect, timeout=10.0)
    client.start(timeout=30)
    return client


def test_standalone_serves(zookeeper: ZooKeeper) -> None:
    assert zookeeper.mode(1) == "standalone"
    assert four_letter_word(zookeeper.client_port(1), "ruok") == "imok"
    assert zookeeper.connect_string == f"127.0.0.1:{zookeeper.client_port(1)}"
    config = (zookeeper.dir / "n1" / "zoo.cfg").read_text()
    for line in ("tickTime=500", "admin.enableServer=false", "clientPortAddress=127.0.0.1"):
        assert line in config.splitlines()
    pid = zookeeper.pid(1)
    assert pid is not None
    # java itself is the child: its pid is the JVM's.
    assert Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    client = kazoo(zookeeper.connect_string)
    try:
        client.create("/brokers/ids/1", b'{"rack":"r1"}', ephemeral=True, makepath=True)
        assert client.get_children("/brokers/ids") == ["1"]
    finally:
        client.stop()
        client.close()


def test_stop_ends_every_node(tmp_path: Path, zookeeper_installed: None) -> None:
    zk = ZooKeeper(tmp_path / "zk")
    zk.start()
    pid = zk.pid(1)
    zk.stop()
    assert zk.pid(1) is None
    assert not Path(f"/proc/{pid}").exists()
    assert four_letter_word(zk.client_port(1)) is None


def test_ensemble_forms_and_outlives_one_node(tmp_path: Path, zookeeper_installed: None) -> None:
    with ZooKeeper(tmp_path / "zk", nodes=3) as zk:
        modes = sorted(str(zk.mode(i)) for i in zk.nodes)
        assert modes == ["follower", "follower", "leader"]
        assert len(zk.connect_string.split(",")) == 3
        client = kazoo(zk.connect_string)
        try:
            client.create("/controller", b'{"brokerid":1}', ephemeral=True)
            # The leader is the harder loss: the other two elect a new one.
            leader = zk.leader()
            assert leader is not None
            zk.kill(leader)
            assert zk.mode(leader) is None
            client.retry(client.create, "/after-kill", b"x")
            assert client.retry(client.get, "/after-kill")[0] == b"x"
            # The session and its ephemeral znode survived.
            assert client.retry(client.exists, "/controller") is not None
            zk.start(leader)
            assert zk.mode(leader) == "follower"
        finally:
            client.stop()
            client.close()
    assert all(zk.pid(i) is None for i in zk.nodes)


def test_a_taken_port_gets_new_ports(tmp_path: Path, zookeeper_installed: None) -> None:
    zk = ZooKeeper(tmp_path / "zk")
    taken = zk.client_port(1)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        with zk:
            assert zk.client_port(1) != taken
            assert zk.mode(1) == "standalone"


def fake_apt_get(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An apt-get first on PATH that records its calls: the library must make none."""
    calls = tmp_path / "apt-calls"
    fake = tmp_path / "bin" / "apt-get"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    return calls


def test_missing_jar_is_a_clear_error_and_nothing_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_apt_get(tmp_path, monkeypatch)
    jar = tmp_path / "zookeeper.jar"
    monkeypatch.setattr("seglog.testing.zookeeper.ZOOKEEPER_JAR", str(jar))
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert missing() == str(jar)
    with pytest.raises(ZooKeeperNotInstalledError, match=rf"{jar} is missing.*apt-get install zookeeper"):
        ZooKeeper(tmp_path / "zk")
    with pytest.raises(ZooKeeperNotInstalledError, match="SEGLOG_ZOOKEEPER_JAR"):
        LocalCluster(tmp_path / "c")
    assert issubclass(ZooKeeperNotInstalledError, seglog.SeglogError)
    assert issubclass(ZooKeeperNotInstalledError, RuntimeError)
    assert not calls.exists()


def test_the_jar_can_be_named_by_the_environment(tmp_path: Path) -> None:
    jar = tmp_path / "zk.jar"
    code = "import seglog.testing.zookeeper as z; print(z.ZOOKEEPER_JAR, z.missing())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "SEGLOG_ZOOKEEPER_JAR": str(jar)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [str(jar), str(jar)]


def test_cluster_command_without_zookeeper_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = fake_apt_get(tmp_path, monkeypatch)
    monkeypatch.setattr("seglog.testing.zookeeper.ZOOKEEPER_JAR", str(tmp_path / "zookeeper.jar"))
    assert cli.main(["cluster", "--dir", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("seglog: error: ZooKeeper is not installed")
    assert "apt-get install zookeeper" in err
    assert err.count("\n") == 1
    assert not calls.exists()


def test_serve_help_names_zookeeper_and_rack() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "seglog", "serve", "--help"],
        capture_output=True,
        text=True,
        env=env(),
        check=True,
    ).stdout
    assert "--zookeeper HOST:PORT[,HOST:PORT...][/chroot]" in out
    assert "zookeeper.connect" in out
    assert "--rack RACK" in out
    assert "broker.rack" in out
    for flag in ("--listen", "--advertised-listener", "--node-id", "--config", "--metrics"):
        assert flag in out


class _Captured(Exception):
    pass


def test_serve_passes_zookeeper_and_rack_as_config_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, str] = {}

    def fake_broker(path: str, listen: str, *, config: dict[str, str], metrics: str | None) -> None:
        seen.update(config)
        raise _Captured

    monkeypatch.setattr(seglog.cli.serve, "Broker", fake_broker)
    argv = ["serve", "--store", str(tmp_path / "s"), "--node-id", "2", "--rack", "r2"]
    argv += ["--zookeeper", "127.0.0.1:2181,127.0.0.1:2182/seglog", "--config", "min.insync.replicas=2"]
    with pytest.raises(_Captured):
        cli.main(argv)
    assert seen == {
        "node.id": "2",
        "broker.rack": "r2",
        "zookeeper.connect": "127.0.0.1:2181,127.0.0.1:2182/seglog",
        "min.insync.replicas": "2",
    }
    # Without the flags neither key is set: the single-broker mode.
    seen.clear()
    with pytest.raises(_Captured):
        cli.main(["serve", "--store", str(tmp_path / "s")])
    assert seen == {"node.id": "0"}


def test_cluster_command_parses() -> None:
    args = cli.build_parser().parse_args(["cluster", "--dir", "/tmp/x", "--config", "a.b=1"])
    assert isinstance(args, argparse.Namespace)
    assert (args.dir, args.brokers, args.config) == ("/tmp/x", 3, [("a.b", "1")])
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["cluster", "--dir", "/tmp/x", "--brokers", "0"])


def test_serve_without_zookeeper_is_unchanged(tmp_path: Path) -> None:
    with serving(tmp_path / "store", "--node-id", "0") as served:
        assert served.line == f"seglog: broker 0 listening on {served.bootstrap}"
        assert_serves(served.bootstrap)
    assert served.proc.returncode == 0


def test_local_cluster_reports_a_broker_that_cannot_start(tmp_path: Path, zookeeper_installed: None) -> None:
    cluster = LocalCluster(tmp_path / "c", brokers=2, config={"no.such.key": 1})
    assert cluster.argv(2)[-6:] == [
        "--rack",
        "r2",
        "--zookeeper",
        cluster.zookeeper_connect,
        "--config",
        "no.such.key=1",
    ]
    with pytest.raises(
        RuntimeError, match=r"broker \d exited with status 1 before listening; see .*b\d\.log"
    ):
        with cluster:
            pass
    # Everything it started is stopped, ZooKeeper too.
    assert not any(cluster.alive(n) for n in cluster.broker_ids)
    assert cluster.zookeeper.pid(1) is None
    assert "seglog: error:" in cluster.log_path(1).read_text()


def refused(store: Path, *args: str) -> str:
    """What ``seglog serve`` says as it refuses to start on ``store`` (it must exit 1)."""
    proc = subprocess.run(
        [sys.executable, "-m", "seglog", "serve", "--store", str(store), "--listen", "127.0.0.1:0", *args],
        capture_output=True,
        text=True,
        env=env(),
        timeout=120,
    )
    assert proc.returncode == 1 and "listening on" not in proc.stdout, (proc.stdout, proc.stderr)
    return proc.stderr


def test_meta_properties_ties_a_store_to_one_broker_and_one_cluster(
    tmp_path: Path, zookeeper: ZooKeeper
) -> None:
    store = tmp_path / "store"
    first = f"{zookeeper.connect_string}/first"
    with serving(store, "--node-id", "4", "--zookeeper", first) as served:
        assert_serves(served.bootstrap)
    # Written once the cluster's id was read from ZooKeeper: the same id.
    meta = dict(
        line.split("=", 1) for line in (store / "meta.properties").read_text().splitlines() if "=" in line
    )
    client = kazoo(zookeeper.connect_string)
    try:
        cluster = json.loads(client.get("/first/cluster/id")[0])["id"]
    finally:
        client.stop()
        client.close()
    assert (meta["version"], meta["broker.id"], meta["cluster.id"]) == ("0", "4", cluster)

    # Another chroot is another cluster: refused, as Kafka refuses it, before the
    # broker registers there.
    said = refused(store, "--node-id", "4", "--zookeeper", f"{zookeeper.connect_string}/second")
    assert f"does not match the cluster id {cluster}" in said and "wrong cluster" in said, said
    client = kazoo(zookeeper.connect_string)
    try:
        assert not client.exists("/second/brokers/ids/4")
    finally:
        client.stop()
        client.close()
    said = refused(store, "--node-id", "5", "--zookeeper", first)
    assert "belongs to broker 4, not node id 5" in said, said
    (store / "meta.properties").write_text(f"version=7\nbroker.id=4\ncluster.id={cluster}\n")
    said = refused(store, "--node-id", "4", "--zookeeper", first)
    assert "meta.properties" in said and "unknown version 7" in said, said
