"""How the data source reaches a log: a store directory (``path``) opened in each
worker, or a broker (``kafka.bootstrap.servers``) spoken to over Kafka's protocol,
through seglog's public clients alone: a :class:`seglog.Consumer` reads (topics,
partition counts, offsets, offsets by time, a range of records as Arrow) and a
:class:`seglog.Producer` appends, whichever the location. Planning, options, schema
and the readers' and writers' logic are the same for both."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from .. import Admin, Consumer, Producer, Store, TopicPartition
from .. import open as open_store
from ..errors import StoreLockedError, UnknownTopicOrPartitionError

# (partition, first offset, last offset) of the records an append put in one partition.
Span = tuple[int, int, int]


@dataclass(frozen=True)
class Location:
    """Where the log is: exactly one of a store directory and a broker list."""

    path: str | None = None
    bootstrap_servers: str | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return f"path {self.path!r}"
        return f"kafka.bootstrap.servers {self.bootstrap_servers!r}"

    def open_reader(self, max_bytes: int = 1 << 20) -> LogAccess:
        """A reader fetching about ``max_bytes`` of a partition per read step."""
        if self.path is not None:
            if not os.path.isdir(self.path):
                raise FileNotFoundError(f"seglog: no store at path {self.path!r}")
            consumer = Consumer(self.path, read_only=True, **_reader_config(max_bytes))
            return LogAccess(consumer, "", owned=True)
        assert self.bootstrap_servers is not None
        return LogAccess(_broker_consumer(self.bootstrap_servers, max_bytes), self._on_broker(), owned=False)

    def open_appender(self, lock_timeout_ms: int) -> Appender:
        if self.path is not None:
            store = _open_for_write(self.path, lock_timeout_ms)
            try:
                return Appender(Producer(store, acks=1), store, None)
            except BaseException:
                store.close()
                raise
        assert self.bootstrap_servers is not None
        servers = self.bootstrap_servers
        try:
            producer = Producer(bootstrap_servers=servers, acks="all", client_id="seglog-spark")
        except OSError as e:
            raise type(e)(_unreachable(servers, e)) from None
        return Appender(producer, None, servers)

    def _on_broker(self) -> str:
        return f" on the broker at {self.bootstrap_servers}"


def _as_bytes(v: Any) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _unreachable(servers: str, e: OSError) -> str:
    return f"seglog: cannot reach the broker at kafka.bootstrap.servers {servers!r}: {e}"


def _reader_config(max_bytes: int) -> dict[str, Any]:
    # Positions are set by each read (seek); a removed offset is the reader's to
    # report (failOnDataLoss), not a consumer's to reset.
    return {
        "auto_offset_reset": "none",
        "enable_auto_commit": False,
        "max_partition_fetch_bytes": max_bytes,
        "client_id": "seglog-spark",
    }


# One consumer per broker list in each worker process, kept across tasks (Spark
# reuses its Python workers), so that a task does not pay for connecting. Keyed
# by pid too: a consumer does not survive a fork.
_CONSUMERS: dict[tuple[str, int, int], Consumer] = {}


def _broker_consumer(servers: str, max_bytes: int) -> Consumer:
    key = (servers, max_bytes, os.getpid())
    consumer = _CONSUMERS.get(key)
    if consumer is None or consumer.closed:
        try:
            consumer = Consumer(bootstrap_servers=servers, **_reader_config(max_bytes))
        except OSError as e:
            raise type(e)(_unreachable(servers, e)) from None
        _CONSUMERS[key] = consumer
    return consumer


class LogAccess:
    """What reading needs of a log, through a Consumer: topics and partition counts,
    offsets, offsets by time (its lookups), and a range of records as Arrow (the
    partition assigned, sought, polled). Raises OffsetOutOfRangeError and
    UnknownTopicOrPartitionError as a store and a broker do."""

    def __init__(self, consumer: Consumer, where: str, owned: bool) -> None:
        self._consumer = consumer
        self._where = where
        self._owned = owned

    def _call(self, f: Any, *args: Any) -> Any:
        try:
            return f(*args)
        except OSError:
            if not self._owned:  # the next task connects afresh
                self._consumer.close()
            raise

    def topics(self) -> dict[str, int]:
        out = {}
        for t in self._call(self._consumer.topics):
            parts = self._call(self._consumer.partitions_for_topic, t)
            if parts is not None:  # not deleted meanwhile
                out[t] = len(parts)
        return out

    def partition_count(self, topic: str) -> int:
        parts = self._call(self._consumer.partitions_for_topic, topic)
        if parts is None:
            raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist{self._where}")
        return len(parts)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        tp = TopicPartition(topic, partition)
        start = self._call(self._consumer.beginning_offsets, [tp])[tp]
        end = self._call(self._consumer.end_offsets, [tp])[tp]
        return int(start), int(end)

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> int | None:
        tp = TopicPartition(topic, partition)
        found = self._call(self._consumer.offsets_for_times, {tp: timestamp})[tp]
        return None if found is None else int(found.offset)

    def read_arrow(
        self, topic: str, partition: int, offset: int, max_records: int
    ) -> tuple[pa.RecordBatch, int | None]:
        tp = TopicPartition(topic, partition)
        consumer = self._consumer
        if consumer.assignment() != {tp}:
            self._call(consumer.assign, [tp])
        consumer.seek(tp, offset)
        # No wait: the range was planned below the high watermark, so the data is
        # there unless it was removed meanwhile (then nothing is read).
        batch = self._call(consumer.poll_arrow, max_records, 0)
        nxt = consumer.position(tp)
        return batch, (nxt if nxt > offset else None)

    def close(self) -> None:
        if self._owned:
            self._consumer.close()


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


class Appender:
    """What writing needs of a log, one write task's appends, through a Producer:
    into a store under its writer lock (acks=1; closing the store fsyncs every
    partition once and releases the lock), or through a broker (acks=all,
    idempotent: each batch is durable on the broker once its future completes).
    ``send`` appends rows (binary or string columns; headers a list<struct<key,
    value>> column or None) in order, partition None for Kafka's partitioner."""

    def __init__(self, producer: Producer, store: Store | None, servers: str | None) -> None:
        self._producer = producer
        self._store = store
        self._servers = servers
        self._checked: set[str] = set()

    def _check_topic(self, topic: str) -> None:
        """Through a broker, rows without a partition need the topic to exist: Kafka's
        partitioner needs its partition count (rows with a partition column are sent
        as they are, which creates it if the broker allows)."""
        if self._servers is None or topic in self._checked:
            return
        with Admin(bootstrap_servers=self._servers, client_id="seglog-spark") as admin:
            if admin.partitions_for_topic(topic) is None:
                raise UnknownTopicOrPartitionError(
                    f"seglog sink: topic {topic!r} does not exist on the broker at {self._servers}; "
                    "create it first (Kafka's partitioner needs its partition count; rows with a "
                    "partition column are sent as they are, which creates it if the broker allows)"
                )
        self._checked.add(topic)

    def send(
        self,
        topic: str,
        partition: int | None,
        values: pa.Array,
        keys: pa.Array | None,
        headers: pa.Array | None,
    ) -> list[Span]:
        if partition is None:
            self._check_topic(topic)
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
            if self._store is not None:
                self._store.close()
