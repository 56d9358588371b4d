"""The embedded store: topics of partitioned logs in one directory."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from . import _native
from ._native import ConsumerRecord

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["open", "Store", "TopicDescription", "PartitionDescription", "RecordInput"]

ConfigValue = str | int | float | bool
Header = tuple[str, bytes | None]
#: What ``Store.append`` takes per record: the value alone, or
#: ``(key, value[, headers[, timestamp_ms]])``.
RecordInput = (
    bytes
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Iterable[Header] | None]
    | tuple[bytes | None, bytes | None, Iterable[Header] | None, int | None]
)


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    log_start_offset: int
    log_end_offset: int
    size_bytes: int
    segment_count: int
    recovery_point: int


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionDescription]
    #: Every topic config key with its effective value (Kafka's names, as text).
    config: dict[str, str] = field(default_factory=dict)
    #: Only the keys set for this topic.
    overrides: dict[str, str] = field(default_factory=dict)
    #: The last failure of the store's background maintenance (retention, cleaning,
    #: time-based flushes), with when it happened; ``None`` if it never failed.
    last_maintenance_error: str | None = None


def _kafka_names(config: Mapping[str, ConfigValue]) -> dict[str, ConfigValue]:
    """``segment_bytes=...`` (a Python keyword) means Kafka's ``segment.bytes``."""
    return {key.replace("_", "."): value for key, value in config.items()}


class Store:
    """An open store directory. Get one with :func:`seglog.open`.

    A store holds topics; each topic has partitions; each partition is a Kafka
    log directory (``<topic>-<n>``) of segments. One process at a time may
    write a store; others may open it with ``read_only=True`` and read while it
    writes. All methods are safe to call from several threads.
    """

    __slots__ = ("__weakref__", "_key", "_native")

    def __init__(self, native: _native.Store, key: tuple[str, bool]) -> None:
        self._native = native
        self._key = key

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("read-only" if self.read_only else "open")
        return f"<seglog.Store {str(self.path)!r} {state}>"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def path(self) -> Path:
        return Path(self._native.path)

    @property
    def read_only(self) -> bool:
        return self._native.read_only

    @property
    def closed(self) -> bool:
        return self._native.closed

    @property
    def clean_shutdown(self) -> bool:
        """Whether the previous writer closed the store cleanly (so no recovery ran)."""
        return self._native.clean_shutdown

    @property
    def recovery(self) -> tuple[int, int, int]:
        """What recovery did at open: (segments scanned, bytes truncated, segments deleted)."""
        return self._native.recovery

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, ConfigValue] | None = None
    ) -> None:
        """Create a topic with ``partitions`` partitions and optional config
        overrides, by Kafka's names (``{"segment.bytes": 1 << 20}``)."""
        if not isinstance(name, str):
            raise TypeError(f"topic name must be str, got {type(name).__name__}")
        if not isinstance(partitions, int) or isinstance(partitions, bool):
            raise TypeError(f"partitions must be int, got {type(partitions).__name__}")
        self._native.create_topic(name, partitions, dict(config or {}))

    def delete_topic(self, name: str) -> None:
        """Delete a topic and all its data."""
        self._native.delete_topic(name)

    def alter_topic_config(self, name: str, changes: Mapping[str, ConfigValue | None]) -> None:
        """Set (or, with ``None``, remove) topic config overrides."""
        self._native.alter_topic_config(name, dict(changes))

    def topics(self) -> list[str]:
        """Names of all topics, sorted."""
        return self._native.topics()

    def describe(self, name: str) -> TopicDescription:
        """Partitions (offsets, size, segments) and effective config of a topic."""
        d = self._native.describe(name)
        parts = [PartitionDescription(**p) for p in d.pop("partitions")]
        return TopicDescription(partitions=parts, **d)

    def partition_count(self, topic: str) -> int:
        return self._native.partition_count(topic)

    def partition_for_key(self, topic: str, key: bytes) -> int:
        """The partition Kafka's default partitioner picks for ``key``."""
        return self._native.partition_for_key(topic, key)

    def append(
        self,
        topic: str,
        partition: int,
        records: Iterable[RecordInput],
        *,
        compression_type: str = "none",
        durable: bool = False,
    ) -> tuple[int, int]:
        """Append records to one partition as RecordBatch v2 batches and return
        the (first, last) offsets they were given. With ``durable=True`` this
        returns only once the data is fsynced (concurrent callers share fsyncs).
        A missing topic is created with the store's defaults when
        ``auto.create.topics.enable`` is true (the default).

        >>> import tempfile, seglog
        >>> with seglog.open(tempfile.mkdtemp()) as store:
        ...     store.create_topic("events")
        ...     store.append("events", 0, [b"a", (b"key", b"b")])
        ...     [r.value for r in store.read("events", 0, 0)]
        (0, 1)
        [b'a', b'b']
        """
        # A missing topic is created if the store's auto.create.topics.enable allows.
        return self._native.append(topic, partition, records, compression_type, durable, True)

    def append_raw(
        self, topic: str, partition: int, data: bytes, *, durable: bool = False
    ) -> tuple[int, int]:
        """Append RecordBatch v2 bytes built elsewhere (CRC and records are
        checked; offsets are reassigned). Returns the (first, last) offsets."""
        return self._native.append_raw(topic, partition, data, durable)

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1 << 20,
        max_records: int | None = None,
    ) -> list[ConsumerRecord]:
        """Records from ``offset`` on, from whole batches of about ``max_bytes``
        (at least one batch), at most ``max_records`` of them. An empty list at the
        log end. ``read(t, p, offset, max_bytes=1, max_records=1)`` is a lookup."""
        return self._native.read(topic, partition, offset, max_bytes, max_records)

    def read_arrow(
        self,
        requests: Iterable[tuple[str, int, int]],
        max_records: int = 100_000,
        max_bytes: int = 1 << 20,
    ) -> tuple[pa.RecordBatch, list[int | None]]:
        """Records of several partitions as one ``pyarrow.RecordBatch`` with the
        columns of Spark's Kafka source (key, value, topic, partition, offset,
        timestamp, timestampType, headers), decoded in Rust straight into Arrow
        buffers. Each request is ``(topic, partition, offset)``; the partitions are
        read in the order given, each up to its log end, until the batch holds
        ``max_records`` rows; ``max_bytes`` is how much log one read step takes.

        Returns the batch (with no rows at the log ends) and, per request, the
        offset to read from next, or ``None`` where nothing was read (at the log
        end, or the batch was full before that partition). The next offset may lie
        past the last row, even with no rows: a compacted log has gaps. Needs pyarrow.

        >>> import tempfile, seglog
        >>> with seglog.open(tempfile.mkdtemp()) as store:
        ...     store.append("events", 0, [(b"k", b"a"), (b"k", b"b")])
        ...     batch, nexts = store.read_arrow([("events", 0, 1)])
        ...     batch.column("value").to_pylist(), nexts
        (0, 1)
        ([b'b'], [2])
        """
        if not isinstance(max_records, int) or isinstance(max_records, bool):
            raise TypeError(f"max_records must be int, got {type(max_records).__name__}")
        if max_records < 1:
            raise ValueError(f"max_records must be positive, got {max_records}")
        from ._arrow import columns_to_batch

        cols, nexts = self._native.read_columns(list(requests), max_records, max_bytes)
        return columns_to_batch(cols), nexts

    def read_raw(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20) -> bytes:
        """The raw batches :meth:`read` decodes."""
        return bytes(self._native.read_raw(topic, partition, offset, max_bytes))

    def file_range(
        self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20
    ) -> tuple[Path, int, int] | None:
        """``(segment file, position, length)`` of those batches, for a zero-copy
        ``os.sendfile``; ``None`` at the log end."""
        r = self._native.file_range(topic, partition, offset, max_bytes)
        return None if r is None else (Path(r[0]), r[1], r[2])

    def offset_for_time(self, topic: str, partition: int, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp_ms``, or
        ``None`` if there is none. As in Kafka's ListOffsets, ``-1`` gives ``(log end offset,
        -1)``, ``-2`` ``(log start offset, -1)`` and ``-3`` the first record with the largest
        timestamp; other negatives raise ``ValueError``."""
        return self._native.offset_for_time(topic, partition, timestamp_ms)

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """``(log start offset, log end offset)``."""
        return self._native.offsets(topic, partition)

    def truncate_to(self, topic: str, partition: int, offset: int) -> None:
        """Remove the records at ``offset`` and after (to a batch boundary)."""
        self._native.truncate_to(topic, partition, offset)

    def run_maintenance(self, topic: str | None = None) -> dict[str, int]:
        """Run the log maintenance the background thread runs every
        ``log.retention.check.interval.ms``, now: retention (``retention.ms``,
        ``retention.bytes``) and compaction (topics with ``cleanup.policy`` compact,
        when ``min.cleanable.dirty.ratio`` is reached), then removal of ``.deleted``
        files past ``file.delete.delay.ms``. Returns counts of what was done."""
        return self._native.run_maintenance(topic, False)

    def clean_topic(self, topic: str) -> dict[str, int]:
        """Compact ``topic`` now, whatever its dirty ratio (and apply its retention)."""
        return self._native.run_maintenance(topic, True)

    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Move the log start offset to ``before_offset`` (Kafka's DeleteRecords):
        records before it are no longer served; whole segments go at the next
        maintenance run. ``-1`` means the high watermark (everything); other
        negatives raise ``ValueError``. Internal topics refuse it."""
        self._native.delete_records(topic, partition, before_offset)

    def flush(self) -> None:
        """fsync every partition (logs and indexes) and write the checkpoints."""
        self._native.flush()

    def close(self) -> None:
        """Flush, write the checkpoints and the clean-shutdown marker, release the lock."""
        with _lock:
            if _open.get(self._key) is self:
                del _open[self._key]
        self._native.close()


_lock = threading.Lock()
_open: weakref.WeakValueDictionary[tuple[str, bool], Store] = weakref.WeakValueDictionary()


def _forget_parent_stores() -> None:
    # A forked child must open its own stores; the parent's are not its to use.
    global _open
    _open = weakref.WeakValueDictionary()


os.register_at_fork(after_in_child=_forget_parent_stores)


def _real(path: str | os.PathLike[str]) -> str:
    """The canonical path a store is known by in this process (``os.path.realpath``,
    resolved natively where the path exists)."""
    p = os.fspath(path)
    if isinstance(p, str):
        try:
            return _native.realpath(p)
        except (OSError, ValueError):
            pass  # not there yet (open creates it), or not UTF-8
    return os.path.realpath(p)


def open_for_client(path: str | os.PathLike[str], read_only: bool = False) -> tuple[Store, bool]:
    """The Store a Producer or Consumer given a path should use, and whether the
    client owns it (opened it, so closes it). A store this process already has
    open for the path is shared, never closed by the client."""
    key = (_real(path), read_only)
    with _lock:
        existing = _open.get(key)
        if existing is not None and not existing.closed:
            return existing, False
    return open(path, read_only=read_only), True


def open(
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    config: Mapping[str, ConfigValue] | None = None,
    **options: ConfigValue,
) -> Store:
    """Open the store at ``path`` (created if missing, unless ``read_only``).

    Settings use Kafka's names, either in ``config`` (``{"segment.bytes": 1 << 20}``)
    or as keywords with underscores (``segment_bytes=1 << 20``). Topic keys set the
    defaults for the store's topics; store keys are ``auto.create.topics.enable``
    and ``num.partitions``.

    Opening a path already open in this process returns the same :class:`Store`.
    A second writing process gets :class:`~seglog.errors.StoreLockedError`.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be str or os.PathLike, got {type(path).__name__}")
    if not isinstance(read_only, bool):
        raise TypeError(f"read_only must be bool, got {type(read_only).__name__}")
    merged: dict[str, ConfigValue] = dict(config or {})
    merged.update(_kafka_names(options))
    key = (_real(path), read_only)
    with _lock:
        store = _open.get(key)
        if store is not None and not store.closed:
            if merged:
                raise ValueError(
                    f"store {key[0]!r} is already open in this process; "
                    "pass its config only on the first open"
                )
            return store
        native = _native.Store(key[0], merged, read_only)
        store = Store(native, key)
        _open[key] = store
        return store
