//! An index file read whole, as stored, for tools that inspect it (dump-log,
//! verify) rather than look offsets up: its entries, its preallocated empty
//! slots and whether its size fits its entry size.

use std::path::Path;

use super::{IndexEntry, OffsetEntry, TimeEntry};
use crate::error::{Error, Result};

/// Which index a file is, by its suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// `.index`: (relative offset, position) entries.
    Offset,
    /// `.timeindex`: (timestamp, relative offset) entries.
    Time,
}

impl IndexKind {
    /// The file suffix without its dot: `index` or `timeindex`.
    pub fn suffix(self) -> &'static str {
        match self {
            IndexKind::Offset => "index",
            IndexKind::Time => "timeindex",
        }
    }

    pub fn from_suffix(suffix: &str) -> Option<Self> {
        match suffix {
            "index" => Some(IndexKind::Offset),
            "timeindex" => Some(IndexKind::Time),
            _ => None,
        }
    }

    pub fn entry_size(self) -> usize {
        match self {
            IndexKind::Offset => OffsetEntry::SIZE,
            IndexKind::Time => TimeEntry::SIZE,
        }
    }

    fn raw(self, bytes: &[u8]) -> (i64, i64) {
        match self {
            IndexKind::Offset => OffsetEntry::raw(bytes),
            IndexKind::Time => TimeEntry::raw(bytes),
        }
    }
}

/// The entries of an index file as stored: `(relative offset, position)` for an
/// offset index, `(timestamp, relative offset)` for a time index, both signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexContents {
    pub kind: IndexKind,
    pub entries: Vec<(i64, i64)>,
    /// Preallocated empty slots after the last entry.
    pub unused: usize,
    /// Why the file's size is wrong, or None.
    pub size_problem: Option<String>,
}

impl IndexContents {
    /// Reads the entries out of an index file's bytes. The writer preallocates its
    /// active indexes; the zero entries after the last real one are empty slots (a
    /// real entry never has relative offset 0 at position 0).
    pub fn from_bytes(kind: IndexKind, data: &[u8]) -> Self {
        let size = kind.entry_size();
        let whole = data.len() - data.len() % size;
        let size_problem = (whole != data.len())
            .then(|| format!("file size {} is not a multiple of the {size}-byte entry size", data.len()));
        let data = &data[..whole];
        let nonzero = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        let used = nonzero.div_ceil(size);
        let entries = data[..used * size].chunks_exact(size).map(|e| kind.raw(e)).collect();
        IndexContents { kind, entries, unused: whole / size - used, size_problem }
    }
}

/// The entries of the index file at `path`.
pub fn read_index(path: &Path, kind: IndexKind) -> Result<IndexContents> {
    let data = std::fs::read(path).map_err(Error::at(path))?;
    Ok(IndexContents::from_bytes(kind, &data))
}
