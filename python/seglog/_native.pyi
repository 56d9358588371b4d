"""Type stubs for the Rust extension module. Use the ``seglog`` package, not this."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any, Literal, Self, final

from typing_extensions import disjoint_base

__all__ = [
    "Consumer",
    "ConsumerIterator",
    "BROKER_KEYS",
    "generate_pki",
    "BROKER_KEY_PREFIXES",
    "Broker",
    "ByteBuffer",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "IndexContents",
    "LogBatch",
    "LogStop",
    "LogWalk",
    "Producer",
    "RecordMetadata",
    "RemoteClient",
    "SegmentScan",
    "Store",
    "__version__",
    "check_index",
    "decode_batches",
    "murmur2",
    "read_index",
    "realpath",
    "scan_log",
    "walk_log",
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
class Consumer:
    """The consumer engine behind seglog.Consumer: subscription, assignment,
    positions and resets, fetching (one Fetch per broker through a cluster),
    commits and auto-commit. Calls release the GIL."""

    def __new__(
        cls,
        store: Store | None,
        bootstrap_servers: str | None,
        group_id: str | None,
        coordinator: str | None,
        *,
        key_type: type[tuple[str, int]],
        auto_offset_reset: str,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
        max_partition_fetch_bytes: int,
        metadata_max_age_ms: int,
        fetch_max_wait_ms: int,
        group_instance_id: str | None,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_poll_interval_ms: int,
        partition_assignment_strategy: list[str],
        client_id: str,
        request_timeout_ms: int,
    ) -> Consumer: ...
    @property
    def skipped_offset_records(self) -> int:
        """Records of __consumer_offsets that could not be parsed when the group's
        offsets were loaded from a store."""
    @property
    def generation(self) -> int | None:
        """The group generation joined last (-1 before; None if not through a broker)."""
    @property
    def closed(self) -> bool: ...
    def topics(self) -> list[str]:
        """The topics there are (internal ones included), sorted."""
    def partition_count(self, topic: str) -> int | None:
        """How many partitions `topic` has; None if there is no such topic."""
    def subscribe(self, topics: list[str], pattern: str | None = None) -> None: ...
    def subscription(self) -> list[str] | None: ...
    def unsubscribe(self) -> None: ...
    def assign(self, partitions: Sequence[tuple[str, int]]) -> None: ...
    def assignment(self) -> list[tuple[str, int]]: ...
    def position(self, topic: str, partition: int) -> int: ...
    def seek(self, topic: str, partition: int, offset: int) -> None: ...
    def seek_to(self, partitions: Sequence[tuple[str, int]], to: str) -> None:
        """To "earliest" or "latest"; every assigned partition for an empty list."""
    def offsets(self, partitions: Sequence[tuple[str, int]]) -> list[tuple[int, int]]:
        """(log start offset, high watermark) of each partition."""
    def offsets_for_times(
        self, times: Sequence[tuple[tuple[str, int], int]]
    ) -> list[tuple[int, int] | None]: ...
    def poll(self, max_records: int, timeout_ms: float) -> dict[Any, list[ConsumerRecord]]:
        """{key_type(topic, partition): records}."""
    def records(self, timeout_ms: float) -> ConsumerIterator:
        """Records one at a time, waiting up to `timeout_ms` (inf: forever) for more."""
    def poll_columns(self, max_records: int, timeout_ms: float) -> dict[str, Any]: ...
    def commit(self, offsets: list[tuple[str, int, int, str]] | None = None) -> None: ...
    def committed(self, topic: str, partition: int) -> tuple[int, str] | None: ...
    def close(self, autocommit: bool) -> str | None:
        """Commits (with auto-commit), leaves the group, stops; why leaving failed, if it did."""

@final
class ConsumerIterator:
    def __iter__(self) -> ConsumerIterator: ...
    def __next__(self) -> ConsumerRecord: ...

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
        """A dict: name, topic_id, partitions (list of dicts), config, overrides,
        last_maintenance_error."""
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
    def load_groups(self, group: str | None = None) -> tuple[dict[str, dict[str, Any]], int]:
        """Every group `__consumer_offsets` knows (only `group` when given): id ->
        {"offsets": {(topic, partition): (offset, metadata, commit_timestamp)},
        "metadata": None or the last GroupMetadataValue as a dict}; and how many
        records could not be parsed."""
    def delete_group(self, group: str) -> int:
        """Deletes a group as Kafka's coordinator does (tombstones for its offsets
        and metadata, durably); how many tombstones: 0 for an unknown group."""
    def truncate_to(self, topic: str, partition: int, offset: int) -> None: ...
    def run_maintenance(self, topic: str | None = None, force_clean: bool = False) -> dict[str, int]:
        """Retention, compaction and removal of `.deleted` files now (for every
        topic, or one). Returns what was done, as a dict."""
    def delete_records(self, topic: str, partition: int, before_offset: int) -> None:
        """Moves a partition's log start offset forward (Kafka's DeleteRecords)."""
    def flush(self) -> None: ...
    def close(self) -> None: ...

def generate_pki(dir: str, hosts: list[str]) -> tuple[str, str]: ...

BROKER_KEYS: list[str]
BROKER_KEY_PREFIXES: list[str]

@final
class Broker:
    def __new__(
        cls, store: Store, config: dict[str, str] | None = None, metrics: str | None = None
    ) -> Broker: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def listeners(self) -> list[tuple[str, str, str, int]]: ...
    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def metrics_address(self) -> str | None: ...
    @property
    def closed(self) -> bool: ...
    def stats(self) -> dict[str, int]: ...
    def metrics_text(self) -> str: ...
    def close(self, timeout: float = 10.0) -> None: ...

@final
class RemoteClient:
    """A blocking Kafka protocol client to a broker (seglog's or Kafka's): metadata,
    fetch, list offsets and an idempotent producer."""

    def __new__(
        cls, bootstrap_servers: str, client_id: str = "seglog", timeout_ms: int = 30000
    ) -> RemoteClient: ...
    def metadata(self, topics: list[str] | None = None) -> dict[str, Any]:
        """The cluster as a Metadata request describes it: cluster_id, controller_id,
        brokers (list of dicts) and topics (name -> dict with error_code, is_internal and
        partitions). Every topic for None; asking does not create topics."""
    def list_offsets(self, topic: str, partition: int, timestamp: int) -> int | None:
        """The offset for `timestamp`: -2 the log start, -1 the high watermark, else the
        first offset whose timestamp is at or after it (None if none is)."""
    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_bytes: int = 1048576,
        max_wait_ms: int = 500,
        max_records: int | None = None,
    ) -> list[ConsumerRecord]:
        """Records at or after `offset` from one Fetch (whole batches of at most about
        `max_bytes`; the broker waits up to `max_wait_ms` for data)."""
    def fetch_arrow(
        self,
        topic: str,
        partition: int,
        offset: int,
        max_records: int,
        max_bytes: int = 1048576,
        max_wait_ms: int = 500,
    ) -> tuple[dict[str, Any], int | None]:
        """Records at or after `offset` as Arrow column buffers (the dict
        `Store.read_columns` gives), at most `max_records`, fetching until then or the high
        watermark; and the offset to read next (None if nothing was read)."""
    def produce(
        self,
        topic: str,
        partition: int,
        records: Iterable[Any],
        compression: str = "none",
    ) -> int:
        """Appends `records` (as `Store.append` takes them; a record without a timestamp
        gets now) idempotently with acks=all; the first one's offset."""
    def list_groups(self) -> list[dict[str, Any]]:
        """Every consumer group of the cluster (ListGroups to each broker), sorted:
        dicts with group_id, protocol_type and state (None from brokers below v4)."""
    def describe_groups(self, groups: list[str]) -> list[dict[str, Any]]:
        """DescribeGroups at each group's coordinator: dicts with group_id, state
        ("Dead" for an unknown group), protocol_type, protocol and members (dicts
        with member_id, group_instance_id, client_id, client_host and, for a
        consumer group, assignment as a list of (topic, partition)). The first
        group that fails raises."""
    def fetch_offsets(
        self, group: str, partitions: list[tuple[str, int]] | None = None
    ) -> dict[tuple[str, int], tuple[int, str]]:
        """The committed (offset, metadata) per (topic, partition) of `group`: of
        `partitions`, or of all it committed (None). Uncommitted ones are absent."""
    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
        """Commits (offset, metadata) per (topic, partition) for `group` as an
        admin tool: generation -1, no member id, which the coordinator accepts
        only while the group has no members."""
    def delete_groups(self, groups: list[str]) -> None:
        """Deletes the groups with their offsets (each must have no members); the
        first that fails raises, after every one was tried."""
    def close(self) -> None:
        """Drops the idle connections (the next call reconnects)."""

def realpath(path: str) -> str:
    """`path` with every link, `.` and `..` resolved; OSError if a part is missing."""

def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of `data`, as a signed 32-bit int."""

def decode_batches(data: bytes, topic: str = "", partition: int = ...) -> list[ConsumerRecord]:
    """Decodes raw RecordBatch v2 bytes into ConsumerRecords (CRC checked)."""

@final
class LogBatch:
    """A batch found in a `.log`: its header fields as stored, and whether it validates."""

    @property
    def error(self) -> str | None:
        """Why the batch is invalid (CRC-32C, codec, record layout), or None."""
    @property
    def records(self) -> list[ConsumerRecord]:
        """Its records when the walk decodes (none for a control or invalid batch)."""
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def batch_length(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    @property
    def attributes(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def records_count(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def codec(self) -> str: ...
    @property
    def timestamp_type(self) -> Literal["CreateTime", "LogAppendTime"]: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_delete_horizon(self) -> bool: ...
    @property
    def last_sequence(self) -> int: ...
    def sequence_at(self, offset: int) -> int:
        """The sequence of the record at `offset` (-1 for a batch without sequences)."""

@final
class LogStop:
    """Where a walk of a `.log` had to stop (batch boundaries lost), and why."""

    @property
    def position(self) -> int: ...
    @property
    def reason(self) -> str: ...
    @property
    def length(self) -> int:
        """The bytes from `position` to the end of the file."""

@final
class LogWalk:
    """An iterator over the batches of a `.log`, a `LogStop` last if the walk lost
    the batch boundaries."""

    def __iter__(self) -> Self: ...
    def __next__(self) -> LogBatch | LogStop: ...

def walk_log(fd: int, start: int = 0, *, decode: bool = True) -> LogWalk:
    """Walks the `.log` open as file descriptor `fd` from byte `start` (the descriptor
    is duplicated: closing it does not end the walk). With `decode`, each batch's
    CRC-32C is checked and its records decoded; without, only headers are read."""

@final
class IndexContents:
    """The entries of an index file, as stored."""

    @property
    def kind(self) -> Literal["index", "timeindex"]:
        """`index` or `timeindex`."""
    @property
    def entries(self) -> list[tuple[int, int]]:
        """`(relative offset, position)` for an index, `(timestamp, relative offset)` for a timeindex."""
    @property
    def unused(self) -> int:
        """Preallocated empty slots after the last entry."""
    @property
    def size_problem(self) -> str | None:
        """Why the file's size is wrong, or None."""

def read_index(path: str | PathLike[str], kind: Literal["index", "timeindex"]) -> IndexContents:
    """Reads the index file at `path`; `kind` is `index` or `timeindex`."""

@final
class SegmentScan:
    """What an index check needs of a log: where batches start, how far valid ones reach."""

    def __new__(cls, base_offset: int) -> SegmentScan: ...
    def add(self, batch: LogBatch) -> None:
        """Records a batch of the walk."""
    @property
    def base_offset(self) -> int: ...
    @property
    def batches(self) -> int:
        """How many batches were added."""
    @property
    def last_offset(self) -> int | None:
        """The greatest last offset of a valid batch, or None."""
    @property
    def max_timestamp(self) -> int:
        """The greatest maxTimestamp of a valid batch, or -1."""

def scan_log(path: str | PathLike[str], base_offset: int) -> SegmentScan | None:
    """Batch positions and offsets of a `.log` (headers only), or None if it is missing."""

def check_index(index: IndexContents, log: SegmentScan | None, base_offset: int) -> list[str]:
    """What is wrong with an index, one line each (checked against `log` if given)."""

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
        store: Store | None = None,
        batch_size: int = 16384,
        linger_ms: float = 5.0,
        compression_type: str = "none",
        acks: str = "1",
        buffer_memory: int = 33554432,
        max_block_ms: float = 60000.0,
        bootstrap_servers: str | None = None,
        client_id: str = "seglog",
        request_timeout_ms: int = 30000,
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
