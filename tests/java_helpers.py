"""Kafka's Java clients, as the Maven module in java/ builds them (``make java``): one
classpath per kafka-clients version in java/versions, and the scenarios of
seglog.interop.Interop run against a broker, their JSON lines parsed."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JAVA_DIR = ROOT / "java"
VERSIONS = tuple(v.strip() for v in (JAVA_DIR / "versions").read_text().split() if v.strip())


def classpath(version: str) -> str:
    target = JAVA_DIR / "target" / f"kafka-{version}"
    listed = target / "classpath.txt"
    if not listed.is_file():
        raise AssertionError(f"{listed} is missing: `make java` builds the Java clients' checks")
    return f"{target / 'classes'}:{listed.read_text().strip()}"


def java() -> str:
    found = shutil.which("java")
    if found is None:
        raise AssertionError("no java on PATH (`make test` installs Debian's JDK with ZooKeeper)")
    return found


def start(version: str, scenario: str, **options: Any) -> subprocess.Popen[str]:
    """Starts a scenario; options become key=value arguments (``client_x_y`` → ``client.x.y``)."""
    args = [f"{k.replace('_', '.')}={v}" for k, v in options.items()]
    return subprocess.Popen(
        [
            java(),
            "-Xss1m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath(version),
            "seglog.interop.Interop",
            scenario,
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 180) -> list[dict[str, Any]]:
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"java exited {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run(version: str, scenario: str, timeout: float = 180, **options: Any) -> list[dict[str, Any]]:
    """Runs a scenario to its end: its JSON lines, the client's banner first."""
    lines = finish(start(version, scenario, **options), timeout)
    banner = lines[0]
    assert banner == {"client": "kafka-clients", "version": version}, banner
    return lines[1:]


class Running:
    """A scenario running in the background, its JSON lines collected as they come."""

    def __init__(self, version: str, scenario: str, **options: Any) -> None:
        self.proc = start(version, scenario, **options)
        self.lines: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._stderr: list[str] = []
        self._eof = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self._changed:
                    self.lines.append(json.loads(line))
                    self._changed.notify_all()
        self.proc.stdout.close()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self._stderr.extend(self.proc.stderr)
        self.proc.stderr.close()

    def wait_for(self, what: str, check: Callable[[list[dict[str, Any]]], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not check(self.lines):
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    stderr = "".join(self._stderr)[-3000:]
                    raise AssertionError(
                        f"{what}: not seen (exit {self.proc.poll()})\n{self.lines[-5:]}\n{stderr}"
                    )
                self._changed.wait(min(left, 0.5))

    def records(self) -> list[dict[str, Any]]:
        with self._changed:
            return [line for line in self.lines if "offset" in line and "value" in line]

    def assignment(self) -> list[int] | None:
        with self._changed:
            changes = [line["assignment"] for line in self.lines if "assignment" in line]
        return changes[-1] if changes else None

    def finish(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Waits for the end: every line, once all are read."""
        self.proc.wait(timeout)
        self.wait_for("the end of the output", lambda _: self._eof, timeout)
        if self.proc.returncode != 0:
            raise AssertionError(f"java exited {self.proc.returncode}\n{''.join(self._stderr)[-3000:]}")
        with self._changed:
            return list(self.lines)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def done(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """A scenario's closing line (a consumer's revocation on close may follow it)."""
    [last] = [line for line in lines if line.get("done")]
    return last


# Kafka's command-line tools: the class each bin/ script runs, newest home first (the
# tools moved from kafka_2.13's Scala packages to kafka-tools over the 3.x and 4.x lines).
TOOLS = {
    "kafka-topics": ["org.apache.kafka.tools.TopicCommand"],
    "kafka-acls": ["org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"],
    "kafka-configs": ["org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"],
    "kafka-console-producer": ["org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"],
    "kafka-console-consumer": ["org.apache.kafka.tools.consumer.ConsoleConsumer"],
    "kafka-consumer-groups": ["org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"],
    "kafka-get-offsets": ["org.apache.kafka.tools.GetOffsetShell"],
    "kafka-delete-records": ["org.apache.kafka.tools.DeleteRecordsCommand"],
    "kafka-log-dirs": ["org.apache.kafka.tools.LogDirsCommand"],
    "kafka-leader-election": ["org.apache.kafka.tools.LeaderElectionCommand"],
    "kafka-reassign-partitions": ["org.apache.kafka.tools.reassign.ReassignPartitionsCommand"],
    "kafka-producer-perf-test": ["org.apache.kafka.tools.ProducerPerformance"],
    "kafka-consumer-perf-test": ["org.apache.kafka.tools.ConsumerPerformance"],
    "kafka-e2e-latency": ["org.apache.kafka.tools.EndToEndLatency"],
    "kafka-dump-log": ["org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"],
}


def tools_classpath(version: str) -> str:
    listed = JAVA_DIR / "target" / f"tools-{version}" / "classpath.txt"
    if not listed.is_file():
        raise AssertionError(f"{listed} is missing: `make java` resolves Kafka's tools")
    return listed.read_text().strip()


def tool_class(version: str, tool: str) -> str:
    import zipfile

    jars = [j for j in tools_classpath(version).split(":") if "kafka" in Path(j).name]
    entries: set[str] = set()
    for jar in jars:
        with zipfile.ZipFile(jar) as z:
            entries.update(z.namelist())
    for cls in TOOLS[tool]:
        if cls.replace(".", "/") + ".class" in entries:
            return cls
    raise AssertionError(f"none of {TOOLS[tool]} in Kafka {version}'s jars")


def tool(
    version: str, name: str, *args: str, stdin: str | None = None, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Runs one of Kafka's tools as its bin/ script would (``kafka-topics`` ...)."""
    proc = subprocess.run(
        [
            java(),
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dlog4j.configuration=file:/dev/null",
            "-cp",
            tools_classpath(version),
            tool_class(version, name),
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        command = " ".join((name, *args))
        raise AssertionError(f"{command} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def read_log_dir(version: str, log_dir: Path, cluster_id: str, node_id: int) -> list[dict[str, Any]]:
    """``log_dir`` as Kafka's own storage classes at ``version`` read it when a broker
    starts (java/tools/ReadLogDir.java): its meta.properties, clean-shutdown marker and
    checkpoints, and every partition opened (and recovered) as a log, with its records.
    Kafka writes as it opens a log: give it a copy."""
    proc = subprocess.run(
        [
            java(),
            "-XX:+UseSerialGC",
            "-Dlog4j2.configurationFile=/dev/null",
            "-cp",
            tools_classpath(version),
            str(JAVA_DIR / "tools" / "ReadLogDir.java"),
            str(log_dir),
            cluster_id,
            str(node_id),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    if proc.returncode != 0:
        raise AssertionError(f"ReadLogDir {log_dir} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


# Spark's own Kafka connector (spark-sql-kafka-0-10), resolved by java/spark/pom.xml at
# the version of the installed PySpark.
def spark_kafka_classpath() -> Path:
    import pyspark

    return JAVA_DIR / "target" / f"spark-kafka-{pyspark.__version__}" / "classpath.txt"


def spark_kafka_jars() -> list[str]:
    listed = spark_kafka_classpath()
    if not listed.is_file():
        raise AssertionError(f"{listed} is missing: `make java` resolves Spark's Kafka connector")
    return listed.read_text().strip().split(":")
