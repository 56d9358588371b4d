//! `.txnindex`: a segment's aborted transactions, as Kafka keeps them. Each
//! entry is 34 bytes, big-endian: version (int16, 0), producer id, first
//! offset, last offset and the partition's last stable offset when the abort
//! was written (int64 each). Entries are appended in order of last offset
//! when an ABORT marker is written, and a `read_committed` Fetch answers with
//! those that overlap its range. Unlike `.index` and `.timeindex` the file is
//! not sparse, not preallocated and not mapped: it is appended to and read
//! whole (aborts are rare and small).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One aborted transaction of a producer: the offsets of its first record and
/// of its ABORT marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The partition's last stable offset once the abort was written.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    pub const SIZE: usize = 34;
    pub const VERSION: i16 = 0;

    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut out = [0u8; Self::SIZE];
        out[0..2].copy_from_slice(&Self::VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// An entry of `bytes` (34 of them); `Err` names what is wrong with it.
    pub fn decode(bytes: &[u8]) -> std::result::Result<AbortedTxn, String> {
        let Some(bytes) = bytes.get(..Self::SIZE) else {
            return Err(format!("an entry of {} bytes, not {}", bytes.len(), Self::SIZE));
        };
        let long = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(b)
        };
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version > Self::VERSION {
            return Err(format!("unexpected aborted transaction version {version}"));
        }
        Ok(AbortedTxn {
            producer_id: long(2),
            first_offset: long(10),
            last_offset: long(18),
            last_stable_offset: long(26),
        })
    }
}

/// The aborted transactions a read of `[fetch_offset, upper_bound)` must
/// know of, and whether the search may stop at this segment (an entry's
/// last stable offset reached the bound: later segments hold none that
/// overlap).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AbortedSearch {
    pub aborted: Vec<AbortedTxn>,
    pub complete: bool,
}

/// A segment's `.txnindex`.
pub struct TransactionIndex {
    path: PathBuf,
    start_offset: i64,
    /// The entries on disk, in order (read when opened).
    entries: Vec<AbortedTxn>,
    /// Opened on the first append: most segments never have an abort, and
    /// Kafka writes no file for them.
    file: Option<File>,
}

impl TransactionIndex {
    /// The index of the segment starting at `start_offset`; a missing file is
    /// an empty index. A file that is not whole entries, or whose entries are
    /// not in order of last offset or end before the segment starts, is
    /// corrupt.
    pub fn open(path: &Path, start_offset: i64) -> Result<TransactionIndex> {
        let corrupt = |reason: String| Error::CorruptFile { path: path.to_path_buf(), reason };
        let data = match std::fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(Error::at(path)(e)),
        };
        if data.len() % AbortedTxn::SIZE != 0 {
            return Err(corrupt(format!(
                "{} bytes is not a whole number of {}-byte aborted transaction entries",
                data.len(),
                AbortedTxn::SIZE
            )));
        }
        let mut entries: Vec<AbortedTxn> = Vec::with_capacity(data.len() / AbortedTxn::SIZE);
        for (i, chunk) in data.chunks_exact(AbortedTxn::SIZE).enumerate() {
            let entry = AbortedTxn::decode(chunk).map_err(|r| corrupt(format!("entry {i}: {r}")))?;
            if entry.last_offset < start_offset {
                return Err(corrupt(format!(
                    "entry {i}: last offset {} of an aborted transaction is before the segment's start {start_offset}",
                    entry.last_offset
                )));
            }
            if entries.last().is_some_and(|prev| prev.last_offset >= entry.last_offset) {
                return Err(corrupt(format!("entry {i}: last offsets out of order")));
            }
            entries.push(entry);
        }
        Ok(TransactionIndex { path: path.to_path_buf(), start_offset, entries, file: None })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    fn file(&mut self) -> Result<&mut File> {
        if self.file.is_none() {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(Error::at(&self.path))?;
            self.file = Some(f);
        }
        // Set just above.
        self.file.as_mut().ok_or_else(|| Error::at(&self.path)(std::io::Error::other("not open")))
    }

    /// Appends an abort; its last offset must be past every entry's (Kafka's
    /// rule: aborts are written in offset order).
    pub fn append(&mut self, entry: AbortedTxn) -> Result<()> {
        if let Some(last) = self.entries.last().filter(|l| l.last_offset >= entry.last_offset) {
            return Err(Error::InvalidArgument(format!(
                "the last offset of appended transactions must increase: {} is not greater than {} in {}",
                entry.last_offset,
                last.last_offset,
                self.path.display()
            )));
        }
        let bytes = entry.encode();
        let path = self.path.clone();
        self.file()?.write_all(&bytes).map_err(Error::at(&path))?;
        self.entries.push(entry);
        Ok(())
    }

    /// Makes what was appended durable.
    pub fn flush(&mut self) -> Result<()> {
        match &self.file {
            Some(f) => f.sync_data().map_err(Error::at(&self.path)),
            None => Ok(()),
        }
    }

    /// Drops the entries of aborts at or after `offset` (the log is being
    /// truncated there).
    pub fn truncate_to(&mut self, offset: i64) -> Result<()> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        let len = (keep * AbortedTxn::SIZE) as u64;
        match OpenOptions::new().write(true).open(&self.path) {
            Ok(f) => f.set_len(len).map_err(Error::at(&self.path))?,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(Error::at(&self.path)(e)),
        }
        self.entries.truncate(keep);
        Ok(())
    }

    /// The aborts overlapping `[fetch_offset, upper_bound)`, as Kafka's
    /// `collectAbortedTxns` finds them.
    pub fn collect_aborted(&self, fetch_offset: i64, upper_bound: i64) -> AbortedSearch {
        let mut out = AbortedSearch::default();
        for e in &self.entries {
            if e.last_offset >= fetch_offset && e.first_offset < upper_bound {
                out.aborted.push(*e);
            }
            if e.last_stable_offset >= upper_bound {
                out.complete = true;
                break;
            }
        }
        out
    }

    /// Reads back what is on disk (a check that appends reached the file).
    pub fn read_back(&self) -> Result<Vec<AbortedTxn>> {
        let Ok(f) = File::open(&self.path) else { return Ok(Vec::new()) };
        let len = f.metadata().map_err(Error::at(&self.path))?.len() as usize;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, 0).map_err(Error::at(&self.path))?;
        buf.chunks_exact(AbortedTxn::SIZE)
            .map(|c| {
                AbortedTxn::decode(c).map_err(|reason| Error::CorruptFile { path: self.path.clone(), reason })
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "transaction_test.rs"]
mod tests;
