//! Kafka's error codes as the core's errors: a code the core has a variant for
//! becomes that variant (so a caller handles UNKNOWN_TOPIC_OR_PARTITION the same
//! whether it came from a store or a broker), any other `Error::Kafka`; and
//! which codes are worth a retry, and which mean the metadata is stale.

use std::io;

use kafka_protocol::ResponseError;
use seglog_core::error::{kafka_codes as codes, CorruptBatch, Error};

pub use seglog_core::error::kafka_codes::{
    FENCED_LEADER_EPOCH, LEADER_NOT_AVAILABLE, NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH,
    UNSUPPORTED_VERSION,
};

/// Kafka's name of a code, as its docs and logs spell it (`NOT_LEADER_OR_FOLLOWER`).
pub fn code_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".into(),
        Some(ResponseError::Unknown(c)) => format!("UNKNOWN_CODE_{c}"),
        Some(e) => {
            let camel = format!("{e:?}");
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, ch) in camel.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        }
    }
}

/// Whether Kafka's protocol marks the code retriable.
pub fn is_retriable(code: i16) -> bool {
    ResponseError::try_from_code(code).is_some_and(|e| e.is_retriable())
}

/// Codes after which the partition's leader must be looked up again.
pub fn is_stale_metadata(code: i16) -> bool {
    matches!(
        code,
        codes::UNKNOWN_TOPIC_OR_PARTITION
            | LEADER_NOT_AVAILABLE
            | NOT_LEADER_OR_FOLLOWER
            | FENCED_LEADER_EPOCH
            | UNKNOWN_LEADER_EPOCH
    )
}

/// Whether a failure is worth another attempt: a retriable Kafka code, a
/// timeout, or a connection that failed (not one whose peer broke the
/// protocol: asking again would get the same answer).
pub fn is_retriable_error(e: &Error) -> bool {
    match e {
        Error::Kafka { code, .. } => is_retriable(*code),
        Error::Timeout(..) => true,
        Error::Io(io) => io.kind() != io::ErrorKind::InvalidData,
        _ => false,
    }
}

/// Whether a failure came from the connection rather than from an answer:
/// the request may or may not have reached the broker.
pub fn is_connection_error(e: &Error) -> bool {
    match e {
        Error::Timeout(..) => true,
        Error::Io(io) => io.kind() != io::ErrorKind::InvalidData,
        _ => false,
    }
}

/// What a code is about, for its message and the fields of the core's errors.
#[derive(Debug, Clone, Copy)]
pub struct About<'a> {
    /// The API that answered, e.g. "Produce".
    pub api: &'a str,
    pub topic: &'a str,
    /// -1 when the code is about a whole topic.
    pub partition: i32,
    /// The broker's own error message, if it sent one.
    pub message: Option<&'a str>,
}

/// The core's error for a code a broker answered with.
pub fn from_code(code: i16, about: About<'_>) -> Error {
    let About { api, topic, partition, message } = about;
    let broker_says = message.filter(|m| !m.is_empty()).map(|m| format!(": {m}")).unwrap_or_default();
    let detail = || {
        message
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| ResponseError::try_from_code(code).map(|e| e.to_string()).unwrap_or_default())
    };
    match code {
        codes::CORRUPT_MESSAGE => Error::Corrupt(CorruptBatch::BadRecord(detail())),
        // A partition the metadata knows of is caught before sending (as
        // UnknownPartition, with the count); an answer like this one is about the topic.
        codes::UNKNOWN_TOPIC_OR_PARTITION => Error::UnknownTopic(topic.to_string()),
        codes::INVALID_TOPIC_EXCEPTION => Error::InvalidTopic { name: topic.to_string(), reason: detail() },
        codes::RECORD_LIST_TOO_LARGE => Error::RecordBatchTooLarge(detail()),
        codes::INVALID_TIMESTAMP => Error::InvalidTimestamp(detail()),
        codes::TOPIC_ALREADY_EXISTS => Error::TopicExists(topic.to_string()),
        codes::INVALID_CONFIG => Error::InvalidConfig(detail()),
        codes::UNSUPPORTED_COMPRESSION_TYPE => Error::UnsupportedCompression(detail()),
        codes::INVALID_RECORD => Error::InvalidRecord(detail()),
        _ => {
            let on = match (topic.is_empty(), partition) {
                (true, _) => String::new(),
                (false, p) if p < 0 => format!(" for topic {topic:?}"),
                (false, p) => format!(" for {topic}-{p}"),
            };
            Error::Kafka { code, message: format!("{} from {api}{on}{broker_says}", code_name(code)) }
        }
    }
}

/// MESSAGE_TOO_LARGE for a batch of `size` bytes: the core's `RecordTooLarge`
/// when the broker's message says its limit (seglog's does), else the code.
pub fn message_too_large(size: usize, about: About<'_>) -> Error {
    let max = about
        .message
        .and_then(|m| m.split("max.message.bytes = ").nth(1))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse::<usize>().ok());
    match max {
        Some(max) => Error::RecordTooLarge { size, max },
        None => from_code(codes::MESSAGE_TOO_LARGE, about),
    }
}

/// A network failure talking to `addr`, keeping its kind (so Python raises
/// ConnectionRefusedError, ConnectionResetError, ...).
pub fn network(addr: &str, doing: &str, e: &io::Error) -> Error {
    Error::Io(io::Error::new(e.kind(), format!("{doing} {addr}: {e}")))
}

/// A peer that broke the protocol (bad frame size, wrong correlation id,
/// undecodable response): an I/O error of kind InvalidData, never retried.
pub fn protocol(addr: &str, what: impl std::fmt::Display) -> Error {
    Error::Io(io::Error::new(
        io::ErrorKind::InvalidData,
        format!("broker at {addr} broke the Kafka protocol: {what}"),
    ))
}
