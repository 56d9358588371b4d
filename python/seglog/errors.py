"""seglog's exception hierarchy.

Every error seglog raises on purpose is a :class:`SeglogError`; those that are
also a kind of built-in error (a bad value, a missing key) inherit from that
built-in too, so ``except ValueError`` keeps working. Operating-system failures
stay :class:`OSError` (``FileNotFoundError``, ``NotADirectoryError``, ...), with
the file name set.
"""

from __future__ import annotations

__all__ = [
    "SeglogError",
    "CorruptRecordError",
    "InvalidTopicError",
    "UnknownTopicOrPartitionError",
    "TopicAlreadyExistsError",
    "InvalidConfigError",
    "RecordTooLargeError",
    "OffsetOutOfRangeError",
    "StoreLockedError",
    "ReadOnlyStoreError",
    "StoreClosedError",
    "ClientClosedError",
    "SeglogTimeoutError",
    "NoOffsetForPartitionError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "UnsupportedCompressionTypeError",
    "RecordBatchTooLargeError",
    "CorruptFileError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "KafkaError",
    "IllegalStateError",
    "CommitFailedError",
]


class SeglogError(Exception):
    """Base class of seglog's own errors."""


class CorruptRecordError(SeglogError):
    """A record batch failed validation (size, magic, CRC-32C or record layout)."""


class CorruptFileError(CorruptRecordError):
    """A file the store wrote itself (a checkpoint, a topic file) is damaged on disk.
    ``filename`` names it."""

    filename: str | None = None


class InvalidTopicError(SeglogError, ValueError):
    """A topic name breaks Kafka's rules: 1-249 of ``[A-Za-z0-9._-]``, not ``.``/``..``."""


class UnknownTopicOrPartitionError(SeglogError, LookupError):
    """The topic, or the partition of the topic, does not exist."""


class TopicAlreadyExistsError(SeglogError):
    """``create_topic`` was called for a topic that exists."""


class InvalidConfigError(SeglogError, ValueError):
    """A config key is unknown or its value is out of range."""


class RecordTooLargeError(SeglogError, ValueError):
    """A batch is larger than the topic's ``max.message.bytes``."""


class OffsetOutOfRangeError(SeglogError):
    """The offset is before the log start or after the log end."""


class StoreLockedError(SeglogError):
    """Another process holds the store's writer lock (its PID is in the message)."""


class ReadOnlyStoreError(SeglogError):
    """A write was attempted through a store opened with ``read_only=True``."""


class StoreClosedError(SeglogError):
    """The store was closed."""


class ClientClosedError(SeglogError):
    """The Producer or Consumer was closed."""


class SeglogTimeoutError(SeglogError, TimeoutError):
    """An operation did not finish within its timeout (``flush``, ``future.get``, a full buffer)."""


class NoOffsetForPartitionError(SeglogError):
    """``auto_offset_reset="none"`` and the group has no committed offset for a partition."""


class InvalidRecordError(SeglogError, ValueError):
    """A record the topic cannot take, e.g. one without a key on a compacted topic."""


class InvalidTimestampError(SeglogError, ValueError):
    """A record's timestamp is negative, or further from the append time than the topic's
    ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` allow
    (Kafka's INVALID_TIMESTAMP)."""


class UnsupportedCompressionTypeError(SeglogError, ValueError):
    """A batch names a codec Kafka does not define (Kafka's UNSUPPORTED_COMPRESSION_TYPE)."""


class RecordBatchTooLargeError(RecordTooLargeError):
    """A batch larger than the topic's ``segment.bytes``, or whose records expand past the
    decompression bound (Kafka's RECORD_LIST_TOO_LARGE)."""


class OutOfOrderSequenceError(SeglogError):
    """An idempotent producer's batch whose sequence does not follow the last one the log
    holds for that producer (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER): a batch was lost in
    between."""


class InvalidProducerEpochError(SeglogError):
    """A batch from an older epoch of a producer id than the log has seen: the producer was
    fenced by a newer instance (Kafka's INVALID_PRODUCER_EPOCH)."""


class KafkaError(SeglogError):
    """A broker answered a network client with a Kafka error code that no other class
    stands for (``NOT_COORDINATOR``, ``REBALANCE_IN_PROGRESS``, a retriable error that
    outlasted its retries, ...). ``code`` is Kafka's error code; a code that does have a
    class (``OUT_OF_ORDER_SEQUENCE_NUMBER``, ...) raises that class, with ``code`` set too."""

    code: int | None = None


class IllegalStateError(SeglogError):
    """The call does not fit the consumer's state (e.g. assign after subscribe, the
    position of a partition not assigned)."""


class CommitFailedError(KafkaError):
    """The coordinator refused a commit because the group rebalanced since this
    member joined (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS):
    the partitions may be another member's now. The next poll rejoins."""
