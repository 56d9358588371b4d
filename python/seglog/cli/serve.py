"""``seglog serve``: a broker speaking Kafka's wire protocol over a store, until SIGTERM or
SIGINT (then it stops accepting, finishes in-flight requests, closes the store and exits 0).
With ``--zookeeper`` it is a member of a cluster coordinated by that ZooKeeper."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .. import Broker
from ._common import CliError, store_path


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    p = commands.add_parser(
        "serve",
        parents=[store_opt],
        help="serve the store to Kafka clients over the network (a broker)",
        description=(
            "Serve the store over Kafka's wire protocol: confluent-kafka, kafka-python, aiokafka, "
            "Java clients and kcat produce and consume unchanged. Prints 'seglog: broker N listening "
            "on HOST:PORT' once it accepts connections. With --zookeeper the broker is a member of "
            "the cluster that ZooKeeper coordinates (Kafka's ZooKeeper mode): partitions are "
            "replicated to other brokers, each with a leader and in-sync followers; give every "
            "broker its own --node-id and store. Without it, a single broker serves the store alone."
        ),
    )
    p.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help="a PLAINTEXT listener; default 127.0.0.1:9092, port 0 picks one (or --config listeners=... "
        "for named listeners with security protocols)",
    )
    p.add_argument("--advertised-listener", metavar="HOST:PORT", help="the address Metadata gives clients")
    p.add_argument("--node-id", type=int, default=0, metavar="N", help="the broker's id (default 0)")
    p.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[,HOST:PORT...][/chroot]",
        help="join the cluster this ZooKeeper coordinates (the key zookeeper.connect)",
    )
    p.add_argument(
        "--rack",
        metavar="RACK",
        help="the broker's rack, for rack-aware replica placement (the key broker.rack)",
    )
    p.add_argument(
        "--config",
        action="append",
        type=_key_value,
        default=[],
        metavar="KEY=VALUE",
        help="a broker, store or topic default key (Kafka's names); repeatable",
    )
    p.add_argument(
        "--config-file",
        action="append",
        default=[],
        metavar="PATH",
        help="KEY=VALUE lines (a Kafka server.properties: '#' comments, blank lines) read before "
        "--config; repeatable. Keep secrets (passwords, JAAS configs) here rather than on the command line",
    )
    p.add_argument("--metrics", metavar="HOST:PORT", help="serve Prometheus metrics here")
    p.set_defaults(func=run, parser=p)


def read_properties(path: str) -> dict[str, str]:
    """KEY=VALUE lines of a properties file, as Kafka's server.properties holds them."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        raise CliError(f"--config-file {path}: {e.strerror or e}") from None
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--config-file {path}, line {n}: expected KEY=VALUE, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    config: dict[str, str] = {}
    for path in args.config_file:
        config.update(read_properties(path))
    config.update(dict(args.config))
    config["node.id"] = str(args.node_id)
    if args.advertised_listener:
        config["advertised.listeners"] = args.advertised_listener
    if args.zookeeper is not None:
        config["zookeeper.connect"] = args.zookeeper
    if args.rack is not None:
        config["broker.rack"] = args.rack
    if args.node_id < 0:
        raise CliError(f"--node-id must be >= 0, got {args.node_id}")
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        listen = args.listen
        if listen is None and "listeners" not in config:
            listen = "127.0.0.1:9092"
        broker = Broker(store_path(args), listen, config=config, metrics=args.metrics)
        try:
            print(f"seglog: broker {broker.node_id} listening on {broker.bootstrap_servers}", flush=True)
            if len(broker.listeners) > 1 or "listeners" in config:
                for name, (protocol, address) in broker.listeners.items():
                    print(f"seglog: listener {name} ({protocol}) on {address}", flush=True)
            if broker.metrics_address:
                print(
                    f"seglog: metrics on http://{broker.metrics_address}/metrics", file=sys.stderr, flush=True
                )
            while not stop.wait(0.5):
                pass
        finally:
            stats = broker.stats()
            broker.close()
        print(
            f"seglog: broker {broker.node_id} stopped; fetch bytes sent with sendfile "
            f"{stats['fetch_sendfile_bytes']}, copied {stats['fetch_copied_bytes']}",
            file=sys.stderr,
            flush=True,
        )
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
