"""A cluster on one machine: a ZooKeeper and N ``seglog serve`` brokers as child
processes on 127.0.0.1, each broker with its own store directory, for ``seglog cluster``
and for tests that kill, pause and restart brokers from outside."""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from ..errors import SeglogError
from .link import Link
from .zookeeper import ZooKeeper

__all__ = ["LocalCluster"]

LISTENING = "listening on "
ANY_PORT = "127.0.0.1:0"


def _child_env() -> dict[str, str]:
    # The brokers import this very package, wherever it was imported from.
    env = {k: v for k, v in os.environ.items() if k != "SEGLOG_STORE"}
    package_parent = str(Path(__file__).resolve().parent.parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


class _Broker:
    def __init__(self, node_id: int, rack: str | None, dir: Path) -> None:
        self.node_id = node_id
        self.rack = rack
        self.store = dir / f"b{node_id}"
        self.log_path = dir / f"b{node_id}.log"
        self.stdout_path = dir / f"b{node_id}.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.address: str | None = None
        self.listen = ANY_PORT
        self.paused = False
        # With zookeeper_links: one cuttable link per ZooKeeper server.
        self.zookeeper_links: list[Link] = []
        # With listener_links: the link everyone else reaches the broker through.
        self.listener_link: Link | None = None


class LocalCluster:
    """ZooKeeper and ``brokers`` brokers (node ids 1..N) on 127.0.0.1 under ``dir``.

    Broker N serves the store ``dir/bN`` on a free port of 127.0.0.1, writes its stderr
    to ``dir/bN.log`` (its stdout to ``dir/bN.out``) and, with ``racks=True``, sits in
    rack ``rN`` (``racks`` may also list one rack per broker). ``config`` holds Kafka
    keys passed to every broker with ``--config``. Without a ``zookeeper`` a standalone
    one is started under ``dir/zk`` and stopped with the cluster; one given is the
    caller's to start and stop.

    :meth:`start` returns once every broker prints its ``listening on`` line;
    :meth:`wait_until_ready` once the brokers are all in the cluster's Metadata. :meth:`kill`,
    :meth:`pause`, :meth:`resume` and :meth:`start` act on one broker from outside, as a
    crash, a stall and a restart on the same store would. With ``zookeeper_links=True``
    each broker reaches ZooKeeper through its own :class:`~seglog.testing.Link`, so
    that :meth:`cut_zookeeper` can cut one broker off from ZooKeeper while it keeps
    serving clients; with ``listener_links=True`` clients and the other brokers reach
    each broker through one (its advertised listener), so that :meth:`cut_listener`
    cuts everyone off from it while it keeps its ZooKeeper session and its own
    connections out. With ``metrics=True`` each broker serves Prometheus metrics on a free
    port, which :meth:`metrics` reads. ``listener`` is the security protocol of each
    broker's one listener (``SSL``, ``SASL_SSL``, ...; its name is the protocol's), used by
    clients and by the brokers among themselves; ``config`` then holds its ``ssl.*`` and
    ``sasl.*`` keys (docs/security.md), or ``config_file`` (a properties file every broker
    reads with ``--config-file``, where secrets stay off the command line).

    >>> import tempfile
    >>> with LocalCluster(tempfile.mkdtemp()) as cluster:  # doctest: +SKIP
    ...     cluster.bootstrap_servers
    '127.0.0.1:40001,127.0.0.1:40002,127.0.0.1:40003'
    """

    def __init__(
        self,
        dir: str | os.PathLike[str],
        brokers: int = 3,
        *,
        racks: bool | Sequence[str] = True,
        zookeeper: ZooKeeper | None = None,
        config: Mapping[str, object] | None = None,
        start_timeout: float = 60.0,
        zookeeper_links: bool = False,
        listener_links: bool = False,
        metrics: bool = False,
        listener: str = "PLAINTEXT",
        config_file: str | os.PathLike[str] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"brokers must be >= 1, got {brokers}")
        self.dir = Path(dir)
        if isinstance(racks, bool):
            rack_names: list[str | None] = [f"r{n}" if racks else None for n in range(1, brokers + 1)]
        else:
            rack_names = list(racks)
            if len(rack_names) != brokers:
                raise ValueError(f"racks names {len(rack_names)} racks, expected one per broker ({brokers})")
        self.config = {str(k): _text(v) for k, v in (config or {}).items()}
        self.start_timeout = start_timeout
        self.zookeeper_links = zookeeper_links
        self.listener_links = listener_links
        self.serve_metrics = metrics
        self.listener = listener.upper()
        self.config_file = None if config_file is None else Path(config_file)
        self._own_zookeeper = zookeeper is None
        self.zookeeper = zookeeper if zookeeper is not None else ZooKeeper(self.dir / "zk")
        self._brokers = {n: _Broker(n, rack_names[n - 1], self.dir) for n in range(1, brokers + 1)}

    def __repr__(self) -> str:
        return f"LocalCluster({str(self.dir)!r}, brokers={len(self._brokers)})"

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        for b in getattr(self, "_brokers", {}).values():
            if b.proc is not None and b.proc.poll() is None:
                b.proc.kill()
                b.proc.wait()

    # ------------------------------------------------------------------ what there is

    @property
    def broker_ids(self) -> list[int]:
        return list(self._brokers)

    @property
    def bootstrap_servers(self) -> str:
        """``HOST:PORT,...`` of the brokers that are running (not killed)."""
        return ",".join(a for n in self._brokers if (a := self.address(n)) is not None and self.alive(n))

    @property
    def zookeeper_connect(self) -> str:
        return self.zookeeper.connect_string

    def address(self, n: int) -> str | None:
        """``HOST:PORT`` clients reach broker ``n`` at: what it printed when it last started,
        or with ``listener_links`` its link."""
        return self._broker(n).address

    def rack(self, n: int) -> str | None:
        return self._broker(n).rack

    def store_path(self, n: int) -> Path:
        return self._broker(n).store

    def log_path(self, n: int) -> Path:
        return self._broker(n).log_path

    def pid(self, n: int) -> int | None:
        proc = self._broker(n).proc
        return proc.pid if proc is not None else None

    def alive(self, n: int) -> bool:
        """Whether broker ``n``'s process runs (a paused one does)."""
        proc = self._broker(n).proc
        return proc is not None and proc.poll() is None

    def returncode(self, n: int) -> int | None:
        proc = self._broker(n).proc
        return None if proc is None else proc.poll()

    def metrics(self, n: int) -> dict[str, float]:
        """Broker ``n``'s metrics (``metrics=True``), by Prometheus name less its
        ``seglog_`` prefix: e.g. ``isr_expands_total``. Labelled series are left out."""
        if not self.serve_metrics:
            raise RuntimeError("metrics() needs LocalCluster(metrics=True)")
        b = self._broker(n)
        found = re.findall(r"^seglog: metrics on (http://\S+)$", b.log_path.read_text(errors="replace"), re.M)
        if not found:
            raise RuntimeError(f"broker {n} has not announced its metrics address in {b.log_path}")
        with urllib.request.urlopen(found[-1], timeout=10) as response:
            text = response.read().decode()
        return {name: float(value) for name, value in re.findall(r"^seglog_(\w+) (\S+)$", text, re.M)}

    # ------------------------------------------------------------------ faults from outside

    def start(self, n: int | None = None) -> None:
        """Start broker ``n`` on its store, or with no argument ZooKeeper (if the cluster
        owns it) and every broker not running; return once each prints its ``listening
        on`` line. A broker that ran before listens on its former port, as a restarted
        Kafka broker does, or on a new one if that port is taken."""
        if n is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            if self._own_zookeeper:
                self.zookeeper.start()
            started = [b for b in self._brokers.values() if not self.alive(b.node_id)]
        else:
            b = self._broker(n)
            started = [] if self.alive(n) else [b]
        offsets = {b.node_id: self._launch(b) for b in started}
        for b in started:
            try:
                self._wait_listening(b, offsets[b.node_id])
            except RuntimeError:
                if b.listen == ANY_PORT:
                    raise
                b.listen = ANY_PORT
                self._wait_listening(b, self._launch(b))

    def kill(self, n: int) -> None:
        """SIGKILL broker ``n`` (a crash) and wait for it."""
        b = self._broker(n)
        if b.proc is not None and b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait()
        b.paused = False

    def pause(self, n: int) -> None:
        """SIGSTOP broker ``n``: it stops answering and heartbeating, its sockets stay open."""
        b = self._broker(n)
        if b.proc is not None and b.proc.poll() is None:
            b.proc.send_signal(signal.SIGSTOP)
            b.paused = True
            _wait_stopped(b.proc.pid)

    def resume(self, n: int) -> None:
        """SIGCONT broker ``n``."""
        b = self._broker(n)
        if b.proc is not None and b.proc.poll() is None:
            b.proc.send_signal(signal.SIGCONT)
        b.paused = False

    def terminate(self, n: int, timeout: float = 30.0) -> int | None:
        """SIGTERM broker ``n`` (a clean shutdown) and wait; SIGKILL after ``timeout``
        seconds. Its exit status."""
        b = self._broker(n)
        if b.proc is None:
            return None
        self._terminate([b], timeout)
        return b.proc.returncode

    def cut_zookeeper(self, n: int) -> None:
        """Cut broker ``n`` off from ZooKeeper (every server of it) until
        :meth:`heal_zookeeper`: its connections break and new ones are refused, while it
        goes on serving its clients. Needs ``zookeeper_links=True``."""
        for link in self._links(n):
            link.cut()

    def heal_zookeeper(self, n: int) -> None:
        """Let broker ``n`` reach ZooKeeper again."""
        for link in self._links(n):
            link.heal()

    def cut_listener(self, n: int) -> None:
        """Cut clients and the other brokers off from broker ``n`` until
        :meth:`heal_listener`: connections to it break and new ones are refused, while it
        keeps its ZooKeeper session and its connections to the others. Needs
        ``listener_links=True``."""
        self._listener_link(n).cut()

    def heal_listener(self, n: int) -> None:
        """Let clients and the other brokers reach broker ``n`` again."""
        self._listener_link(n).heal()

    def wait_until_ready(self, timeout: float = 60.0) -> None:
        """Until the running brokers' Metadata names every one of them and a controller:
        what a client needs before it creates replicated topics."""
        from .._native import RemoteClient  # the extension, only once a cluster runs

        want = {n for n in self._brokers if self.alive(n)}
        deadline = time.monotonic() + timeout
        seen: object = None
        while True:
            try:
                client = RemoteClient(self.bootstrap_servers, client_id="seglog-testing", timeout_ms=5000)
                try:
                    md = client.metadata([])
                finally:
                    client.close()
                seen = md
                ids = {int(b["node_id"]) for b in md["brokers"]}
                if ids >= want and int(md["controller_id"]) in ids:
                    return
            except (OSError, SeglogError) as e:  # not answering yet
                seen = e
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"brokers {sorted(want)} not all in the cluster's metadata after {timeout:.0f}s "
                    f"(last seen: {seen})"
                )
            time.sleep(0.1)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM every broker (paused ones are resumed first), wait (SIGKILL after
        ``timeout`` seconds), then stop ZooKeeper if the cluster started it."""
        self._terminate(list(self._brokers.values()), timeout)
        for b in self._brokers.values():
            for link in [*b.zookeeper_links, *([b.listener_link] if b.listener_link else [])]:
                link.close()
            b.zookeeper_links = []
            b.listener_link = None
        if self._own_zookeeper:
            self.zookeeper.stop()

    # ------------------------------------------------------------------ internals

    def _broker(self, n: int) -> _Broker:
        try:
            return self._brokers[n]
        except KeyError:
            raise ValueError(f"no broker {n}: brokers are {self.broker_ids}") from None

    def _links(self, n: int) -> list[Link]:
        b = self._broker(n)
        if not self.zookeeper_links:
            raise ValueError(
                "the brokers reach ZooKeeper directly: make the cluster with zookeeper_links=True"
            )
        if not b.zookeeper_links:
            b.zookeeper_links = [Link(server) for server in self.zookeeper.connect_string.split(",")]
        return b.zookeeper_links

    def _listener_link(self, n: int) -> Link:
        b = self._broker(n)
        if not self.listener_links:
            raise ValueError("clients reach the brokers directly: make the cluster with listener_links=True")
        if b.listener_link is None:
            b.listener_link = Link()
        return b.listener_link

    def zookeeper_connect_of(self, n: int) -> str:
        """The ``zookeeper.connect`` broker ``n`` is given: through its links, with them."""
        if not self.zookeeper_links:
            return self.zookeeper.connect_string
        return ",".join(link.address for link in self._links(n))

    def argv(self, n: int) -> list[str]:
        """The command line broker ``n`` runs."""
        b = self._broker(n)
        argv = [sys.executable, "-m", "seglog", "serve", "--store", str(b.store)]
        if self.listener == "PLAINTEXT":
            argv += ["--listen", b.listen]
        else:
            argv += ["--config", f"listeners={self.listener}://{b.listen}"]
            argv += ["--config", f"inter.broker.listener.name={self.listener}"]
        argv += ["--node-id", str(n)]
        if b.rack is not None:
            argv += ["--rack", b.rack]
        if self.listener_links:
            link = self._listener_link(n).address
            argv += ["--config", f"advertised.listeners={self.listener}://{link}"]
        argv += ["--zookeeper", self.zookeeper_connect_of(n)]
        if self.serve_metrics:
            argv += ["--metrics", "127.0.0.1:0"]
        if self.config_file is not None:
            argv += ["--config-file", str(self.config_file)]
        for key, value in self.config.items():
            argv += ["--config", f"{key}={value}"]
        return argv

    def _launch(self, b: _Broker) -> int:
        argv = self.argv(b.node_id)
        b.store.parent.mkdir(parents=True, exist_ok=True)
        with open(b.stdout_path, "ab") as out, open(b.log_path, "ab") as err:
            start = out.tell()
            err.write(f"==> {' '.join(argv)}\n".encode())
            err.flush()
            # Its own session: a terminal's Ctrl-C reaches the owner, which stops the
            # brokers before ZooKeeper.
            b.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=_child_env(),
                start_new_session=True,
            )
        b.address = None
        b.paused = False
        return start

    def _wait_listening(self, b: _Broker, start: int) -> None:
        assert b.proc is not None
        deadline = time.monotonic() + self.start_timeout
        while True:
            with open(b.stdout_path, "rb") as f:
                f.seek(start)
                for line in f.read().decode(errors="replace").splitlines():
                    if line.startswith("seglog: broker ") and LISTENING in line:
                        b.address = b.listen = line.rsplit(LISTENING, 1)[1].strip()
                        if b.listener_link is not None:
                            b.listener_link.target = b.listen
                            b.address = b.listener_link.address
                        return
            if b.proc.poll() is not None:
                raise RuntimeError(
                    f"broker {b.node_id} exited with status {b.proc.returncode} before listening; "
                    f"see {b.log_path}: {_last_lines(b.log_path)}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"broker {b.node_id} did not print its listening line in {self.start_timeout:.0f}s; "
                    f"see {b.log_path}"
                )
            time.sleep(0.05)

    def _terminate(self, brokers: Iterable[_Broker], timeout: float) -> None:
        running = [b for b in brokers if b.proc is not None and b.proc.poll() is None]
        for b in running:
            assert b.proc is not None
            if b.paused:
                b.proc.send_signal(signal.SIGCONT)
                b.paused = False
            b.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for b in running:
            assert b.proc is not None
            try:
                b.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                b.proc.kill()
                b.proc.wait()


def _wait_stopped(pid: int, timeout: float = 5.0) -> None:
    """Until every thread of ``pid`` has stopped: SIGSTOP is delivered
    asynchronously, and a thread still running could answer one more request."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = [
                (Path(t) / "stat").read_text().rpartition(")")[2].split()[0]
                for t in glob.glob(f"/proc/{pid}/task/*")
            ]
        except (FileNotFoundError, IndexError):
            return  # gone, or a thread ended while read
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.005)


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _last_lines(path: Path, n: int = 5) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return " | ".join(lines[-n:])
