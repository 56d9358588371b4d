//! Kafka's record format: varints, codecs and RecordBatch v2.

pub mod batch;
pub mod compression;
pub mod validator;
pub mod varint;

pub use batch::{BatchBuilder, BatchIter, NewRecord, ProducerInfo, Record, RecordBatch, TimestampType};
pub use compression::Compression;
