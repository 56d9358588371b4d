"""The Producer: Kafka's producer API over an embedded store."""

from __future__ import annotations

import os
from typing import Any

from . import _native
from ._store import Store, open_for_client
from .errors import InvalidConfigError

__all__ = ["Producer"]

_KNOWN = {"batch_size", "linger_ms", "compression_type", "acks", "buffer_memory", "max_block_ms"}


class Producer(_native.Producer):
    """Sends records to a store's topics, batching them as Kafka's producer does.

    ``send`` encodes a record into the open RecordBatch of its partition and
    returns a :class:`FutureRecordMetadata` at once; a background thread appends
    a batch when it reaches ``batch_size`` bytes, after ``linger_ms``, or on
    :meth:`flush`. Keyed records go to ``murmur2(key) % partitions`` (Kafka's
    default partitioner); unkeyed ones fill one partition's batch at a time.

    ``acks``: ``0`` or ``1`` — delivered once in the log (the OS page cache);
    ``"all"`` — delivered only after fdatasync, concurrent batches sharing one.

    Safe to share between threads. A store given as a path is opened (and closed
    with the producer); sending to a missing topic creates it when the store's
    ``auto.create.topics.enable`` allows.

    >>> import tempfile, seglog
    >>> with seglog.open(tempfile.mkdtemp()) as store:
    ...     store.create_topic("events", partitions=2)
    ...     with seglog.Producer(store, linger_ms=0) as producer:
    ...         future = producer.send("events", b"hello", key=b"user-1")
    ...         md = future.get(timeout=10)
    ...     (md.topic, md.partition == store.partition_for_key("events", b"user-1"), md.offset)
    ('events', True, 0)
    """

    _store: Store
    _owns_store: bool

    def __new__(cls, store: Store | str | os.PathLike[str], **config: Any) -> Producer:
        unknown = set(config) - _KNOWN
        if unknown:
            raise InvalidConfigError(
                f"unknown Producer config {sorted(unknown)} (known: {', '.join(sorted(_KNOWN))})"
            )
        acks = config.pop("acks", 1)
        if acks not in (0, 1, -1, "0", "1", "all", "-1"):
            raise ValueError(f'acks must be 0, 1 or "all"; got {acks!r}')
        compression = config.pop("compression_type", None) or "none"
        owns = False
        if isinstance(store, Store):
            opened = store
        elif isinstance(store, (str, os.PathLike)):
            opened, owns = open_for_client(store)
        else:
            raise TypeError(f"store must be a seglog.Store or a path, got {type(store).__name__}")
        try:
            self = super().__new__(
                cls, opened._native, compression_type=compression, acks=str(acks), **config
            )
        except BaseException:
            if owns:
                opened.close()
            raise
        self._store = opened
        self._owns_store = owns
        return self

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float | None = None) -> None:
        """Deliver everything pending, then stop. Later sends raise ClientClosedError."""
        super().close(timeout)
        if self._owns_store:
            self._store.close()
