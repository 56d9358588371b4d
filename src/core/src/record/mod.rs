//! Kafka's record format: varints, codecs, the RecordBatch v2 view, the records
//! inside a batch, the builder, the iterator over batches, and the validator
//! that batches from outside must pass.

pub mod batch;
pub mod builder;
pub mod compression;
pub mod iter;
pub mod records;
pub mod validator;
pub mod varint;

pub use batch::{RecordBatch, TimestampType};
pub use builder::{build_batches, BatchBuilder, HeaderRef, NewRecord, ProducerInfo};
pub use compression::Compression;
pub use iter::BatchIter;
pub use records::{for_each_record, parse_records, parse_records_from, parse_records_range, Record};
