"""The cost of TLS and SASL on produce and consume throughput, as ratios to PLAINTEXT
measured in the same run, for `seglog serve` and for Kafka 3.9's broker with the same
settings.

    .venv/bin/python benches/bench_security.py [--records 300000] [--size 1000] [--runs 3]

One broker of each, `seglog serve` and Kafka's in processes of their own, with four
listeners: PLAINTEXT, SSL (TLS 1.3), SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-512, 4096
iterations); the certificates are ``generate_pki``'s (ECDSA P-256, PKCS#8 keys). For
each listener in turn a librdkafka producer (acks=1, linger.ms=5, batch.size 64 KiB,
uncompressed) sends ``--records`` records of ``--size`` bytes to a topic of its own, then
a consumer reads them all back from the start (assign, no group); the figure is MB/s of
record values, median and range over ``--runs``, timed once the client is connected and
authenticated (the producer from its first send, the consumer from its first record).
Each broker is alone on the machine while it is measured. seglog sends log bytes with
sendfile on the plaintext listeners and encrypts a copy on the TLS ones; Kafka does the
same (its TLS has no zero-copy either).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from seglog._native import generate_pki

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"


def client(address: str, listener: str, ca: Path) -> dict[str, Any]:
    c: dict[str, Any] = {"bootstrap.servers": address, "security.protocol": listener}
    if "SSL" in listener:
        c["ssl.ca.location"] = str(ca)
    if "SASL" in listener:
        c.update(
            {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": "bench-secret"}
        )
    return c


def produce(conf: dict[str, Any], topic: str, records: int, size: int) -> float:
    p = Producer(
        {**conf, "acks": 1, "linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 262144}
    )
    value = b"x" * size
    p.list_topics(topic, timeout=30)  # connected and authenticated before the clock starts
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return records * size / (time.perf_counter() - started) / 1e6


def consume(conf: dict[str, Any], topic: str, records: int, size: int) -> float:
    c = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = 0.0
    while got < records:
        for m in c.consume(min(10000, records - got), 1):
            if m.error() is None:
                if got == 0:
                    started = time.perf_counter()
                got += 1
    elapsed = time.perf_counter() - started
    c.close()
    # The first record's bytes are not in the timed span.
    return (records - 1) * size / elapsed / 1e6


def measure(
    addresses: dict[str, str], ca: Path, args: argparse.Namespace
) -> dict[str, tuple[list[float], list[float]]]:
    admin = AdminClient(client(addresses["PLAINTEXT"], "PLAINTEXT", ca))
    out: dict[str, tuple[list[float], list[float]]] = {}
    for run in range(args.runs):
        for listener in LISTENERS:
            topic = f"{listener.lower()}-{run}"
            for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                f.result(timeout=60)
            conf = client(addresses[listener], listener, ca)
            p = produce(conf, topic, args.records, args.size)
            c = consume(conf, topic, args.records, args.size)
            ps, cs = out.setdefault(listener, ([], []))
            ps.append(p)
            cs.append(c)
    return out


@contextmanager
def seglog_broker(dir: Path, key: Path) -> Iterator[dict[str, str]]:
    """`seglog serve` in a process of its own, as Kafka's broker is."""
    dir.mkdir(parents=True, exist_ok=True)
    (dir / "broker.properties").write_text(
        f"listeners={','.join(f'{n}://127.0.0.1:0' for n in LISTENERS)}\n"
        f"ssl.keystore.location={key}\nsasl.enabled.mechanisms=SCRAM-SHA-512\n"
    )
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "seglog", "serve", "--store", str(dir / "store")),
            *("--config-file", str(dir / "broker.properties")),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        addresses: dict[str, str] = {}
        while len(addresses) < len(LISTENERS):
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("seglog serve did not start")
            if m := re.match(r"seglog: listener (\S+) \(\S+\) on (\S+)", line):
                addresses[m[1]] = m[2]
        admin = AdminClient({"bootstrap.servers": addresses["PLAINTEXT"]})
        user = UserScramCredentialUpsertion(
            "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bench-secret"
        )
        for f in admin.alter_user_scram_credentials([user]).values():
            f.result(timeout=30)
        yield addresses
    finally:
        proc.terminate()
        proc.wait(60)


@contextmanager
def kafka_broker(dir: Path, key: Path) -> Iterator[dict[str, str]]:
    from kazoo.client import KazooClient

    from java_helpers import tool
    from kafka_reference import KafkaBroker, _free_port
    from seglog.testing import ZooKeeper

    ports = {n: _free_port() for n in LISTENERS}
    with ZooKeeper(dir / "zk") as zk:
        settings = {
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(key),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
        jaas = f'{SCRAM} username="bench" password="bench-secret";'
        broker = KafkaBroker(dir / "kafka", zk.connect_string, fast_start=False, port=ports["PLAINTEXT"])
        # Written into its server.properties as they are (listener names have underscores).
        written = dict(
            line.split("=", 1) for line in broker.properties.read_text().splitlines() if "=" in line
        )
        written.update(settings)
        written["listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"] = jaas
        written["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"] = jaas
        broker.properties.write_text("".join(f"{k}={v}\n" for k, v in written.items()))
        chroot = broker.zookeeper_connect
        zk_client = KazooClient(hosts=zk.connect_string)
        zk_client.start()
        zk_client.ensure_path(chroot.split("/", 1)[1].join(["/", ""]))
        zk_client.stop()
        tool(
            "3.9.1",
            "kafka-configs",
            "--zookeeper",
            chroot,
            "--alter",
            "--add-config",
            "SCRAM-SHA-512=[iterations=4096,password=bench-secret]",
            "--entity-type",
            "users",
            "--entity-name",
            "bench",
        )
        broker.start()
        try:
            yield {n: f"127.0.0.1:{p}" for n, p in ports.items()}
        finally:
            broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-kafka", action="store_true", help="seglog alone")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # PKCS#8 keys, which Kafka's PEM keystore needs too.
        ca, key = generate_pki(str(d / "pki"), ["127.0.0.1"])
        results = {}
        with seglog_broker(d / "seglog", Path(key)) as addresses:
            results["seglog"] = measure(addresses, Path(ca), args)
        if not args.no_kafka:
            with kafka_broker(d / "kafka", Path(key)) as addresses:
                results["Kafka 3.9"] = measure(addresses, Path(ca), args)
    print(f"{args.records:,} records of {args.size} bytes, {args.runs} runs; MB/s of values, median (range)")
    print(
        f"{'broker':10} {'listener':15} {'produce MB/s':>24} {'x PLAINTEXT':>11} "
        f"{'consume MB/s':>24} {'x PLAINTEXT':>11}"
    )
    for broker, rows in results.items():
        base_p = statistics.median(rows["PLAINTEXT"][0])
        base_c = statistics.median(rows["PLAINTEXT"][1])
        for listener, (ps, cs) in rows.items():
            print(
                f"{broker:10} {listener:15} {spread(ps):>24} {statistics.median(ps) / base_p:>10.2f}x"
                f" {spread(cs):>24} {statistics.median(cs) / base_c:>10.2f}x"
            )


if __name__ == "__main__":
    main()
