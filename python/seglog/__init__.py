"""seglog: Apache Kafka's log storage as an embedded Python library.

>>> import seglog, tempfile
>>> store = seglog.open(tempfile.mkdtemp())
>>> store.create_topic("orders", partitions=3)
>>> store.append("orders", 0, [(b"k1", b"v1")])
(0, 0)
>>> store.close()
"""

from . import errors
from ._admin import (
    Admin,
    BrokerServesStoreError,
    GroupDescription,
    GroupIdNotFoundError,
    GroupListing,
    GroupNotEmptyError,
    MemberDescription,
)
from ._broker import Broker
from ._consumer import Consumer, OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ._groups import GroupInUseError, GroupsThroughBrokerError
from ._native import (
    ConsumerRecord,
    FutureRecordMetadata,
    RecordMetadata,
    __version__,
    decode_batches,
    murmur2,
)
from ._producer import Producer
from ._store import PartitionDescription, RecordInput, Store, TopicDescription, open
from .errors import (
    ClientClosedError,
    CommitFailedError,
    CorruptFileError,
    CorruptRecordError,
    IllegalStateError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    KafkaError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    ReadOnlyStoreError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    SeglogError,
    SeglogTimeoutError,
    StoreClosedError,
    StoreLockedError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)

__all__ = [
    "__version__",
    "open",
    "Store",
    "Broker",
    "TopicDescription",
    "PartitionDescription",
    "ConsumerRecord",
    "Producer",
    "Consumer",
    "TopicPartition",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "IllegalStateError",
    "GroupInUseError",
    "GroupsThroughBrokerError",
    "Admin",
    "GroupListing",
    "GroupDescription",
    "MemberDescription",
    "GroupNotEmptyError",
    "GroupIdNotFoundError",
    "BrokerServesStoreError",
    "CommitFailedError",
    "FutureRecordMetadata",
    "RecordMetadata",
    "RecordInput",
    "murmur2",
    "decode_batches",
    "errors",
    "SeglogError",
    "CorruptRecordError",
    "InvalidTopicError",
    "UnknownTopicOrPartitionError",
    "TopicAlreadyExistsError",
    "InvalidConfigError",
    "InvalidRecordError",
    "RecordTooLargeError",
    "OffsetOutOfRangeError",
    "StoreLockedError",
    "ReadOnlyStoreError",
    "StoreClosedError",
    "ClientClosedError",
    "SeglogTimeoutError",
    "NoOffsetForPartitionError",
    "CorruptFileError",
    "InvalidTimestampError",
    "UnsupportedCompressionTypeError",
    "RecordBatchTooLargeError",
    "OutOfOrderSequenceError",
    "InvalidProducerEpochError",
    "KafkaError",
]
