//! What a walk of a segment reports, and the file ranges reads hand out.

use std::path::PathBuf;

use crate::record::RecordBatch;

/// A byte range of a segment file: what a zero-copy transfer sends as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRange {
    pub path: PathBuf,
    pub position: u64,
    pub length: u64,
}

/// Summary of one batch found while walking a segment.
#[derive(Debug, Clone, Copy)]
pub struct BatchInfo {
    pub position: u64,
    pub size: u64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub records: i32,
}

impl BatchInfo {
    pub(super) fn from_batch(position: u64, b: &RecordBatch<'_>) -> Self {
        BatchInfo {
            position,
            size: b.size() as u64,
            base_offset: b.base_offset(),
            last_offset: b.last_offset(),
            max_timestamp: b.max_timestamp(),
            records: b.records_count(),
        }
    }
}
