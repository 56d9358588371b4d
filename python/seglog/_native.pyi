"""Type stubs for the Rust extension module. Use the ``seglog`` package, not this."""

from collections.abc import Callable, Iterable, Mapping
from os import PathLike
from typing import Any, Self, final

from typing_extensions import disjoint_base

__all__ = [
    "ByteBuffer",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "Producer",
    "RecordMetadata",
    "Store",
    "__version__",
    "decode_batches",
    "murmur2",
]
__version__: str

@final
class ConsumerRecord:
    """One record read from a log: Kafka's ConsumerRecord fields, immutable."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int:
        """Milliseconds since the epoch."""
    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime (Kafka's ids)."""
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> tuple[tuple[str, bytes | None], ...]:
        """A tuple of (key: str, value: bytes | None) pairs."""

@final
class Store:
    def __new__(
        cls,
        path: str | PathLike[str],
        config: Mapping[str, str | int | float | bool] | None = None,
        read_only: bool = False,
    ) -> Store: ...
    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def closed(self) -> bool: ...
    @property
    def opened_by_pid(self) -> int: ...
    @property
    def clean_shutdown(self) -> bool: ...
    @property
    def recovery(self) -> tuple[int, int, int]:
        """(segments scanned, bytes truncated, segments deleted) by recovery at open."""
    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str | int | float | bool] | None = None
    ) -> None: ...
    def delete_topic(self, name: str) -> None: ...
    def alter_topic_config(
        self, name: str, changes: Mapping[str, str | int | float | bool | None]
    ) -> None: ...
    def topics(self) -> list[str]: ...
    def partition_count(self, topic: str) -> int: ...
    def describe(self, name: str) -> dict[str, Any]:
        """A dict: name, topic_id, partitions (list of dicts), config, overrides."""
    def partition_for_key(self, topic: str, key: bytes) -> int:
        """Kafka's default partitioner: murmur2(key) mod the topic's partition count."""
    def append(
        self,
        topic: str,
        partition: int,
        records: Iterable[Any],
        compression_type: str = "none",
        durable: bool = False,
        create: bool = False,
    ) -> tuple[int, int]:
        """Appends records as one or more batches; returns (base_offset, last_offset)."""
    def append_raw(self, topic: str, partition: int, data: bytes, durable: bool = False) -> tuple[int, int]:
        """Appends RecordBatch v2 bytes made elsewhere (validated: CRC, records)."""
    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1048576,
        max_records: int | None = None,
    ) -> list[ConsumerRecord]:
        """Records at or after `offset`, from whole batches of at most `max_bytes`
        (always at least one batch)."""
    def read_next(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1048576,
        max_records: int | None = None,
    ) -> tuple[list[ConsumerRecord], int]:
        """As `read`, plus the offset after the last batch read (which may hold no
        records: a compacted log can end a segment with an empty batch), so that
        a consumer can move past it. At the log end: ([], offset)."""
    def read_raw(self, topic: str, partition: int, offset: int, max_bytes: int = 1048576) -> bytes:
        """The raw batches `read` would decode, as bytes."""
    def file_range(
        self, topic: str, partition: int, offset: int, max_bytes: int = 1048576
    ) -> tuple[str, int, int] | None:
        """(segment path, position, length) of the batches `read` would return, for
        zero-copy transfer (os.sendfile), or None at the log end."""
    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`."""
    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) of a partition."""
    def wait_for_data(self, partitions: list[tuple[str, int, int]], timeout: float) -> bool:
        """Waits up to `timeout` seconds until any of `partitions` ((topic, partition,
        position) triples) has data at or past its position. Returns whether one has."""
    def read_columns(
        self, requests: list[tuple[str, int, int]], max_records: int, max_bytes: int = 1048576
    ) -> tuple[dict[str, Any], list[int | None]]:
        """Reads records from several partitions into Arrow column buffers. Each
        request is (topic, partition, offset); reading stops at `max_records` in
        all or `max_bytes` per partition. Returns the columns (as bytes, see
        seglog._consumer) and each partition's next offset (None if nothing read)."""
    def load_committed(self, group: str) -> tuple[dict[tuple[str, int], tuple[int, str]], int]:
        """The committed (offset, metadata) per (topic, partition) of a consumer
        group, and how many records of __consumer_offsets could not be parsed."""
    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Appends a consumer group's commits to __consumer_offsets, durably."""
    def truncate_to(self, topic: str, partition: int, offset: int) -> None: ...
    def run_maintenance(self, topic: str | None = None, force_clean: bool = False) -> dict[str, int]:
        """Retention, compaction and removal of `.deleted` files now (for every
        topic, or one). Returns what was done, as a dict."""
    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Moves a partition's log start offset forward (Kafka's DeleteRecords)."""
    def flush(self) -> None: ...
    def close(self) -> None: ...

def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of `data`, as a signed 32-bit int."""

def decode_batches(data: bytes, topic: str = "", partition: int = ...) -> list[ConsumerRecord]:
    """Decodes raw RecordBatch v2 bytes into ConsumerRecords (CRC checked)."""

@final
class ByteBuffer:
    """An immutable byte buffer owned by Rust and lent to Python through the
    buffer protocol, so that pyarrow wraps it without a copy."""

    def __len__(self) -> int: ...

@final
class RecordMetadata:
    """Where a record landed: Kafka's RecordMetadata."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int:
        """The record's timestamp, or the log's append time for LogAppendTime topics."""
    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""

@final
class FutureRecordMetadata:
    """The pending result of one `send`, like kafka-python's FutureRecordMetadata."""

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Waits for delivery and returns the RecordMetadata, or raises the error."""
    @property
    def is_done(self) -> bool: ...
    def succeeded(self) -> bool: ...
    def failed(self) -> bool: ...
    @property
    def exception(self) -> BaseException | None:
        """The error if delivery failed, else None."""
    def add_callback(self, f: Callable[..., object], *args: Any) -> Self:
        """Calls `f(*args, metadata)` on delivery (at once if already delivered), in
        the producer's sender thread, as kafka-python does. Returns the future."""
    def add_errback(self, f: Callable[..., object], *args: Any) -> Self:
        """Calls `f(*args, exception)` if delivery fails."""

@disjoint_base
class Producer:
    def __new__(
        cls,
        store: Store,
        batch_size: int = 16384,
        linger_ms: float = 5.0,
        compression_type: str = "none",
        acks: str = "1",
        buffer_memory: int = 33554432,
        max_block_ms: float = 60000.0,
    ) -> Self: ...
    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> FutureRecordMetadata:
        """Queues one record; returns a FutureRecordMetadata."""
    def send_batch(
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> list[tuple[int, int, int]]:
        """Appends many records as whole batches and waits for them; returns a list
        of (partition, first_offset, last_offset), one per partition written."""
    def flush(self, timeout: float | None = None) -> None:
        """Sends all pending batches and waits for their delivery."""
    def close(self, timeout: float | None = None) -> None: ...
    @property
    def closed(self) -> bool: ...
