"""A ZooKeeper for a local cluster: Debian's ``zookeeper`` package run standalone or as
an ensemble of N nodes on 127.0.0.1, each node a ``java`` child process with its own
directory, ``zoo.cfg`` and free ports. It uses what is installed and installs nothing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from ..errors import SeglogError

__all__ = ["ZOOKEEPER_JAR", "ZooKeeper", "ZooKeeperNotInstalledError", "four_letter_word", "missing"]

#: The server jar: ``$SEGLOG_ZOOKEEPER_JAR``, or Debian's ``zookeeper`` package's (its
#: manifest names every dependency).
ZOOKEEPER_JAR = os.environ.get("SEGLOG_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar")
#: slf4j's simple binding (from ``libslf4j-java``, a dependency): the server's log on stderr.
SLF4J_SIMPLE_JAR = "/usr/share/java/slf4j-simple.jar"
JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# With tickTime=500 the server accepts session timeouts from 2 to 20 ticks: 1 s to 10 s.
TICK_TIME_MS = 500
START_ATTEMPTS = 3


class ZooKeeperNotInstalledError(SeglogError, RuntimeError):
    """ZooKeeper's server jar (or ``java``) is missing: install Debian's ``zookeeper``."""


def missing() -> str | None:
    """What a local ZooKeeper lacks on this host: the server jar's path or ``"java"``, or
    ``None`` when both are there. Nothing here installs them: Debian's ``zookeeper`` package
    brings both (the project's ``make test`` installs it)."""
    if not os.path.isfile(ZOOKEEPER_JAR):
        return ZOOKEEPER_JAR
    if shutil.which("java") is None:
        return "java"
    return None


def _require_installed() -> None:
    what = missing()
    if what is not None:
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper is not installed: {what} is missing "
            "(install Debian's package: apt-get install zookeeper; or set SEGLOG_ZOOKEEPER_JAR "
            "to a ZooKeeper server jar whose manifest names its dependencies)"
        )


def _free_ports(n: int) -> list[int]:
    # Held open together, so the n ports are distinct; another process may still take
    # one before the server binds it, which start() notices and retries.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def four_letter_word(port: int, word: str = "srvr", timeout: float = 2.0) -> str | None:
    """The answer of ZooKeeper's four-letter command ``word`` on 127.0.0.1:``port``, or
    ``None`` if nothing answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(4096)
                if not data:
                    break
                chunks.append(data)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


class _Node:
    def __init__(self, myid: int, dir: Path) -> None:
        self.myid = myid
        self.dir = dir
        self.client_port = 0
        self.quorum_port = 0
        self.election_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_start = 0  # where the running server's lines begin in zk.log

    @property
    def config_path(self) -> Path:
        return self.dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.dir / "zk.log"


class ZooKeeper:
    """ZooKeeper on 127.0.0.1: standalone (``nodes=1``) or an ensemble of ``nodes``
    servers, under ``dir`` (``dir/n1``, ``dir/n2``, ...; each holds ``zoo.cfg``, ``data/``
    and the server's log ``zk.log``). Nodes are numbered from 1, as their ``myid``.

    :meth:`start` starts every node and returns once each serves (answers ``srvr`` with a
    ``Mode:`` line); :meth:`kill` and :meth:`start` with a node number stop and restart one
    node on the same ports and data; :meth:`stop` stops all. As a context manager it starts
    and stops the whole ensemble.

    >>> import tempfile
    >>> with ZooKeeper(tempfile.mkdtemp()) as zk:  # doctest: +SKIP
    ...     zk.connect_string
    '127.0.0.1:40123'
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        nodes: int = 1,
        *,
        tick_time_ms: int = TICK_TIME_MS,
        log_level: str = "info",
        start_timeout: float = 60.0,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {nodes}")
        _require_installed()
        self.dir = Path(dir)
        self.tick_time_ms = tick_time_ms
        self.log_level = log_level
        self.start_timeout = start_timeout
        self._nodes = [_Node(i, self.dir / f"n{i}") for i in range(1, nodes + 1)]
        self._pick_ports()

    def __repr__(self) -> str:
        return f"ZooKeeper({str(self.dir)!r}, nodes={len(self._nodes)}, connect={self.connect_string!r})"

    def __enter__(self) -> ZooKeeper:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        # A forgotten ensemble must not outlive its owner.
        for node in getattr(self, "_nodes", ()):
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
                node.proc.wait()

    @property
    def nodes(self) -> Sequence[int]:
        """The node numbers: 1..N."""
        return [n.myid for n in self._nodes]

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:PORT[,127.0.0.1:PORT...]``: the value of ``zookeeper.connect``."""
        return ",".join(f"127.0.0.1:{n.client_port}" for n in self._nodes)

    def client_port(self, i: int) -> int:
        return self._node(i).client_port

    def pid(self, i: int) -> int | None:
        proc = self._node(i).proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def log_path(self, i: int) -> Path:
        return self._node(i).log_path

    def mode(self, i: int) -> str | None:
        """``"leader"``, ``"follower"`` or ``"standalone"`` while node ``i`` serves, else ``None``."""
        answer = four_letter_word(self._node(i).client_port, "srvr")
        for line in (answer or "").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def leader(self) -> int | None:
        """The node that is the ensemble's leader (or the standalone server), if any."""
        for n in self._nodes:
            if self.mode(n.myid) in ("leader", "standalone"):
                return n.myid
        return None

    def start(self, i: int | None = None) -> None:
        """Start node ``i`` (on its ports and data), or with no argument every node not
        running; return once they serve. A port another process took in the meantime gets
        the whole ensemble new ports (at most three tries)."""
        if i is not None:
            node = self._node(i)
            if node.proc is None or node.proc.poll() is not None:
                self._launch(node)
            self._wait_serving([node])
            return
        for attempt in range(START_ATTEMPTS):
            if attempt > 0:
                self.stop()
                self._pick_ports()
            for node in self._nodes:
                if node.proc is None or node.proc.poll() is not None:
                    self._launch(node)
            try:
                self._wait_serving(self._nodes)
                return
            except _PortTaken:
                continue
        raise RuntimeError(f"ZooKeeper under {self.dir}: no free ports after {START_ATTEMPTS} tries")

    def kill(self, i: int) -> None:
        """SIGKILL node ``i`` and wait for it."""
        node = self._node(i)
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node (SIGTERM, then SIGKILL after ``timeout`` seconds) and wait."""
        running = [n.proc for n in self._nodes if n.proc is not None and n.proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # ------------------------------------------------------------------ internals

    def _node(self, i: int) -> _Node:
        if not 1 <= i <= len(self._nodes):
            raise ValueError(f"no ZooKeeper node {i}: nodes are 1..{len(self._nodes)}")
        return self._nodes[i - 1]

    def _pick_ports(self) -> None:
        ports = _free_ports(3 * len(self._nodes) if len(self._nodes) > 1 else 1)
        for k, node in enumerate(self._nodes):
            node.client_port = ports[k]
            if len(self._nodes) > 1:
                node.quorum_port = ports[len(self._nodes) + 2 * k]
                node.election_port = ports[len(self._nodes) + 2 * k + 1]
        for node in self._nodes:
            self._write_config(node)

    def _write_config(self, node: _Node) -> None:
        data = node.dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{node.myid}\n")
        lines = [
            f"tickTime={self.tick_time_ms}",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={data}",
            f"clientPort={node.client_port}",
            "clientPortAddress=127.0.0.1",
            # Without this the Jetty AdminServer takes port 8080 on every node.
            "admin.enableServer=false",
            # srvr answers the readiness probe.
            "4lw.commands.whitelist=*",
            # Transaction log files grow by 1 MiB, not 64 MiB.
            "preAllocSize=1024",
        ]
        if len(self._nodes) > 1:
            lines += [f"server.{n.myid}=127.0.0.1:{n.quorum_port}:{n.election_port}" for n in self._nodes]
        node.config_path.write_text("\n".join(lines) + "\n")

    def _launch(self, node: _Node) -> None:
        classpath = ZOOKEEPER_JAR
        if os.path.isfile(SLF4J_SIMPLE_JAR):
            classpath += ":" + SLF4J_SIMPLE_JAR
        argv = [
            "java",
            *JVM_OPTIONS,
            f"-Dorg.slf4j.simpleLogger.defaultLogLevel={self.log_level}",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(node.config_path),
        ]
        node.dir.mkdir(parents=True, exist_ok=True)
        with open(node.log_path, "ab") as log:
            node.log_start = log.tell()
            log.write(f"==> {' '.join(argv)}\n".encode())
            log.flush()
            # java itself is the child (its pid is the JVM's), in its own session so that a
            # terminal's Ctrl-C reaches the owner, which stops the nodes in order.
            node.proc = subprocess.Popen(
                argv,
                cwd=node.dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_serving(self, nodes: Sequence[_Node]) -> None:
        deadline = time.monotonic() + self.start_timeout
        waiting = list(nodes)
        while waiting:
            for node in list(waiting):
                assert node.proc is not None
                if node.proc.poll() is not None:
                    log = _tail(node.log_path, node.log_start)
                    if "Address already in use" in log:
                        raise _PortTaken(node.myid)
                    raise RuntimeError(
                        f"ZooKeeper node {node.myid} exited with status {node.proc.returncode}; "
                        f"its log {node.log_path} ends: {log}"
                    )
                if self.mode(node.myid) is not None:
                    waiting.remove(node)
            if not waiting:
                return
            if time.monotonic() > deadline:
                for node in waiting:
                    # A quorum port taken by another process keeps a node out of the
                    # quorum rather than ending it.
                    if "Address already in use" in _tail(node.log_path, node.log_start):
                        raise _PortTaken(node.myid)
                raise TimeoutError(
                    f"ZooKeeper nodes {[n.myid for n in waiting]} not serving after "
                    f"{self.start_timeout:.0f}s; see {waiting[0].log_path}"
                )
            time.sleep(0.05)


class _PortTaken(Exception):
    pass


def _tail(path: Path, start: int, size: int = 2000) -> str:
    # The last `size` bytes the server wrote since `start`, on one line.
    try:
        with open(path, "rb") as f:
            f.seek(max(start, os.path.getsize(path) - size))
            return " ".join(f.read().decode(errors="replace").split())
    except OSError:
        return ""
