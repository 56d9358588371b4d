"""A real Kafka broker to compare seglog with: Kafka 3.9's server (``kafka.Kafka`` from
the kafka_2.13 artifact that ``make java`` resolves) in ZooKeeper mode, on a free port
of 127.0.0.1, its own log directory and its own chroot of a test's ZooKeeper."""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType

from java_helpers import java, tools_classpath

#: The Kafka release run as the reference (ZooKeeper mode ends with the 3.x line).
REFERENCE_VERSION = "3.9.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class KafkaBroker:
    """One Kafka broker (id 0 unless given), with single-replica internal topics; brokers
    given the same ``chroot`` of one ZooKeeper form a cluster."""

    def __init__(
        self,
        dir: Path,
        zookeeper_connect: str,
        *,
        fast_start: bool = True,
        port: int | None = None,
        log: bool = False,
        broker_id: int = 0,
        chroot: str | None = None,
        **config: str,
    ) -> None:
        self.dir = dir
        # With `log`, the broker's own log4j lines go to `server_log` (INFO and up).
        self.log4j = "/dev/null"
        if log:
            self.log4j = str(dir / "log4j.properties")
        # Tests: C1 only, a small heap. Benchmarks: what kafka-server-start.sh and
        # kafka-run-class.sh give the broker by default (KAFKA_HEAP_OPTS and
        # KAFKA_JVM_PERFORMANCE_OPTS).
        self.jvm_options = (
            ["-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
            if fast_start
            else [
                *("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"),
                *("-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent"),
                *("-XX:MaxInlineLevel=15", "-Djava.awt.headless=true"),
            ]
        )
        self.port = port or _free_port()
        self.broker_id = broker_id
        self.proc: subprocess.Popen[bytes] | None = None
        settings = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(dir / "logs"),
            "zookeeper.connect": f"{zookeeper_connect}/{chroot or 'kafka-' + uuid.uuid4().hex[:8]}",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "3",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        settings.update({k.replace("_", "."): v for k, v in config.items()})
        dir.mkdir(parents=True, exist_ok=True)
        if log:
            (dir / "log4j.properties").write_text(
                "log4j.rootLogger=INFO, file\n"
                "log4j.appender.file=org.apache.log4j.FileAppender\n"
                f"log4j.appender.file.File={self.server_log}\n"
                "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            )
        self.properties = dir / "server.properties"
        self.properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def zookeeper_connect(self) -> str:
        """The ``zookeeper.connect`` the broker uses: the test's ZooKeeper and its own chroot."""
        for line in self.properties.read_text().splitlines():
            if line.startswith("zookeeper.connect="):
                return line.split("=", 1)[1]
        raise AssertionError(f"no zookeeper.connect in {self.properties}")

    @property
    def server_log(self) -> Path:
        return self.dir / "kafka.log"

    @property
    def log_dir(self) -> Path:
        return self.dir / "logs"

    def start(self, timeout: float = 90) -> None:
        log = (self.dir / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [
                java(),
                *self.jvm_options,
                f"-Dlog4j.configuration=file:{self.log4j}",
                "-cp",
                tools_classpath(REFERENCE_VERSION),
                "kafka.Kafka",
                str(self.properties),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.dir / "server.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"Kafka did not start on {self.bootstrap_servers}:\n{tail}")
            time.sleep(0.2)

    def _answers(self) -> bool:
        """Whether the broker takes connections and knows itself as registered."""
        from confluent_kafka.admin import AdminClient

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
        except OSError:
            return False
        try:
            md = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=5)
        except Exception:
            return False
        return self.broker_id in md.brokers and md.controller_id >= 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
