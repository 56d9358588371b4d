//! The core's one error type. Every failure a caller can cause is a variant here,
//! so the bindings map each to a specific Python exception.

use std::io;
use std::path::PathBuf;

/// Why a record batch was refused while parsing or validating it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorruptBatch {
    #[error("batch is {have} bytes, shorter than the {need}-byte minimum")]
    TooShort { have: usize, need: usize },
    #[error("unsupported magic byte {0} (only RecordBatch v2, magic 2, is supported)")]
    BadMagic(i8),
    #[error("CRC-32C mismatch: header says {stored:#010x}, content gives {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("batchLength {declared} runs past the end of the data ({available} bytes available)")]
    LengthPastEnd { declared: usize, available: usize },
    #[error("invalid record inside the batch: {0}")]
    BadRecord(String),
    #[error("unknown compression codec id {0}")]
    UnknownCodec(u8),
    #[error("compressed payload could not be decoded: {0}")]
    Decompress(String),
    /// Damage a segment's CRCs cannot show (offsets, lengths), found by a read.
    #[error("{}, position {position}: {reason}", path.display())]
    InSegment { path: PathBuf, position: u64, reason: String },
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("I/O error on {path}: {source}")]
    IoAt { path: PathBuf, source: io::Error },
    #[error("corrupt record batch: {0}")]
    Corrupt(#[from] CorruptBatch),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopic { name: String, reason: String },
    #[error("topic {0:?} does not exist")]
    UnknownTopic(String),
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    #[error("topic {topic:?} has no partition {partition} (it has {count})")]
    UnknownPartition { topic: String, partition: i32, count: i32 },
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("record batch of {size} bytes exceeds max.message.bytes = {max}")]
    RecordTooLarge { size: usize, max: usize },
    #[error("offset {offset} is out of range for {topic}-{partition} (log start {start}, log end {end})")]
    OffsetOutOfRange { topic: String, partition: i32, offset: i64, start: i64, end: i64 },
    #[error("store {path} is locked by another writer (pid {pid}); open it with read_only=True to read while it writes")]
    StoreLocked { path: PathBuf, pid: String },
    #[error("store is open read-only: {0} is not allowed")]
    ReadOnly(&'static str),
    #[error("store is closed")]
    Closed,
    #[error("{0} is closed")]
    ClientClosed(&'static str),
    #[error("timed out after {0} ms: {1}")]
    Timeout(u64, String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// A batch refused for its records (KIP-467): each bad record's index in
    /// the batch and why (see `InvalidBatch::Records`).
    #[error("{}", crate::record::validator::record_errors_message(*.timestamp, .errors))]
    RecordErrors { timestamp: bool, errors: Vec<(i32, String)> },
    #[error("unsupported compression: {0}")]
    UnsupportedCompression(String),
    #[error("record batch too large: {0}")]
    RecordBatchTooLarge(String),
    /// A store file seglog wrote (checkpoint, topic file) that does not parse:
    /// damage on disk, not a caller's mistake.
    #[error("corrupt file {path}: {reason}")]
    CorruptFile { path: PathBuf, reason: String },
    /// A batch from a producer whose epoch is older than the one the log has
    /// seen for its id: a newer producer with the same id fenced it.
    #[error(
        "producer {producer_id} sent epoch {epoch}, older than its current epoch {current_epoch}: \
         a newer instance of this producer fenced it"
    )]
    InvalidProducerEpoch { producer_id: i64, epoch: i16, current_epoch: i16 },
    /// A batch whose first sequence is not the one that must come next: a
    /// batch before it is missing, or a new epoch did not start at 0.
    #[error(
        "out of order sequence number from producer {producer_id} (epoch {epoch}): the batch starts at \
         sequence {sequence}, but {expected} was expected{}",
        if *new_epoch { " (a new epoch starts at sequence 0)" } else { " (one past the last sequence written)" }
    )]
    OutOfOrderSequence { producer_id: i64, epoch: i16, sequence: i32, expected: i32, new_epoch: bool },
    /// An error code a Kafka broker answered with that no other variant stands
    /// for (a network client's view: NOT_COORDINATOR, REBALANCE_IN_PROGRESS,
    /// a retriable error that outlasted its retries, ...). `message` names the
    /// code, what was asked and the broker's own message.
    #[error("{message} (Kafka error code {code})")]
    Kafka { code: i16, message: String },
    /// A call that does not fit a client's state (assign after subscribe, a
    /// position of a partition not assigned).
    #[error("{0}")]
    IllegalState(String),
    /// A consumer's partition has no committed offset and its
    /// `auto.offset.reset` is "none".
    #[error("{0}")]
    NoOffsetForPartition(String),
    /// The coordinator refused a commit because the group rebalanced since the
    /// member joined (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS).
    #[error("{message} (Kafka error code {code})")]
    CommitFailed { code: i16, message: String },
}

impl Error {
    /// The Kafka error code a broker answers with for this error, where Kafka
    /// has one (`org.apache.kafka.common.protocol.Errors`).
    pub fn kafka_code(&self) -> Option<i16> {
        use kafka_codes::*;
        Some(match self {
            Error::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
            Error::Corrupt(_) => CORRUPT_MESSAGE,
            Error::UnknownTopic(_) | Error::UnknownPartition { .. } => UNKNOWN_TOPIC_OR_PARTITION,
            Error::RecordTooLarge { .. } => MESSAGE_TOO_LARGE,
            Error::InvalidTopic { .. } => INVALID_TOPIC_EXCEPTION,
            Error::RecordBatchTooLarge(_) => RECORD_LIST_TOO_LARGE,
            Error::InvalidTimestamp(_) => INVALID_TIMESTAMP,
            Error::TopicExists(_) => TOPIC_ALREADY_EXISTS,
            Error::InvalidConfig(_) => INVALID_CONFIG,
            Error::Io(_) | Error::IoAt { .. } | Error::CorruptFile { .. } => KAFKA_STORAGE_ERROR,
            Error::UnsupportedCompression(_) => UNSUPPORTED_COMPRESSION_TYPE,
            Error::InvalidRecord(_) => INVALID_RECORD,
            Error::RecordErrors { timestamp: true, .. } => INVALID_TIMESTAMP,
            Error::RecordErrors { timestamp: false, .. } => INVALID_RECORD,
            Error::InvalidProducerEpoch { .. } => INVALID_PRODUCER_EPOCH,
            Error::OutOfOrderSequence { .. } => OUT_OF_ORDER_SEQUENCE_NUMBER,
            Error::Kafka { code, .. } | Error::CommitFailed { code, .. } => *code,
            _ => return None,
        })
    }

    /// A copy of this error, variant and message alike (an I/O error keeps its
    /// errno), for an error shared by many waiters (every record of a failed
    /// batch raises its own).
    pub fn duplicate(&self) -> Error {
        let io = |e: &io::Error| match e.raw_os_error() {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::new(e.kind(), e.to_string()),
        };
        match self {
            Error::Io(e) => Error::Io(io(e)),
            Error::IoAt { path, source } => Error::IoAt { path: path.clone(), source: io(source) },
            Error::Corrupt(c) => Error::Corrupt(c.clone()),
            Error::InvalidTopic { name, reason } => {
                Error::InvalidTopic { name: name.clone(), reason: reason.clone() }
            }
            Error::UnknownTopic(t) => Error::UnknownTopic(t.clone()),
            Error::TopicExists(t) => Error::TopicExists(t.clone()),
            Error::UnknownPartition { topic, partition, count } => {
                Error::UnknownPartition { topic: topic.clone(), partition: *partition, count: *count }
            }
            Error::InvalidConfig(m) => Error::InvalidConfig(m.clone()),
            Error::RecordTooLarge { size, max } => Error::RecordTooLarge { size: *size, max: *max },
            Error::OffsetOutOfRange { topic, partition, offset, start, end } => Error::OffsetOutOfRange {
                topic: topic.clone(),
                partition: *partition,
                offset: *offset,
                start: *start,
                end: *end,
            },
            Error::StoreLocked { path, pid } => Error::StoreLocked { path: path.clone(), pid: pid.clone() },
            Error::ReadOnly(what) => Error::ReadOnly(what),
            Error::Closed => Error::Closed,
            Error::ClientClosed(what) => Error::ClientClosed(what),
            Error::Timeout(ms, what) => Error::Timeout(*ms, what.clone()),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::InvalidRecord(m) => Error::InvalidRecord(m.clone()),
            Error::InvalidTimestamp(m) => Error::InvalidTimestamp(m.clone()),
            Error::RecordErrors { timestamp, errors } => {
                Error::RecordErrors { timestamp: *timestamp, errors: errors.clone() }
            }
            Error::UnsupportedCompression(m) => Error::UnsupportedCompression(m.clone()),
            Error::RecordBatchTooLarge(m) => Error::RecordBatchTooLarge(m.clone()),
            Error::CorruptFile { path, reason } => {
                Error::CorruptFile { path: path.clone(), reason: reason.clone() }
            }
            Error::InvalidProducerEpoch { producer_id, epoch, current_epoch } => {
                Error::InvalidProducerEpoch {
                    producer_id: *producer_id,
                    epoch: *epoch,
                    current_epoch: *current_epoch,
                }
            }
            Error::OutOfOrderSequence { producer_id, epoch, sequence, expected, new_epoch } => {
                Error::OutOfOrderSequence {
                    producer_id: *producer_id,
                    epoch: *epoch,
                    sequence: *sequence,
                    expected: *expected,
                    new_epoch: *new_epoch,
                }
            }
            Error::Kafka { code, message } => Error::Kafka { code: *code, message: message.clone() },
            Error::IllegalState(m) => Error::IllegalState(m.clone()),
            Error::NoOffsetForPartition(m) => Error::NoOffsetForPartition(m.clone()),
            Error::CommitFailed { code, message } => {
                Error::CommitFailed { code: *code, message: message.clone() }
            }
        }
    }

    /// Attaches a path to a bare I/O error, so messages name the file involved.
    pub fn at(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::IoAt { path, source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Kafka's error codes (`org.apache.kafka.common.protocol.Errors`) that seglog
/// answers with or acts on: the one table of the workspace (the broker's tests
/// check it against the protocol crate's).
pub mod kafka_codes {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const NOT_ENOUGH_REPLICAS: i16 = 19;
    pub const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const INVALID_COMMIT_OFFSET_SIZE: i16 = 28;
    pub const INVALID_TIMESTAMP: i16 = 32;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_CONFIG: i16 = 40;
    pub const INVALID_REQUEST: i16 = 42;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    /// Not returned by seglog (nor by Kafka's log since 0.11's retry rules): a
    /// retried batch is answered with its first copy's offsets and no error.
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
    /// Not returned by seglog's log: as in Kafka since KIP-360, a producer the
    /// log does not know may start at any sequence.
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    pub const INVALID_RECORD: i16 = 87;
}

#[cfg(test)]
#[path = "error_test.rs"]
mod tests;
