"""Shared fixtures: every test gets its own store directory on the real disk; cluster
tests get ZooKeeper (Debian's package, which ``make test`` installs) and broker processes.
seglog's own pytest plugin (seglog.testing.plugin) is loaded too, through its entry point."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import seglog
from cluster_helpers import Zk
from java_helpers import spark_kafka_classpath, spark_kafka_jars
from seglog.testing import LocalCluster, ZooKeeper
from seglog.testing.plugin import require_zookeeper

# Spark workers and subprocess writers must run this interpreter, with this package.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

with warnings.catch_warnings():
    # kafka-python 3.0 reads its protocol schemas with importlib.resources.read_text and
    # open_text (deprecated since Python 3.11) as its modules are imported: import it here,
    # once, before any test module does.
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    import kafka
    import kafka.errors
    import kafka.record.default_records
    import kafka.record.memory_records  # noqa: F401


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(store_path: Path) -> Iterator[seglog.Store]:
    s = seglog.open(store_path)
    yield s
    s.close()


@pytest.fixture
def broker(store: seglog.Store) -> Iterator[seglog.Broker]:
    """A broker on 127.0.0.1 (a free port) serving the test's store."""
    with seglog.Broker(store) as b:
        yield b


@pytest.fixture
def zookeeper_installed() -> None:
    """ZooKeeper and Java are there (``make test`` installs Debian's zookeeper package and
    sets SEGLOG_TESTING_REQUIRE_ZOOKEEPER=1, so a missing one fails rather than skips)."""
    require_zookeeper()


@pytest.fixture
def zookeeper(tmp_path: Path, zookeeper_installed: None) -> Iterator[ZooKeeper]:
    """A standalone ZooKeeper on a free port of 127.0.0.1, stopped after the test."""
    with ZooKeeper(tmp_path / "zk") as zk:
        yield zk


@pytest.fixture
def local_cluster(tmp_path: Path, zookeeper_installed: None) -> Iterator[Callable[..., LocalCluster]]:
    """Makes started clusters: ``local_cluster(brokers=3, config={...}, zookeeper_nodes=1)``
    (LocalCluster's other keywords too) under the test's directory; every broker and
    ZooKeeper node is stopped after the test, and the end of each broker's log is printed
    (pytest shows it when the test fails)."""
    made: list[tuple[LocalCluster, ZooKeeper | None]] = []

    def make(*, zookeeper_nodes: int = 1, **kwargs: object) -> LocalCluster:
        base = tmp_path / f"cluster{len(made) + 1}"
        zk = None
        if zookeeper_nodes > 1:
            zk = ZooKeeper(base / "zk", nodes=zookeeper_nodes)
        cluster = LocalCluster(base, zookeeper=zk, **kwargs)  # type: ignore[arg-type]
        made.append((cluster, zk))
        if zk is not None:
            zk.start()
        cluster.start()
        return cluster

    yield make
    for cluster, zk in reversed(made):
        cluster.stop()
        if zk is not None:
            zk.stop()
        for n in cluster.broker_ids:
            log = cluster.log_path(n)
            lines = log.read_text(errors="replace").splitlines() if log.exists() else []
            print(f"--- broker {n} ({log}), last lines:", *lines[-40:], sep="\n")


@pytest.fixture
def zk_of() -> Iterator[Callable[[LocalCluster], Zk]]:
    """Opens kazoo sessions on a cluster's ZooKeeper, closed after the test (before the
    cluster stops)."""
    opened: list[Zk] = []

    def open_(cluster: LocalCluster) -> Zk:
        zk = Zk(cluster.zookeeper_connect)
        opened.append(zk)
        return zk

    yield open_
    for zk in opened:
        zk.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the run (its JVM takes seconds to start), with Spark's
    own Kafka connector on its classpath once `make java` has resolved it."""
    from seglog.spark import local_session

    jars = spark_kafka_jars() if spark_kafka_classpath().is_file() else []
    session = local_session("seglog-tests", fast_start=True, jars=jars)
    # No spark.dataSource.register here: format("seglog") must resolve through the
    # auto-registered pyspark_seglog.DefaultSource.
    yield session
    session.stop()
