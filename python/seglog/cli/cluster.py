"""``seglog cluster``: ZooKeeper and three brokers in three racks on 127.0.0.1, a cluster
to try replication with, until SIGINT or SIGTERM (then it stops the brokers, then
ZooKeeper, and exits 0)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from ..testing.cluster import LocalCluster
from ._common import CliError, positive
from .serve import _key_value


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "cluster",
        help="run ZooKeeper and a cluster of brokers on this machine (to try replication)",
        description=(
            "Start a standalone ZooKeeper and BROKERS brokers on 127.0.0.1, broker N in rack rN "
            "with its store in DIR/bN and its log in DIR/bN.log, every one a 'seglog serve "
            "--zookeeper' child process. Topics (and __consumer_offsets) get replication factor "
            "min(3, BROKERS) and min.insync.replicas 2 unless --config says otherwise. Prints the "
            "ZooKeeper connect string and 'seglog: cluster listening on HOST:PORT,...', then runs "
            "until Ctrl-C or SIGTERM. Needs Debian's zookeeper package (apt-get install zookeeper; "
            "'make cluster' installs it)."
        ),
    )
    p.add_argument("--dir", required=True, metavar="DIR", help="where the stores, logs and ZooKeeper live")
    p.add_argument("--brokers", type=positive, default=3, metavar="N", help="how many brokers (default 3)")
    p.add_argument(
        "--config",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a broker, store or topic default key (Kafka's names) for every broker; repeatable",
    )
    p.set_defaults(func=run, parser=p)


def run(args: argparse.Namespace) -> int:
    rf = str(min(3, args.brokers))
    config = {"default.replication.factor": rf, "offsets.topic.replication.factor": rf}
    if args.brokers >= 2:
        config["min.insync.replicas"] = "2"
    config.update(dict(args.config))
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        cluster = LocalCluster(args.dir, args.brokers, config=config)
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as e:
            cluster.stop()
            raise CliError(str(e)) from None
        try:
            print(f"seglog: zookeeper listening on {cluster.zookeeper_connect}", flush=True)
            print(f"seglog: cluster listening on {cluster.bootstrap_servers}", flush=True)
            reported: set[int] = set()
            while not stop.wait(0.5):
                for n in cluster.broker_ids:
                    code = cluster.returncode(n)
                    if code is not None and n not in reported:
                        reported.add(n)
                        print(
                            f"seglog: broker {n} exited with status {code}; see {cluster.log_path(n)}",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            cluster.stop()
        print(f"seglog: cluster stopped; stores and logs are in {args.dir}", file=sys.stderr, flush=True)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
