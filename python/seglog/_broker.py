"""A broker speaking Kafka's wire protocol over a store, so Kafka's own clients
(confluent-kafka, kafka-python, aiokafka, Java, kcat) read and write its topics."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import threading
from collections.abc import Mapping

from . import _native
from ._store import ConfigValue, Store, _kafka_names
from ._store import open as open_store

__all__ = ["Broker", "BROKER_KEYS"]

#: What a serving broker writes in its store (removed at close): {"node_id", "listener", "pid"}.
BROKER_FILE = ".broker.json"

# The brokers serving in this process, by their store's real path: an embedded
# Consumer of a group on such a store joins through it.
_serving_lock = threading.Lock()
_serving: dict[str, Broker] = {}


def serving(store_path: str | os.PathLike[str]) -> Broker | None:
    """The Broker of this process serving the store at ``store_path``, if any."""
    with _serving_lock:
        b = _serving.get(os.path.realpath(os.fspath(store_path)))
    return b if b is not None and not b.closed else None


def _forget_parent_brokers() -> None:
    # A forked child runs none of its parent's brokers (their threads stayed behind).
    global _serving_lock, _serving
    _serving_lock = threading.Lock()
    _serving = {}


os.register_at_fork(after_in_child=_forget_parent_brokers)


def announced(store_path: str | os.PathLike[str]) -> dict[str, object] | None:
    """The ``.broker.json`` of a broker serving the store from another process, if
    one is: its pid alive, named by the store's ``.lock`` and holding it (a crashed
    broker leaves a stale file, which is not trusted)."""
    path = os.fspath(store_path)
    try:
        with open(os.path.join(path, BROKER_FILE)) as f:
            info = json.load(f)
        pid = int(info["pid"])
        str(info["listener"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if pid == os.getpid() or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    lock_path = os.path.join(path, ".lock")
    try:
        with open(lock_path) as f:
            if f.read().strip() != str(pid):
                return None
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return dict(info)  # held, by the pid the file names
                return None
            fcntl.flock(f, fcntl.LOCK_UN)
            return None  # nobody holds it: the broker is gone
    except OSError:
        return None


#: The broker's own config keys; every other key is a store or topic key.
BROKER_KEYS: frozenset[str] = frozenset(_native.BROKER_KEYS)

#: Beginnings of broker keys (``ssl.``, ``sasl.``, ``listener.name.``).
BROKER_KEY_PREFIXES: tuple[str, ...] = tuple(_native.BROKER_KEY_PREFIXES)


def is_broker_key(key: str) -> bool:
    """Whether ``key`` is the broker's own (else a store or topic key)."""
    return key in BROKER_KEYS or key == "broker.id" or key.startswith(BROKER_KEY_PREFIXES)


def _text(value: ConfigValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


class Broker:
    """Serve a store over the Kafka protocol from background threads until :meth:`close`.

    ``store_or_path`` is a :class:`~seglog.Store` open in this process (its in-process
    producers and consumers then share the logs with network clients) or a path, which the
    broker opens and closes itself. ``listen`` is ``HOST:PORT`` (port 0 picks a free one), a
    PLAINTEXT listener; Kafka's ``listeners`` key instead names several, each with its security
    protocol (``"SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"``; see docs/security.md).
    Config keys use Kafka's names, in ``config`` or as keywords with underscores: broker
    keys (``node.id``, ``advertised.listeners``, ``socket.request.max.bytes``,
    ``connections.max.idle.ms``, ...) and, when given a path, store and topic keys
    (``flush.messages``, ``auto.create.topics.enable``, ...). ``metrics="HOST:PORT"``
    serves Prometheus text there.

    >>> import seglog, tempfile
    >>> with seglog.Broker(tempfile.mkdtemp()) as broker:
    ...     servers = broker.bootstrap_servers  # e.g. "127.0.0.1:40123"
    """

    __slots__ = ("_native", "_owned_store", "_store")

    def __init__(
        self,
        store_or_path: Store | str | os.PathLike[str],
        listen: str | None = None,
        *,
        config: Mapping[str, ConfigValue] | None = None,
        metrics: str | None = None,
        **options: ConfigValue,
    ) -> None:
        if listen is not None and not isinstance(listen, str):
            raise TypeError(f"listen must be a 'HOST:PORT' str, got {type(listen).__name__}")
        merged: dict[str, ConfigValue] = dict(config or {})
        merged.update(_kafka_names(options))
        broker_keys = {k: _text(v) for k, v in merged.items() if is_broker_key(k)}
        if listen is not None and "listeners" in broker_keys:
            raise ValueError("give listen or the listeners key, not both")
        if "listeners" not in broker_keys:
            broker_keys["listeners"] = listen or "127.0.0.1:0"
        store_keys = {k: v for k, v in merged.items() if k not in broker_keys}
        if isinstance(store_or_path, Store):
            if store_keys:
                raise ValueError(
                    f"{sorted(store_keys)} are store or topic keys: give them to seglog.open() "
                    f"(broker keys: {', '.join(sorted(BROKER_KEYS))})"
                )
            store, owned = store_or_path, False
        elif isinstance(store_or_path, (str, os.PathLike)):
            store, owned = open_store(store_or_path, config=store_keys), True
        else:
            raise TypeError(
                f"store_or_path must be a seglog.Store or a path, got {type(store_or_path).__name__}"
            )
        try:
            self._native = _native.Broker(store._native, broker_keys, metrics)
        except BaseException:
            if owned:
                store.close()
            raise
        self._store = store
        self._owned_store = owned
        with _serving_lock:
            _serving[os.path.realpath(os.fspath(store.path))] = self

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"listening on {self.bootstrap_servers}"
        return f"<seglog.Broker {self.node_id} {state}>"

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> Store:
        return self._store

    @property
    def host(self) -> str:
        return self._native.host

    @property
    def port(self) -> int:
        return self._native.port

    @property
    def listeners(self) -> dict[str, tuple[str, str]]:
        """Each listener's name: its security protocol and bound ``"host:port"``."""
        return {
            name: (protocol, f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
            for name, protocol, host, port in self._native.listeners
        }

    @property
    def bootstrap_servers(self) -> str:
        """``"host:port"`` of the first listener, what Kafka clients take as ``bootstrap.servers``."""
        host = self.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def node_id(self) -> int:
        return self._native.node_id

    @property
    def cluster_id(self) -> str:
        return self._native.cluster_id

    @property
    def metrics_address(self) -> str | None:
        """Where Prometheus text is served, if ``metrics=`` was given."""
        return self._native.metrics_address

    @property
    def closed(self) -> bool:
        return self._native.closed

    def stats(self) -> dict[str, int]:
        """Counters: ``bytes_in``, ``messages_in``, ``bytes_out``, ``fetch_sendfile_bytes``,
        ``fetch_copied_bytes``, ``connections``, ``connections_created``, ``connection_errors``,
        ``connections_rejected`` (over ``max.connections.per.ip``), ``connection_slot_waits``
        (accepting stopped at ``max.connections``),
        ``connection_write_timeouts``, ``requests_cancelled``, ``queued_request_bytes``,
        ``purgatory_parked``, ``purgatory_wakeups``, per-API request counts and, for a
        cluster member, ISR and leadership counts."""
        return dict(self._native.stats())

    def metrics_text(self) -> str:
        """The broker's metrics in Prometheus text format."""
        return self._native.metrics_text()

    def close(self, timeout: float = 10.0) -> None:
        """Stop accepting, finish in-flight requests (up to ``timeout`` s), stop serving;
        then close the store if the broker opened it."""
        with _serving_lock:
            key = os.path.realpath(os.fspath(self._store.path))
            if _serving.get(key) is self:
                del _serving[key]
        self._native.close(timeout)
        if self._owned_store and not self._store.closed:
            self._store.close()
