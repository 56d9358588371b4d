"""The Producer: Kafka's producer API over an embedded store or a broker."""

from __future__ import annotations

import os
from typing import Any

from . import _native
from ._store import Store, open_for_client
from .errors import InvalidConfigError

__all__ = ["Producer"]

_KNOWN = {"batch_size", "linger_ms", "compression_type", "acks", "buffer_memory", "max_block_ms"}
# Only through a broker.
_NETWORK = {"client_id", "request_timeout_ms"}


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

    ``Producer(bootstrap_servers="HOST:PORT", ...)`` (no store) sends to a broker,
    seglog's or Kafka's, with the same API, batching and futures: each batch
    goes in one Produce request to its partition's leader. ``acks`` defaults to
    ``"all"`` there (as Kafka's producer): the batch is stamped with an
    idempotent producer id and sequence, so a retried batch is stored once, and
    delivered once every in-sync replica has it. ``acks=1`` (or ``0``) waits for
    the leader's write only, without idempotence. ``client_id`` and
    ``request_timeout_ms`` are Kafka's; a record is refused by the broker (its
    future raises) where the embedded producer would refuse it in ``send``.

    >>> import tempfile, seglog
    >>> with seglog.open(tempfile.mkdtemp()) as store:
    ...     store.create_topic("events", partitions=2)
    ...     with seglog.Producer(store, linger_ms=0) as producer:
    ...         future = producer.send("events", b"hello", key=b"user-1")
    ...         md = future.get(timeout=10)
    ...     (md.topic, md.partition == store.partition_for_key("events", b"user-1"), md.offset)
    ('events', True, 0)
    """

    _store: Store | None
    _owns_store: bool

    def __new__(
        cls,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        bootstrap_servers: str | None = None,
        **config: Any,
    ) -> Producer:
        known = _KNOWN | _NETWORK if bootstrap_servers is not None else _KNOWN
        unknown = set(config) - known
        if unknown:
            raise InvalidConfigError(
                f"unknown Producer config {sorted(unknown)} (known: {', '.join(sorted(known))})"
            )
        acks = config.pop("acks", 1 if bootstrap_servers is None else "all")
        if acks not in (0, 1, -1, "0", "1", "all", "-1"):
            raise ValueError(f'acks must be 0, 1 or "all"; got {acks!r}')
        compression = config.pop("compression_type", None) or "none"
        owns = False
        if bootstrap_servers is not None:
            if store is not None:
                raise InvalidConfigError(
                    "a Producer sends to a store or to bootstrap_servers, not both: pass one"
                )
            if not isinstance(bootstrap_servers, str):
                raise TypeError(
                    f"bootstrap_servers must be a 'HOST:PORT' str, got {type(bootstrap_servers).__name__}"
                )
            self = super().__new__(
                cls,
                None,
                compression_type=compression,
                acks=str(acks),
                bootstrap_servers=bootstrap_servers,
                **config,
            )
            self._store = None
            self._owns_store = False
            return self
        if store is None:
            raise TypeError("Producer needs a store (a seglog.Store or a path) or bootstrap_servers=")
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
        if self._owns_store and self._store is not None:
            self._store.close()
