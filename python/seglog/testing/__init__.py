"""Test helpers for projects that use seglog or any Kafka client: a store, an in-process
broker and a local cluster (ZooKeeper and ``seglog serve`` processes) as pytest fixtures.

The pytest plugin (:mod:`seglog.testing.plugin`) is registered through the ``pytest11``
entry point, so installing seglog is enough:

.. code-block:: python

    from confluent_kafka import Producer

    def test_produces(seglog_broker):
        p = Producer({"bootstrap.servers": seglog_broker.bootstrap_servers})
        p.produce("orders", b"hello")
        assert p.flush(10) == 0

Fixtures: ``seglog_store`` (a :class:`seglog.Store` in the test's directory),
``seglog_broker`` (a :class:`seglog.Broker` on a free port of 127.0.0.1 serving it) and
``seglog_cluster`` (a started :class:`LocalCluster`: ZooKeeper and three brokers, skipped
with the reason when ZooKeeper or Java is missing). Override ``seglog_store_config``,
``seglog_broker_config``, ``seglog_cluster_config`` or ``seglog_cluster_brokers`` in a
``conftest.py`` to change them. Nothing here installs software: a cluster needs Debian's
``zookeeper`` package (or ``$SEGLOG_ZOOKEEPER_JAR``) and ``java``.
"""

from .cluster import LocalCluster
from .link import Link
from .zookeeper import ZooKeeper, ZooKeeperNotInstalledError, missing

__all__ = ["LocalCluster", "Link", "ZooKeeper", "ZooKeeperNotInstalledError", "missing"]
