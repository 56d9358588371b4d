"""seglog's pytest plugin (entry point ``pytest11``): fixtures a project's own tests use
to run against a seglog store, broker or cluster, with no Java and no Docker for the
first two. Disable it with ``-p no:seglog``."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import seglog

from .._store import ConfigValue
from .cluster import LocalCluster
from .zookeeper import missing

#: Set to 1 to fail, rather than skip, ``seglog_cluster`` where ZooKeeper is missing
#: (a CI that installs it wants to know when it did not).
REQUIRE_ZOOKEEPER_ENV = "SEGLOG_TESTING_REQUIRE_ZOOKEEPER"


def require_zookeeper() -> None:
    """Skips the calling test, naming what is missing, where a local ZooKeeper cannot
    run; fails it instead when ``$SEGLOG_TESTING_REQUIRE_ZOOKEEPER`` is 1."""
    what = missing()
    if what is None:
        return
    reason = (
        f"a seglog cluster needs ZooKeeper and Java: {what} is missing "
        "(apt-get install zookeeper, or set SEGLOG_ZOOKEEPER_JAR)"
    )
    if os.environ.get(REQUIRE_ZOOKEEPER_ENV) == "1":
        pytest.fail(f"{reason}; {REQUIRE_ZOOKEEPER_ENV}=1 asks for it")
    pytest.skip(reason)


@pytest.fixture
def seglog_store_config() -> Mapping[str, ConfigValue]:
    """Store and topic keys (Kafka's names) for ``seglog_store``: override to change."""
    return {}


@pytest.fixture
def seglog_broker_config() -> Mapping[str, ConfigValue]:
    """Broker keys (``socket.request.max.bytes``, ``node.id``, ...) for ``seglog_broker``."""
    return {}


@pytest.fixture
def seglog_cluster_config() -> Mapping[str, ConfigValue]:
    """Keys passed to every broker of ``seglog_cluster`` with ``--config``."""
    return {"default.replication.factor": 3, "min.insync.replicas": 2}


@pytest.fixture
def seglog_cluster_brokers() -> int:
    """How many brokers ``seglog_cluster`` starts."""
    return 3


@pytest.fixture
def seglog_store(tmp_path: Path, seglog_store_config: Mapping[str, ConfigValue]) -> Iterator[seglog.Store]:
    """A writable store in the test's own directory, closed after the test."""
    store = seglog.open(tmp_path / "seglog-store", config=dict(seglog_store_config))
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def seglog_broker(
    seglog_store: seglog.Store, seglog_broker_config: Mapping[str, ConfigValue]
) -> Iterator[seglog.Broker]:
    """A broker in this process on a free port of 127.0.0.1 serving ``seglog_store``: any
    Kafka client connects to ``seglog_broker.bootstrap_servers``; the test's own code can
    also use ``seglog_store`` directly. Closed after the test."""
    with seglog.Broker(seglog_store, config=dict(seglog_broker_config)) as broker:
        yield broker


@pytest.fixture
def seglog_cluster(
    tmp_path: Path, seglog_cluster_config: Mapping[str, ConfigValue], seglog_cluster_brokers: int
) -> Iterator[LocalCluster]:
    """ZooKeeper and ``seglog_cluster_brokers`` brokers as processes on 127.0.0.1, each
    in its own rack, started and in the cluster's metadata; stopped after the test.
    Skipped with the reason where ZooKeeper or Java is missing."""
    require_zookeeper()
    cluster = LocalCluster(tmp_path / "seglog-cluster", seglog_cluster_brokers, config=seglog_cluster_config)
    try:
        cluster.start()
        cluster.wait_until_ready()
        yield cluster
    finally:
        cluster.stop()
