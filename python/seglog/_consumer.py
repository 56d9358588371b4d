"""The Consumer: Kafka's consumer API over an embedded store or a broker."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from . import _broker, _groups
from ._backends import LocalLog, RemoteLog
from ._native import ConsumerRecord, RecordChunk, RecordIterator, RemoteClient
from ._store import Store, open_for_client
from .errors import (
    ClientClosedError,
    InvalidConfigError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    ReadOnlyStoreError,
    SeglogError,
    StoreLockedError,
    UnknownTopicOrPartitionError,
)

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


class IllegalStateError(SeglogError):
    """The call does not fit the consumer's state (e.g. assign after subscribe)."""


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


#: What a poll of `max_records` reads per record wanted (when that is below
#: max_partition_fetch_bytes): a generous guess at a record's size, so that a
#: poll of small records still gets about as many as it asked for.
_BYTES_PER_POLLED_RECORD = 1024
_FEW_RECORDS = 16


def _offset(x: Any, what: str = "offset") -> int:
    """An offset argument: an int >= 0 (TypeError for other types, as documented)."""
    if not isinstance(x, int) or isinstance(x, bool):
        raise TypeError(f"{what} must be an int, got {type(x).__name__}")
    if x < 0:
        raise ValueError(f"{what} must be >= 0, got {x}")
    return x


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
    consumes from a broker, seglog's or Kafka's: it fetches over the network and
    its group goes through the broker's coordinator (Kafka's classic protocol,
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

    A Consumer is not safe to share between threads (as in Kafka): use one per
    thread.

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
        self._group: _groups.StoreGroup | _groups.CoordinatedGroup | None = None
        self._log: LocalLog | RemoteLog
        servers: str | None = None
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
            client = RemoteClient(bootstrap_servers, c["client_id"], c["request_timeout_ms"])
            self._log = RemoteLog(client, c["fetch_max_wait_ms"])
            servers = bootstrap_servers
        else:
            if store is None:
                raise TypeError("Consumer needs a store (a seglog.Store or a path) or bootstrap_servers=")
            opened = self._open(store)
            self._store = opened
            self._log = LocalLog(opened)
            served = _broker.serving(opened.path) if group_id is not None else None
            servers = served.bootstrap_servers if served is not None else None
        self.group_id = group_id
        self._closed = False
        self._committed: dict[tuple[str, int], tuple[int, str]] = {}
        try:
            if group_id is not None:
                if servers is not None:
                    # Through the coordinator (a broker in this process, over
                    # loopback, when the store is local): the same group as network members.
                    self._group = _groups.CoordinatedGroup(
                        servers,
                        group_id,
                        [],
                        instance_id=c["group_instance_id"],
                        session_timeout_ms=c["session_timeout_ms"],
                        rebalance_timeout_ms=c["max_poll_interval_ms"],
                        heartbeat_interval_ms=c["heartbeat_interval_ms"],
                        assignors=c["partition_assignment_strategy"],
                        client_id=c["client_id"],
                        timeout_ms=c["request_timeout_ms"],
                    )
                else:
                    assert self._store is not None
                    self._check_no_broker_elsewhere(self._store, group_id)
                    if c["enable_auto_commit"] and self._store.read_only:
                        raise ReadOnlyStoreError(
                            "a consumer group cannot commit offsets on a read-only store: pass "
                            "enable_auto_commit=False, or consume in the process that writes the store"
                        )
                    self._group = _groups.StoreGroup(self._store, group_id)
                self._committed = self._group.committed()
        except BaseException:
            self._release()
            raise
        self._subscription: set[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._assignment: list[TopicPartition] = []
        # The same, each partition keyed by itself: a (topic, partition) pair
        # finds it without a TopicPartition being made.
        self._assigned: dict[TopicPartition, TopicPartition] = {}
        self._manual = False
        self._positions: dict[TopicPartition, int] = {}
        # Records fetched, per partition, with a cursor past those returned.
        self._pending: dict[TopicPartition, RecordChunk] = {}
        self._metadata_checked = 0.0
        self._last_commit = time.monotonic()
        self._next_partition = 0
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
        if self._group is not None:
            self._group.close()
            self._group = None
        self._log.close()
        if self._owns_store and self._store is not None:
            self._store.close()
            self._owns_store = False

    # -- subscription and assignment ---------------------------------------------

    def _check(self) -> None:
        if self._closed:
            raise ClientClosedError("consumer is closed")

    def subscribe(self, topics: Iterable[str] = (), pattern: str | None = None) -> None:
        """Subscribe to topics by name, or to every topic matching ``pattern``
        (a regular expression); all their partitions are assigned to this member."""
        self._check()
        if self._manual:
            raise IllegalStateError("subscribe() after assign(): use one or the other")
        if isinstance(topics, str):
            topics = [topics]
        names = list(topics)
        if not all(isinstance(t, str) for t in names):
            raise TypeError("topics must be str")
        if pattern is None and not names:
            raise ValueError("subscribe() needs topics or a pattern")
        self._subscription = set(names)
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._refresh_assignment(force=True, join=False)

    def subscription(self) -> set[str] | None:
        return set(self._subscription) if self._subscription is not None else None

    def unsubscribe(self) -> None:
        """Drop the subscription or the manual assignment."""
        self._check()
        self._subscription, self._pattern = None, None
        self._manual = False
        self._set_assignment([])

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (no group membership changes)."""
        self._check()
        if self._subscription is not None:
            raise IllegalStateError("assign() after subscribe(): use one or the other")
        tps = [_tp(p) for p in partitions]
        for tp in tps:
            if not 0 <= tp.partition < self._log.partition_count(tp.topic):
                raise UnknownTopicOrPartitionError(f"topic {tp.topic!r} has no partition {tp.partition}")
        self._manual = True
        self._set_assignment(tps)

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned. A member of a group through a broker gets them
        when it joins, in :meth:`poll` (as in Kafka): empty until then."""
        self._check()
        self._refresh_assignment(join=False)
        return set(self._assignment)

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        self._assigned = {tp: tp for tp in tps}
        self._assignment = list(self._assigned)
        for tp in list(self._positions):
            if tp not in self._assigned:
                del self._positions[tp]
                self._drop_pending(tp)

    def _refresh_assignment(self, force: bool = False, join: bool = True) -> None:
        if self._subscription is None:
            return
        group = self._group
        coordinated = isinstance(group, _groups.CoordinatedGroup)
        now = time.monotonic()
        if force or now - self._metadata_checked >= self._config["metadata_max_age_ms"] / 1000:
            self._metadata_checked = now
            if coordinated:
                assert isinstance(group, _groups.CoordinatedGroup)
                # The subscription is names (a pattern is matched here, as Kafka's
                # consumers do); a change rejoins.
                names = set(self._subscription)
                if self._pattern is not None:
                    names.update(self._wanted_topics())
                group.member.subscribe(sorted(names))
            else:
                self._assign_all()
        if coordinated and join:
            assert isinstance(group, _groups.CoordinatedGroup)
            self._follow_group(group)

    def _wanted_topics(self) -> list[str]:
        assert self._subscription is not None
        return [
            t
            for t in self._log.topics()
            if t in self._subscription
            or (t != _groups.OFFSETS_TOPIC and self._pattern and self._pattern.fullmatch(t))
        ]

    def _follow_group(self, group: _groups.CoordinatedGroup) -> None:
        """Rejoin when the group rebalances (committing first with
        enable_auto_commit, as Kafka's consumers do), and take the assignment."""
        member = group.member
        if member.needs_rejoin and self._config["enable_auto_commit"] and member.generation >= 0:
            try:
                self.commit()
            except _groups.CommitFailedError:
                pass  # the group moved on already: the new owner starts from the last commit
        _, partitions, changed = member.poll_assignment()
        if not changed:
            return
        before = set(self._assignment)
        tps = [TopicPartition(t, p) for t, p in partitions]
        new = [tp for tp in tps if tp not in before]
        if new:
            # Another member may have committed them since this one last had them.
            fresh = group.committed([(tp.topic, tp.partition) for tp in new])
            for tp in new:
                key = (tp.topic, tp.partition)
                if key in fresh:
                    self._committed[key] = fresh[key]
                else:
                    self._committed.pop(key, None)
        self._set_assignment(tps)

    def _assign_all(self) -> None:
        assert self._subscription is not None
        wanted = self._wanted_topics()
        tps = [TopicPartition(t, p) for t in wanted for p in range(self._log.partition_count(t))]
        if tps != self._assignment:
            self._set_assignment(tps)

    # -- positions ----------------------------------------------------------------

    def _reset(self, tp: TopicPartition, strategy: str | None = None) -> int:
        strategy = strategy or self._config["auto_offset_reset"]
        start, end = self._log.offsets(tp.topic, tp.partition)
        if strategy == "earliest":
            return start
        if strategy == "latest":
            return end
        raise NoOffsetForPartitionError(
            f"no committed offset for {tp.topic}-{tp.partition} and auto_offset_reset='none'"
        )

    def _position(self, tp: TopicPartition) -> int:
        pos = self._positions.get(tp)
        if pos is None:
            committed = self._committed.get((tp.topic, tp.partition))
            pos = committed[0] if committed is not None else self._reset(tp)
            self._positions[tp] = pos
        return pos

    def _assigned_tp(self, partition: Any) -> TopicPartition:
        """The assigned partition that ``partition`` (a TopicPartition or a
        ``(topic, partition)`` pair) names; IllegalStateError if not assigned."""
        kind = type(partition)
        if kind is TopicPartition or (
            kind is tuple and len(partition) == 2 and type(partition[0]) is str and type(partition[1]) is int
        ):
            tp = self._assigned.get(partition)
            if tp is not None:
                return tp
        tp = _tp(partition)
        if tp not in self._assigned:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return tp

    def position(self, partition: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record this consumer will return."""
        self._check()
        tp = self._assigned_tp(partition)
        pending = self._pending.get(tp)
        if pending is not None:
            pos = pending.position()
            if pos is not None:
                return pos
        return self._position(tp)

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        if self._closed:
            self._check()
        if self._subscription is not None:
            self._refresh_assignment(join=False)
        tp = self._assigned_tp(partition)
        if type(offset) is not int or offset < 0:
            _offset(offset)  # raises the error for what it is
        if tp in self._pending:
            self._drop_pending(tp)
        self._positions[tp] = offset

    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._check()
        for tp in [_tp(p) for p in partitions] or self.assignment():
            self.seek(tp, self._reset(tp, "earliest"))

    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        self._check()
        for tp in [_tp(p) for p in partitions] or self.assignment():
            self.seek(tp, self._reset(tp, "latest"))

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        self._check()
        return {tp: self._log.offsets(tp.topic, tp.partition)[0] for tp in map(_tp, partitions)}

    def end_offsets(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, int]:
        self._check()
        return {tp: self._log.offsets(tp.topic, tp.partition)[1] for tp in map(_tp, partitions)}

    def offsets_for_times(
        self, timestamps: dict[TopicPartition, int] | dict[tuple[str, int], int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset per partition whose timestamp is >= the given one (ms)."""
        self._check()
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for key, ts in timestamps.items():
            tp = _tp(key)
            _offset(ts, "timestamps (ms)")
            r = self._log.offset_for_time(tp.topic, tp.partition, ts)
            out[tp] = None if r is None else OffsetAndTimestamp(*r)
        return out

    # -- fetching -----------------------------------------------------------------

    def _drop_pending(self, tp: TopicPartition) -> None:
        """Forget the partition's fetched records, also for an iterator handing them out."""
        chunk = self._pending.pop(tp, None)
        if chunk is not None:
            chunk.clear()

    def _chunk(self, tp: TopicPartition, limit: int | None = None) -> RecordChunk | None:
        """The partition's fetched-but-unreturned records (fetching if none, at
        most `limit` of them), a chunk whose cursor moves as they are returned.
        The one owner of them."""
        pending = self._pending.get(tp)
        if pending is not None:
            if len(pending):
                return pending
            del self._pending[tp]
        pos = self._position(tp)
        fetch = self._config["max_partition_fetch_bytes"]
        if limit is not None:
            # A poll for a few records (a seek and a lookup) reads about their
            # worth of log, not a whole fetch: copying 1 MiB out of the page
            # cache to hand out one record would be 95 % of such a poll. Always at
            # least one batch, as with any fetch size. Only for a few records
            # is the rest of what was read left unparsed: the records of a
            # larger read stay pending for the next polls, or each poll would
            # read the same bytes again.
            fetch = min(fetch, limit * _BYTES_PER_POLLED_RECORD)
            if limit > _FEW_RECORDS:
                limit = None
        read = self._log.read_next
        try:
            records, next_offset = read(tp.topic, tp.partition, pos, fetch, limit)
            # A compacted log may hold batches the cleaner emptied: step past them.
            while not len(records) and next_offset > pos:
                pos = self._positions[tp] = next_offset
                records, next_offset = read(tp.topic, tp.partition, pos, fetch, limit)
        except OffsetOutOfRangeError:
            if self._config["auto_offset_reset"] == "none":
                raise
            # Kafka: an out-of-range position (e.g. deleted by retention) is reset.
            self._positions[tp] = self._reset(tp)
            return None
        if not len(records):
            return None
        self._positions[tp] = next_offset
        self._pending[tp] = records
        return records

    def _take(self, tp: TopicPartition, limit: int) -> list[ConsumerRecord]:
        chunk = self._chunk(tp, limit)
        if chunk is None:
            return []
        records = chunk.take(limit)
        if not len(chunk):
            del self._pending[tp]
        return records

    def _fetch_any(self, limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        if self._subscription is not None:
            self._refresh_assignment()
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        n = len(self._assignment)
        for k in range(n):
            if limit <= 0:
                break
            # Rotate the starting partition so that none starves the others.
            tp = self._assignment[(self._next_partition + k) % n]
            records = self._take(tp, limit)
            if records:
                out[tp] = records
                limit -= len(records)
        if n:
            self._next_partition = (self._next_partition + 1) % n
        return out

    def _wait(self, timeout_s: float) -> None:
        if timeout_s <= 0 or not self._assignment:
            if timeout_s > 0:
                time.sleep(min(timeout_s, 0.1))
            return
        requests = [(tp.topic, tp.partition, self._position(tp)) for tp in self._assignment]
        self._log.wait_for_data(requests, min(timeout_s, 1.0))

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the assigned partitions, at most ``max_records`` (default
        ``max_poll_records``). With nothing to return, waits up to ``timeout_ms``
        for data to land, without spinning."""
        if self._closed:  # self._check(), inline on this hot path
            self._check()
        limit = self._config["max_poll_records"] if max_records is None else max_records
        if type(limit) is not int or limit <= 0:
            if _offset(limit, "max_records") == 0:
                raise ValueError("max_records must be positive")
        if self.group_id is not None:
            self._maybe_auto_commit()
        out = self._fetch_any(limit)
        if out or timeout_ms <= 0:
            return out
        deadline = time.monotonic() + timeout_ms / 1000
        while (left := deadline - time.monotonic()) > 0:
            self._wait(left)
            out = self._fetch_any(limit)
            if out:
                break
        return out

    def __iter__(self) -> Iterator[ConsumerRecord]:
        # Records are handed out by a native iterator from the fetched chunk;
        # this class's bookkeeping runs once per chunk, in _next_chunk. Each
        # record counts as consumed when handed out, so that if the caller stops
        # early, position() and commit() are exact; a seek() meanwhile drops the
        # chunk, and iteration follows it at once.
        return RecordIterator(self._next_chunk)

    def _next_chunk(self) -> RecordChunk | None:
        """The next partition's chunk to iterate (in turn), waiting up to
        ``consumer_timeout_ms`` for one; None ends the iteration."""
        self._check()
        self._maybe_auto_commit()
        self._refresh_assignment()
        # Every assigned partition gets its position now (as Kafka's poll sets
        # them all), so that a commit after an early stop covers those whose
        # records were not reached yet, not only the one being iterated.
        for tp in self._assignment:
            self._position(tp)
        deadline = time.monotonic() + self._config["consumer_timeout_ms"] / 1000
        while True:
            n = len(self._assignment)
            for k in range(n):
                i = (self._next_partition + k) % n
                chunk = self._chunk(self._assignment[i])
                if chunk is not None:
                    # Rotate the starting partition so that none starves the others.
                    self._next_partition = (i + 1) % n
                    return chunk
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._wait(left)

    def poll_arrow(self, max_records: int = 100_000, timeout_ms: float = 0) -> pa.RecordBatch:
        """Records as one ``pyarrow.RecordBatch`` with the columns of Spark's Kafka
        source: key, value, topic, partition, offset, timestamp, timestampType,
        headers. Decoded in Rust straight into Arrow buffers."""
        self._check()
        if _offset(max_records, "max_records") == 0:
            raise ValueError("max_records must be positive")
        self._maybe_auto_commit()
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while True:
            self._refresh_assignment()
            for tp in list(self._pending):  # hand back what iteration/poll left pending
                self._positions[tp] = self.position(tp)
                self._drop_pending(tp)
            requests = [(tp.topic, tp.partition, self._position(tp)) for tp in self._assignment]
            try:
                batch, nexts = self._log.read_arrow(requests, max_records, 1 << 20)
            except OffsetOutOfRangeError:
                if self._config["auto_offset_reset"] == "none":
                    raise
                for tp in self._assignment:
                    start, end = self._log.offsets(tp.topic, tp.partition)
                    if not start <= self._position(tp) <= end:
                        self._positions[tp] = self._reset(tp)
                continue
            for tp, n in zip(self._assignment, nexts, strict=True):
                if n is not None:
                    self._positions[tp] = n
            left = deadline - time.monotonic()
            if batch.num_rows or left <= 0:
                return batch
            self._wait(left)

    # -- commits ------------------------------------------------------------------

    def _need_group(self) -> _groups.StoreGroup | _groups.CoordinatedGroup:
        if self._group is None:
            raise IllegalStateError("commit needs a group_id")
        return self._group

    def commit(self, offsets: dict[Any, OffsetAndMetadata | int] | None = None) -> None:
        """Commit ``offsets`` ({(topic, partition): offset}), or every assigned
        partition's current position. Durable when this returns. Through a broker
        the commit carries the member's generation: after a rebalance the
        coordinator refuses it (CommitFailedError) and the next poll rejoins."""
        self._check()
        group = self._need_group()
        if offsets is None:
            todo = {
                (tp.topic, tp.partition): (self.position(tp), "")
                for tp in self._assignment
                if tp in self._positions or tp in self._pending
            }
        else:
            if not isinstance(offsets, dict):
                raise TypeError(
                    f"offsets must be a dict of (topic, partition) -> offset, got {type(offsets).__name__}"
                )
            todo = {}
            for k, v in offsets.items():
                tp = _tp(k)
                om = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v)
                todo[(tp.topic, tp.partition)] = (_offset(om.offset), om.metadata)
        group.commit(todo)
        self._committed.update(todo)
        self._last_commit = time.monotonic()

    def committed(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        """The group's last committed offset for a partition, or None."""
        self._check()
        group = self._need_group()
        tp = _tp(partition)
        if group.coordinated:  # other members commit too: ask the coordinator
            fresh = group.committed([(tp.topic, tp.partition)])
            c = fresh.get((tp.topic, tp.partition))
        else:
            c = self._committed.get((tp.topic, tp.partition))
        return None if c is None else c[0]

    def _maybe_auto_commit(self) -> None:
        if self.group_id is None or not self._config["enable_auto_commit"]:
            return
        if time.monotonic() - self._last_commit >= self._config["auto_commit_interval_ms"] / 1000:
            self.commit()

    # -- lifecycle ----------------------------------------------------------------

    def close(self, autocommit: bool = True) -> None:
        """Commit positions (with enable_auto_commit), release the group, stop."""
        if self._closed:
            return
        try:
            if autocommit and self.group_id is not None and self._config["enable_auto_commit"]:
                self.commit()
        finally:
            self._closed = True
            self._release()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
