//! Kafka's sparse indexes: `.index` (int32 relative offset, int32 position) and
//! `.timeindex` (int64 timestamp, int32 relative offset), big-endian, fixed-size
//! entries, kept sorted so a lookup is a binary search.
//!
//! The writer preallocates the file to `segment.index.bytes` and memory-maps it;
//! it trims the file to its entries when the segment rolls or the log closes.
//! A read-only opener in another process never maps the file (the writer may
//! shrink it under the mapping): it reads the entries into memory with `pread`
//! and treats every entry as a hint that the log scan confirms.

mod contents;
mod file;
mod offset;
mod time;
mod transaction;

use std::marker::PhantomData;
use std::path::Path;

use crate::error::Result;
use file::IndexFile;

pub use contents::{read_index, IndexContents, IndexKind};
pub use offset::OffsetEntry;
pub use time::TimeEntry;
pub use transaction::{AbortedSearch, AbortedTxn, TransactionIndex};

/// `.index`: relative offset → byte position in the segment's `.log`.
pub type OffsetIndex = Index<OffsetEntry>;
/// `.timeindex`: max timestamp seen so far → relative offset.
pub type TimeIndex = Index<TimeEntry>;

pub const OFFSET_ENTRY: usize = OffsetEntry::SIZE;
pub const TIME_ENTRY: usize = TimeEntry::SIZE;

/// One kind of index entry: its size on disk and how it reads.
pub trait IndexEntry {
    const SIZE: usize;
    /// An entry with its offset made absolute.
    type Value: Copy;
    fn decode(bytes: &[u8], base_offset: i64) -> Self::Value;
    /// The entry's two columns as stored, signed, offsets still relative: what a
    /// check of a damaged file needs to see.
    fn raw(bytes: &[u8]) -> (i64, i64);
}

/// An index file of `E` entries for the segment at `base_offset`.
pub struct Index<E> {
    base_offset: i64,
    file: IndexFile,
    kind: PhantomData<E>,
}

impl<E: IndexEntry> Index<E> {
    pub fn open(path: &Path, base_offset: i64, max_bytes: usize, writable: bool) -> Result<Self> {
        let file = if writable {
            IndexFile::open_writable(path, E::SIZE, max_bytes)?
        } else {
            IndexFile::open_read_only(path, E::SIZE)?
        };
        Ok(Index { base_offset, file, kind: PhantomData })
    }

    /// An index with no file behind it (a reader found none).
    pub fn empty(path: &Path, base_offset: i64) -> Self {
        Index { base_offset, file: IndexFile::empty(path, E::SIZE), kind: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.file.len
    }
    pub fn is_empty(&self) -> bool {
        self.file.len == 0
    }
    pub fn entry(&self, i: usize) -> E::Value {
        E::decode(self.file.entry(i), self.base_offset)
    }
    pub fn last_entry(&self) -> Option<E::Value> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }
    /// Drops every entry (recovery rebuilds them).
    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }
    /// A reader's look at entries the writer added since.
    pub fn reload(&mut self) -> Result<()> {
        self.file.reload()
    }
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }
    /// Shrinks the file to its entries: the segment is no longer active.
    pub fn trim(&mut self) -> Result<()> {
        self.file.trim()
    }
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be_i64(b: &[u8]) -> i64 {
    i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

#[cfg(test)]
#[path = "index_test.rs"]
mod tests;
