"""The Consumer: Kafka's consumer API over an embedded store or a broker."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _broker, _groups, _native
from ._native import ConsumerRecord
from ._store import Store, open_for_client
from .errors import IllegalStateError, InvalidConfigError, ReadOnlyStoreError, StoreLockedError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Consumer", "TopicPartition", "OffsetAndMetadata", "OffsetAndTimestamp", "IllegalStateError"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


log = logging.getLogger(__name__)

_DEFAULTS: dict[str, Any] = {
    "auto_offset_reset": "latest",
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "max_poll_records": 500,
    "max_partition_fetch_bytes": 1 << 20,
    "consumer_timeout_ms": float("inf"),
    "metadata_max_age_ms": 1000,
    "read_only": None,
    # Group membership through a broker's coordinator (Kafka's names).
    "group_instance_id": None,
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "max_poll_interval_ms": 300000,
    "partition_assignment_strategy": ("range", "roundrobin"),
    "client_id": "seglog",
    "request_timeout_ms": 30000,
    "fetch_max_wait_ms": 500,
}


def _offset(x: Any, what: str = "offset") -> int:
    """An offset argument: an int >= 0 (TypeError for other types, as documented)."""
    if not isinstance(x, int) or isinstance(x, bool):
        raise TypeError(f"{what} must be an int, got {type(x).__name__}")
    if x < 0:
        raise ValueError(f"{what} must be >= 0, got {x}")
    return x


def _timeout(x: Any) -> float:
    """A timeout argument in milliseconds: a number (inf: no limit; <= 0: no wait)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        raise TypeError(f"timeout_ms must be a number, got {type(x).__name__}")
    return max(float(x), 0.0)


def _tp(x: Any) -> TopicPartition:
    if isinstance(x, TopicPartition):
        return x
    if isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], int):
        return TopicPartition(x[0], x[1])
    raise TypeError(f"expected a (topic, partition) pair, got {x!r}")


class Consumer:
    """Reads records from a store's topics, as Kafka's consumer does.

    ``Consumer(store, "topic", ...)`` subscribes to topics (all their partitions);
    or call :meth:`assign` with explicit partitions. Without a committed offset a
    partition starts per ``auto_offset_reset``: ``"earliest"``, ``"latest"``
    (the default, as Kafka's), or ``"none"`` (raise). With a ``group_id``,
    offsets are committed to the internal topic ``__consumer_offsets``
    (automatically every ``auto_commit_interval_ms`` if ``enable_auto_commit``)
    and survive restarts. On an embedded store with no broker a group has one
    member at a time: a second member, in this process or another, gets
    GroupInUseError.

    ``Consumer(*topics, group_id=..., bootstrap_servers="HOST:PORT")`` (no store)
    consumes from a broker, seglog's or Kafka's: each poll fetches every assigned
    partition a broker leads in one Fetch, and its group goes through the
    broker's coordinator (Kafka's classic protocol,
    ``partition_assignment_strategy`` "range" and/or "roundrobin",
    ``session_timeout_ms``, ``heartbeat_interval_ms``, ``max_poll_interval_ms``,
    static membership with ``group_instance_id``). It joins in :meth:`poll` and
    follows rebalances there; with ``enable_auto_commit`` it commits before
    rejoining. An embedded consumer with a ``group_id`` on a store that a
    :class:`seglog.Broker` serves in this process joins through that broker too
    (sharing the group with network members) while reading the log locally. In
    another process than the broker's it refuses a ``group_id`` with
    GroupsThroughBrokerError naming the broker's address (use
    ``bootstrap_servers=``); without one it reads read-only.

    ``store`` may be a path: it is opened for writing if no other process
    writes it, else read-only (``read_only=True``/``False`` forces either). A
    read-only consumer sees new data as the writer appends it, but cannot
    commit offsets (commits are writes).

    The logic (positions, resets, assignment, fetching, commits) is one engine
    in Rust whichever the source; its calls release the GIL. A Consumer is not
    safe to share between threads (as in Kafka): use one per thread.

    >>> import tempfile, seglog
    >>> with seglog.open(tempfile.mkdtemp()) as store:
    ...     store.create_topic("events")
    ...     _ = store.append("events", 0, [b"a", b"b"])
    ...     consumer = seglog.Consumer(store, "events", auto_offset_reset="earliest", consumer_timeout_ms=0)
    ...     [r.value for r in consumer]
    [b'a', b'b']
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *topics: str,
        group_id: str | None = None,
        bootstrap_servers: str | None = None,
        **config: Any,
    ) -> None:
        unknown = set(config) - set(_DEFAULTS)
        if unknown:
            raise InvalidConfigError(
                f"unknown Consumer config {sorted(unknown)} (known: {', '.join(sorted(_DEFAULTS))})"
            )
        c = {**_DEFAULTS, **config}
        if c["auto_offset_reset"] not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none; got {c['auto_offset_reset']!r}"
            )
        for name in (
            "auto_commit_interval_ms",
            "max_poll_records",
            "max_partition_fetch_bytes",
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "max_poll_interval_ms",
            "request_timeout_ms",
            "fetch_max_wait_ms",
        ):
            if not isinstance(c[name], int) or isinstance(c[name], bool) or c[name] <= 0:
                raise ValueError(f"{name} must be a positive int, got {c[name]!r}")
        strategy = c["partition_assignment_strategy"]
        c["partition_assignment_strategy"] = [strategy] if isinstance(strategy, str) else list(strategy)
        if group_id is not None and not isinstance(group_id, str):
            raise TypeError(f"group_id must be str or None, got {type(group_id).__name__}")
        self._config = c
        self._owns_store = False
        self._store: Store | None = None
        self._lock: _groups.GroupLock | None = None
        coordinator: str | None = None
        native_store = None
        if bootstrap_servers is not None:
            if not isinstance(bootstrap_servers, str):
                raise TypeError(
                    f"bootstrap_servers must be a 'HOST:PORT' str, got {type(bootstrap_servers).__name__}"
                )
            if store is not None and not isinstance(store, str):
                raise InvalidConfigError(
                    "a Consumer with bootstrap_servers reads from the broker: pass topics, not a "
                    "store (or pass the store and no bootstrap_servers to read it in this process)"
                )
            topics = ((store,) if isinstance(store, str) else ()) + topics
            coordinator = bootstrap_servers
        else:
            if store is None:
                raise TypeError("Consumer needs a store (a seglog.Store or a path) or bootstrap_servers=")
            opened = self._open(store)
            self._store = opened
            native_store = opened._native
            served = _broker.serving(opened.path) if group_id is not None else None
            coordinator = served.bootstrap_servers if served is not None else None
        self.group_id = group_id
        try:
            if group_id is not None and coordinator is None:
                assert self._store is not None
                self._check_no_broker_elsewhere(self._store, group_id)
                if c["enable_auto_commit"] and self._store.read_only:
                    raise ReadOnlyStoreError(
                        "a consumer group cannot commit offsets on a read-only store: pass "
                        "enable_auto_commit=False, or consume in the process that writes the store"
                    )
                # On a store with no broker a group has one member at a time.
                self._lock = _groups.GroupLock(str(self._store.path), group_id)
            self._native = _native.Consumer(
                native_store,
                bootstrap_servers,
                group_id,
                coordinator if group_id is not None else None,
                key_type=TopicPartition,
                auto_offset_reset=c["auto_offset_reset"],
                enable_auto_commit=c["enable_auto_commit"],
                auto_commit_interval_ms=c["auto_commit_interval_ms"],
                max_partition_fetch_bytes=c["max_partition_fetch_bytes"],
                metadata_max_age_ms=c["metadata_max_age_ms"],
                fetch_max_wait_ms=c["fetch_max_wait_ms"],
                group_instance_id=c["group_instance_id"],
                session_timeout_ms=c["session_timeout_ms"],
                heartbeat_interval_ms=c["heartbeat_interval_ms"],
                max_poll_interval_ms=c["max_poll_interval_ms"],
                partition_assignment_strategy=c["partition_assignment_strategy"],
                client_id=c["client_id"],
                request_timeout_ms=c["request_timeout_ms"],
            )
        except BaseException:
            self._release()
            raise
        if self._native.skipped_offset_records:
            log.warning(
                "skipped %d unreadable records of %s",
                self._native.skipped_offset_records,
                _groups.OFFSETS_TOPIC,
            )
        if topics:
            self.subscribe(topics)

    def _open(self, store: Store | str | os.PathLike[str]) -> Store:
        if isinstance(store, Store):
            return store
        if not isinstance(store, (str, os.PathLike)):
            raise TypeError(f"store must be a seglog.Store or a path, got {type(store).__name__}")
        ro = self._config["read_only"]
        if ro is None:
            try:
                opened, self._owns_store = open_for_client(store)
            except StoreLockedError:
                opened, self._owns_store = open_for_client(store, read_only=True)
        else:
            opened, self._owns_store = open_for_client(store, read_only=bool(ro))
        return opened

    def _check_no_broker_elsewhere(self, store: Store, group_id: str) -> None:
        info = _broker.announced(store.path) if store.read_only else None
        if info is None:
            return
        listener = info["listener"]
        raise _groups.GroupsThroughBrokerError(
            f"the store {str(store.path)!r} is served by a seglog broker (pid {info['pid']}) at "
            f"{listener}: consumer group {group_id!r} goes through its group coordinator; pass "
            f'bootstrap_servers="{listener}" to seglog.Consumer (or use a Kafka client). '
            "Without group_id this consumer could read the store read-only."
        )

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._owns_store and self._store is not None:
            self._store.close()
            self._owns_store = False

    # -- subscription and assignment ---------------------------------------------

    def topics(self) -> set[str]:
        """The topics there are, internal ones such as ``__consumer_offsets`` included
        (as Kafka's ``listTopics``; a pattern subscription never matches those)."""
        return set(self._native.topics())

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partitions of ``topic``, or None if there is no such topic."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        count = self._native.partition_count(topic)
        return None if count is None else set(range(count))

    def subscribe(self, topics: Iterable[str] = (), pattern: str | None = None) -> None:
        """Subscribe to topics by name, or to every topic whose whole name matches
        ``pattern`` (a regular expression in RE2's syntax, as Kafka's consumer
        protocol takes; internal topics never match); all their partitions are
        assigned to this member."""
        if isinstance(topics, str):
            topics = [topics]
        names = list(topics)
        if not all(isinstance(t, str) for t in names):
            raise TypeError("topics must be str")
        if pattern is not None and not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        self._native.subscribe(names, pattern)

    def subscription(self) -> set[str] | None:
        names = self._native.subscription()
        return None if names is None else set(names)

    def unsubscribe(self) -> None:
        """Drop the subscription or the manual assignment."""
        self._native.unsubscribe()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (no group membership changes)."""
        self._native.assign([_tp(p) for p in partitions])

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned. A member of a group through a broker gets them
        when it joins, in :meth:`poll` (as in Kafka): empty until then."""
        return {TopicPartition(t, p) for t, p in self._native.assignment()}

    # -- positions ----------------------------------------------------------------

    def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record this consumer will return."""
        tp = _tp(partition)
        return self._native.position(tp.topic, tp.partition)

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """Make ``offset`` the partition's next record (the next poll reads from it)."""
        tp = _tp(partition)
        self._native.seek(tp.topic, tp.partition, _offset(offset))

    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Seek to the log start of the partitions (every assigned one, if none given)."""
        self._native.seek_to([_tp(p) for p in partitions], "earliest")

    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Seek to the end of the partitions' logs (every assigned one, if none given)."""
        self._native.seek_to([_tp(p) for p in partitions], "latest")

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        tps = [_tp(p) for p in partitions]
        return {tp: start for tp, (start, _) in zip(tps, self._native.offsets(tps), strict=True)}

    def end_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        tps = [_tp(p) for p in partitions]
        return {tp: end for tp, (_, end) in zip(tps, self._native.offsets(tps), strict=True)}

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int] | dict[tuple[str, int], int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset per partition whose timestamp is >= the given one (ms)."""
        asked = [(_tp(k), _offset(ts, "timestamps (ms)")) for k, ts in timestamps.items()]
        found = self._native.offsets_for_times(asked)
        return {
            tp: None if r is None else OffsetAndTimestamp(*r) for (tp, _), r in zip(asked, found, strict=True)
        }

    # -- fetching -----------------------------------------------------------------

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``). With nothing to return, waits up to ``timeout_ms``
        for data to land, without spinning. Through a broker, one Fetch per
        broker reads every assigned partition it leads."""
        limit = self._config["max_poll_records"] if max_records is None else max_records
        if type(limit) is not int or limit <= 0:
            if _offset(limit, "max_records") == 0:
                raise ValueError("max_records must be positive")
        if type(timeout_ms) is not int and type(timeout_ms) is not float:
            timeout_ms = _timeout(timeout_ms)
        return self._native.poll(limit, timeout_ms)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        # Records are handed out one at a time by a native iterator from the
        # chunk they were decoded into; each counts as consumed when handed out,
        # so that if the caller stops early, position() and commit() are exact.
        # Waits up to consumer_timeout_ms for more.
        return self._native.records(float(self._config["consumer_timeout_ms"]))

    def poll_arrow(self, max_records: int = 100_000, timeout_ms: float = 0) -> pa.RecordBatch:
        """Records as one ``pyarrow.RecordBatch`` with the columns of Spark's Kafka
        source: key, value, topic, partition, offset, timestamp, timestampType,
        headers. Decoded in Rust straight into Arrow buffers."""
        if _offset(max_records, "max_records") == 0:
            raise ValueError("max_records must be positive")
        from ._arrow import columns_to_batch

        return columns_to_batch(self._native.poll_columns(max_records, _timeout(timeout_ms)))

    # -- commits ------------------------------------------------------------------

    def commit(self, offsets: dict[Any, OffsetAndMetadata | int] | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): offset}), or every assigned
        partition's current position. Durable when this returns. Through a broker
        the commit carries the member's generation: after a rebalance the
        coordinator refuses it (CommitFailedError) and the next poll rejoins."""
        if offsets is None:
            self._native.commit(None)
            return
        if not isinstance(offsets, dict):
            raise TypeError(
                f"offsets must be a dict of (topic, partition) -> offset, got {type(offsets).__name__}"
            )
        todo = []
        for k, v in offsets.items():
            tp = _tp(k)
            om = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v)
            todo.append((tp.topic, tp.partition, _offset(om.offset), om.metadata))
        self._native.commit(todo)

    def committed(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        """The group's last committed offset for a partition, or None."""
        tp = _tp(partition)
        c = self._native.committed(tp.topic, tp.partition)
        return None if c is None else c[0]

    # -- lifecycle ----------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit positions (with enable_auto_commit), leave the group, stop."""
        if self._native.closed:
            return
        try:
            problem = self._native.close(autocommit)
            if problem is not None:
                log.warning("leaving group %r: %s", self.group_id, problem)
        finally:
            self._release()

    @property
    def closed(self) -> bool:
        return bool(self._native.closed)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
