"""How the data source reaches a log: a store directory (``path``) opened in each
worker, or a broker (``kafka.bootstrap.servers``) spoken to over Kafka's protocol.

Planning, options, schema and the readers' and writers' logic are the same for
both; they differ only in the two small objects here: a :class:`LogAccess` (topics,
partition counts, offsets, offsets by time, a range of records as Arrow) and an
:class:`Appender` (appends a run of rows to one topic)."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from .._native import RemoteClient, murmur2
from .._producer import Producer
from .._store import Store
from .._store import open as open_store
from ..errors import SeglogError, StoreLockedError, UnknownTopicOrPartitionError

# (partition, first offset, last offset) of the records an append put in one partition.
Span = tuple[int, int, int]

# Kafka's error code for an unknown topic or partition, as Metadata answers it.
_UNKNOWN_TOPIC_OR_PARTITION = 3
# Rows of unkeyed records (no partition column) a remote append sends to one
# partition before moving to the next (Kafka's sticky partitioner, by batch).
_STICKY_ROWS = 16_384


@dataclass(frozen=True)
class Location:
    """Where the log is: exactly one of a store directory and a broker list."""

    path: str | None = None
    bootstrap_servers: str | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return f"path {self.path!r}"
        return f"kafka.bootstrap.servers {self.bootstrap_servers!r}"

    def open_reader(self) -> LogAccess:
        if self.path is not None:
            try:
                return _StoreLog(open_store(self.path, read_only=True))
            except FileNotFoundError:
                raise FileNotFoundError(f"seglog: no store at path {self.path!r}") from None
        assert self.bootstrap_servers is not None
        return _RemoteLog(self.bootstrap_servers)

    def open_appender(self, lock_timeout_ms: int) -> Appender:
        if self.path is not None:
            return _ProducerAppender(_open_for_write(self.path, lock_timeout_ms))
        assert self.bootstrap_servers is not None
        return _RemoteAppender(self.bootstrap_servers)


class LogAccess(Protocol):
    """What reading needs of a log."""

    def topics(self) -> dict[str, int]:
        """Every topic and its partition count."""
        ...

    def partition_count(self, topic: str) -> int:
        """Raises UnknownTopicOrPartitionError for a missing topic."""
        ...

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """The log start offset and the log end offset (high watermark)."""
        ...

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The first offset whose timestamp is >= timestamp, None if none is."""
        ...

    def read_arrow(
        self, topic: str, partition: int, offset: int, max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, int | None]:
        """Records at or after offset as a batch of the 8 Arrow columns, and the
        offset to read next (None if nothing was read). Raises OffsetOutOfRangeError
        and UnknownTopicOrPartitionError as a store and a broker do."""
        ...

    def close(self) -> None: ...


class Appender(Protocol):
    """What writing needs of a log: one write task's appends."""

    def send(
        self,
        topic: str,
        partition: int | None,
        values: pa.Array,
        keys: pa.Array | None,
        headers: pa.Array | None,
    ) -> list[Span]:
        """Appends the rows (binary or string columns; headers a list<struct<key,
        value>> column or None) in order; partition None for Kafka's partitioner."""
        ...

    def close(self) -> None:
        """Makes everything sent durable, then releases the log."""
        ...


def _as_bytes(v: Any) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


# -- a store directory -----------------------------------------------------------------


class _StoreLog:
    def __init__(self, store: Store) -> None:
        self._store = store

    def topics(self) -> dict[str, int]:
        out = {}
        for t in self._store.topics():
            try:
                out[t] = self._store.partition_count(t)
            except UnknownTopicOrPartitionError:  # deleted meanwhile
                continue
        return out

    def partition_count(self, topic: str) -> int:
        return self._store.partition_count(topic)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        start, end = self._store.offsets(topic, partition)
        return start, end

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        r = self._store.offset_for_time(topic, partition, timestamp)
        return None if r is None else r[0]

    def read_arrow(
        self, topic: str, partition: int, offset: int, max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, int | None]:
        batch, nexts = self._store.read_arrow([(topic, partition, offset)], max_records, max_bytes)
        return batch, nexts[0]

    def close(self) -> None:
        self._store.close()


def _open_for_write(path: str, lock_timeout_ms: int) -> Store:
    """Opens the store for writing, waiting (with backoff) while another process
    holds the writer lock, at most writeLockTimeoutMs."""
    deadline = time.monotonic() + lock_timeout_ms / 1000
    delay = 0.001
    while True:
        try:
            return open_store(path)
        except StoreLockedError as e:
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreLockedError(
                    f"seglog sink: gave up waiting {lock_timeout_ms} ms (writeLockTimeoutMs) for the "
                    f"writer lock of {path!r}: {e}. A store has one writer at a time; close the other "
                    "writer (or open it read_only=True) while Spark writes, or raise writeLockTimeoutMs. "
                    "(Or write through the broker that serves it: kafka.bootstrap.servers.)"
                ) from None
            # A failed attempt costs ~20 us: poll often, so the lock does not sit idle.
            time.sleep(min(left, delay * random.uniform(0.5, 1.0)))
            delay = min(delay * 2, 0.01)


class _ProducerAppender:
    """Appends with seglog.Producer(acks=1) under the store's writer lock;
    close() fsyncs every partition once and releases the lock."""

    def __init__(self, store: Store) -> None:
        self._store = store
        try:
            self._producer = Producer(store, acks=1)
        except BaseException:
            store.close()
            raise

    def send(
        self,
        topic: str,
        partition: int | None,
        values: pa.Array,
        keys: pa.Array | None,
        headers: pa.Array | None,
    ) -> list[Span]:
        if headers is None:
            return list(self._producer.send_batch(topic, values, keys, partition=partition))
        futures = [
            self._producer.send(
                topic,
                _as_bytes(v),
                key=None if keys is None else _as_bytes(keys[i].as_py()),
                headers=[(x["key"], _as_bytes(x["value"])) for x in (h or [])],
                partition=partition,
            )
            for i, (v, h) in enumerate(zip(values.to_pylist(), headers.to_pylist(), strict=True))
        ]
        self._producer.flush()
        spans: dict[int, tuple[int, int]] = {}
        for f in futures:
            md = f.get(0)
            first, last = spans.get(md.partition, (md.offset, md.offset))
            spans[md.partition] = (min(first, md.offset), max(last, md.offset))
        return [(p, first, last) for p, (first, last) in spans.items()]

    def close(self) -> None:
        try:
            self._producer.close()
        finally:
            self._store.close()


# -- a broker --------------------------------------------------------------------------

# One client per broker list in each worker process, kept across tasks (Spark
# reuses its Python workers), so that a task does not pay for connecting. Keyed
# by pid too: a RemoteClient does not survive a fork.
_CLIENTS: dict[tuple[str, int], RemoteClient] = {}


def _client(servers: str) -> RemoteClient:
    key = (servers, os.getpid())
    client = _CLIENTS.get(key)
    if client is None:
        try:
            client = RemoteClient(servers, client_id="seglog-spark")
        except OSError as e:
            raise type(e)(
                f"seglog: cannot reach the broker at kafka.bootstrap.servers {servers!r}: {e}"
            ) from None
        _CLIENTS[key] = client
    return client


def _forget(servers: str) -> None:
    """Drops the cached client after a failure, so the next task connects afresh."""
    client = _CLIENTS.pop((servers, os.getpid()), None)
    if client is not None:
        client.close()


def _topic_error(topic: str, code: int, servers: str) -> SeglogError:
    if code == _UNKNOWN_TOPIC_OR_PARTITION:
        return UnknownTopicOrPartitionError(f"topic {topic!r} does not exist on the broker at {servers}")
    return SeglogError(f"the broker at {servers} answered Metadata for {topic!r} with Kafka error {code}")


class _RemoteLog:
    """Reads through a broker: Metadata, ListOffsets and Fetch (decoded in Rust
    straight into Arrow buffers)."""

    def __init__(self, servers: str) -> None:
        self._servers = servers
        self._client = _client(servers)

    def _call(self, f: Any, *args: Any) -> Any:
        try:
            return f(*args)
        except OSError:
            _forget(self._servers)
            raise

    def topics(self) -> dict[str, int]:
        m = self._call(self._client.metadata)
        return {name: len(t["partitions"]) for name, t in m["topics"].items() if t["error_code"] == 0}

    def partition_count(self, topic: str) -> int:
        t = self._call(self._client.metadata, [topic])["topics"].get(topic)
        code = _UNKNOWN_TOPIC_OR_PARTITION if t is None else t["error_code"]
        if code:
            raise _topic_error(topic, code, self._servers)
        return len(t["partitions"])

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        start = self._call(self._client.list_offsets, topic, partition, -2)
        end = self._call(self._client.list_offsets, topic, partition, -1)
        return int(start), int(end)

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        r = self._call(self._client.list_offsets, topic, partition, timestamp)
        return None if r is None else int(r)

    def read_arrow(
        self, topic: str, partition: int, offset: int, max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, int | None]:
        from .._arrow import columns_to_batch

        # No wait: the range was planned below the high watermark, so the data is
        # there unless it was removed meanwhile (then the caller sees nothing read).
        cols, nxt = self._call(self._client.fetch_arrow, topic, partition, offset, max_records, max_bytes, 0)
        return columns_to_batch(cols), nxt

    def close(self) -> None:
        pass  # the client stays for the worker's next task


class _RemoteAppender:
    """Appends through a broker with RemoteClient.produce (idempotent, acks=all,
    so each send is durable on the broker before it returns). Partitions as
    Kafka's producer: murmur2 of the key, unkeyed rows a chunk at a time to one
    partition, in turn."""

    def __init__(self, servers: str) -> None:
        self._servers = servers
        self._client = _client(servers)
        self._counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}

    def _partition_count(self, topic: str) -> int:
        n = self._counts.get(topic)
        if n is None:
            t = self._client.metadata([topic])["topics"].get(topic)
            code = _UNKNOWN_TOPIC_OR_PARTITION if t is None else t["error_code"]
            if code == _UNKNOWN_TOPIC_OR_PARTITION:
                raise UnknownTopicOrPartitionError(
                    f"seglog sink: topic {topic!r} does not exist on the broker at {self._servers}; "
                    "create it first (Kafka's partitioner needs its partition count; rows with a "
                    "partition column are sent as they are, which creates it if the broker allows)"
                )
            if code:
                raise _topic_error(topic, code, self._servers)
            n = self._counts[topic] = len(t["partitions"])
        return n

    def send(
        self,
        topic: str,
        partition: int | None,
        values: pa.Array,
        keys: pa.Array | None,
        headers: pa.Array | None,
    ) -> list[Span]:
        n = len(values)
        vs = values.to_pylist()
        ks = keys.to_pylist() if keys is not None and keys.null_count < n else None
        hs = headers.to_pylist() if headers is not None else None
        records: list[Any] = []
        for i in range(n):
            v = _as_bytes(vs[i])
            k = None if ks is None else _as_bytes(ks[i])
            h = None if hs is None or not hs[i] else [(x["key"], _as_bytes(x["value"])) for x in hs[i]]
            if h is not None:
                records.append((k, v, h))
            elif k is not None or v is None:
                records.append((k, v))
            else:
                records.append(v)
        if partition is not None:
            groups = {partition: records}
        else:
            count = self._partition_count(topic)
            groups = {}
            sticky = self._sticky.get(topic)
            if sticky is None:
                sticky = random.randrange(count)
            unkeyed = 0
            for i, r in enumerate(records):
                k = None if ks is None else _as_bytes(ks[i])
                if k is None:
                    if unkeyed and unkeyed % _STICKY_ROWS == 0:
                        sticky = (sticky + 1) % count
                    unkeyed += 1
                    p = sticky
                else:
                    p = (murmur2(k) & 0x7FFF_FFFF) % count
                groups.setdefault(p, []).append(r)
            self._sticky[topic] = (sticky + 1) % count if unkeyed else sticky
        spans = []
        for p, recs in groups.items():
            try:
                base = self._client.produce(topic, p, recs)
            except OSError:
                _forget(self._servers)
                raise
            # A send of more than one batch may interleave with other producers'
            # batches; the span is where the first batch began and its record count.
            spans.append((p, base, base + len(recs) - 1))
        return spans

    def close(self) -> None:
        pass  # every produce was acknowledged by the broker (acks=all)
