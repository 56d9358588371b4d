"""``seglog cluster``: ZooKeeper and three brokers in three racks on 127.0.0.1, a cluster
to try replication with, until SIGINT or SIGTERM (then it stops the brokers, then
ZooKeeper, and exits 0)."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

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
    p.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL between everyone: a CA and broker certificate made in DIR/pki, users 'admin' "
        "(the brokers' own) and 'seglog' with new passwords (PLAIN; SCRAM-SHA-512 users can be added), "
        "the client settings printed and written to DIR/client.properties",
    )
    p.set_defaults(func=run, parser=p)


def _secure(dir: Path) -> tuple[Path, dict[str, str]]:
    """Makes DIR/pki, the brokers' secret settings (DIR/secure.properties, owner only)
    and the clients' (DIR/client.properties); the first path and the client settings."""
    from .._native import generate_pki

    ca, keystore = generate_pki(str(dir / "pki"), ["127.0.0.1", "localhost"])
    admin, user = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule required"
    broker = {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f'{plain} username="admin" password="{admin}" user_admin="{admin}" user_seglog="{user}";'
        ),
        "ssl.keystore.location": keystore,
        "ssl.truststore.location": ca,
    }
    secure = dir / "secure.properties"
    fd = os.open(secure, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in broker.items()))
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "seglog",
        "sasl.password": user,
        "ssl.ca.location": ca,
    }
    java = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{plain} username="seglog" password="{user}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca,
    }
    fd = os.open(dir / "client.properties", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in java.items()))
    return secure, client


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
        dir = Path(args.dir)
        secure: Path | None = None
        client: dict[str, str] = {}
        if args.secure:
            dir.mkdir(parents=True, exist_ok=True)
            secure, client = _secure(dir)
        cluster = LocalCluster(
            args.dir,
            args.brokers,
            config=config,
            listener="SASL_SSL" if args.secure else "PLAINTEXT",
            config_file=secure,
        )
        try:
            cluster.start()
        except (RuntimeError, TimeoutError) as e:
            cluster.stop()
            raise CliError(str(e)) from None
        try:
            print(f"seglog: zookeeper listening on {cluster.zookeeper_connect}", flush=True)
            print(f"seglog: cluster listening on {cluster.bootstrap_servers}", flush=True)
            if args.secure:
                settings = {"bootstrap.servers": cluster.bootstrap_servers, **client}
                print(f"seglog: client settings (confluent-kafka): {json.dumps(settings)}", flush=True)
                print(
                    f"seglog: Java clients and Kafka's tools: --command-config {dir / 'client.properties'}",
                    flush=True,
                )
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
