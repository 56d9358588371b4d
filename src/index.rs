//! Kafka's sparse indexes: `.index` (int32 relative offset, int32 position) and
//! `.timeindex` (int64 timestamp, int32 relative offset), big-endian, fixed-size
//! entries, kept sorted so a lookup is a binary search.
//!
//! The writer preallocates the file to `segment.index.bytes` and memory-maps it;
//! it trims the file to its entries when the segment rolls or the log closes.
//! A read-only opener in another process never maps the file (the writer may
//! shrink it under the mapping): it reads the entries into memory with `pread`
//! and treats every entry as a hint that the log scan confirms.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{Error, Result};

pub const OFFSET_ENTRY: usize = 8;
pub const TIME_ENTRY: usize = 12;

enum Entries {
    /// The writer's view: a shared mapping of the preallocated file.
    Mapped(MmapMut),
    /// A reader's private copy of the entries known so far.
    Loaded(Vec<u8>),
}

/// The storage shared by both index kinds: fixed-size, sorted entries.
struct IndexFile {
    path: PathBuf,
    /// None for an index that exists only in memory (a reader found no file).
    file: Option<File>,
    entries: Entries,
    entry_size: usize,
    len: usize,
    max_entries: usize,
}

impl IndexFile {
    fn open_writable(path: &Path, entry_size: usize, max_bytes: usize) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(Error::at(path))?;
        let existing = file.metadata().map_err(Error::at(path))?.len() as usize;
        let len = existing / entry_size;
        let max_entries = (max_bytes / entry_size).max(len).max(1);
        file.set_len((max_entries * entry_size) as u64).map_err(Error::at(path))?;
        // SAFETY: the store's lock file guarantees that this process is the only
        // writer of this file, and it is never shrunk while the mapping lives
        // (`trim` drops the mapping first). Readers in other processes use pread.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(Error::at(path))?;
        let mut idx = IndexFile {
            path: path.to_owned(),
            file: Some(file),
            entries: Entries::Mapped(map),
            entry_size,
            len,
            max_entries,
        };
        // A preallocated file from a crash holds trailing zero entries; keep only
        // the real ones (the caller sanity-checks them against the log).
        idx.len = idx.count_nonzero_prefix(len);
        Ok(idx)
    }

    fn open_read_only(path: &Path, entry_size: usize) -> Result<Self> {
        let file = File::open(path).map_err(Error::at(path))?;
        let mut idx = IndexFile {
            path: path.to_owned(),
            file: Some(file),
            entries: Entries::Loaded(Vec::new()),
            entry_size,
            len: 0,
            max_entries: usize::MAX,
        };
        idx.reload()?;
        Ok(idx)
    }

    fn empty(path: &Path, entry_size: usize) -> Self {
        IndexFile {
            path: path.to_owned(),
            file: None,
            entries: Entries::Loaded(Vec::new()),
            entry_size,
            len: 0,
            max_entries: usize::MAX,
        }
    }

    /// Re-reads the file's entries (a reader following a live writer).
    fn reload(&mut self) -> Result<()> {
        if self.file.is_none() {
            match File::open(&self.path) {
                Ok(f) => self.file = Some(f),
                Err(_) => return Ok(()),
            }
        }
        let (Entries::Loaded(buf), Some(file)) = (&mut self.entries, &self.file) else { return Ok(()) };
        let size = file.metadata().map_err(Error::at(&self.path))?.len() as usize;
        buf.resize(size - size % self.entry_size, 0);
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::at(&self.path)(e)),
            }
        }
        buf.truncate(done - done % self.entry_size);
        let n = buf.len() / self.entry_size;
        self.len = self.count_nonzero_prefix(n);
        Ok(())
    }

    fn bytes(&self) -> &[u8] {
        match &self.entries {
            Entries::Mapped(m) => &m[..],
            Entries::Loaded(v) => &v[..],
        }
    }

    fn entry(&self, i: usize) -> &[u8] {
        &self.bytes()[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Entries are written in order and no real entry is all zeros (a segment's
    /// first batch is never indexed), so the filled prefix ends at the first zero entry.
    fn count_nonzero_prefix(&self, upper: usize) -> usize {
        let (mut lo, mut hi) = (0, upper);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.entry(mid).iter().all(|&b| b == 0) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    fn is_full(&self) -> bool {
        self.len >= self.max_entries
    }

    fn push(&mut self, entry: &[u8]) -> Result<()> {
        let Entries::Mapped(map) = &mut self.entries else {
            return Err(Error::ReadOnly("writing an index"));
        };
        let at = self.len * self.entry_size;
        map[at..at + self.entry_size].copy_from_slice(entry);
        self.len += 1;
        Ok(())
    }

    /// Index of the greatest entry whose key is <= target, by binary search.
    fn floor(&self, key: impl Fn(&[u8]) -> i64, target: i64) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if key(self.entry(mid)) <= target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo.checked_sub(1)
    }

    fn truncate_entries(&mut self, n: usize) {
        let n = n.min(self.len);
        if let Entries::Mapped(map) = &mut self.entries {
            map[n * self.entry_size..self.len * self.entry_size].fill(0);
        }
        self.len = n;
    }

    fn flush(&self) -> Result<()> {
        if let Entries::Mapped(m) = &self.entries {
            m.flush().map_err(Error::at(&self.path))?;
        }
        Ok(())
    }

    /// Shrinks the file to exactly its entries and stops accepting new ones:
    /// what Kafka does when a segment goes inactive or the log closes.
    fn trim(&mut self) -> Result<()> {
        if !matches!(self.entries, Entries::Mapped(_)) {
            return Ok(());
        }
        self.flush()?;
        let keep = self.len;
        let saved = self.bytes()[..self.len * self.entry_size].to_vec();
        self.entries = Entries::Loaded(saved);
        if let Some(f) = &self.file {
            f.set_len((keep * self.entry_size) as u64).map_err(Error::at(&self.path))?;
        }
        self.max_entries = self.len;
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.flush()?;
        match &self.file {
            Some(f) => f.sync_data().map_err(Error::at(&self.path)),
            None => Ok(()),
        }
    }
}

fn be_i32(b: &[u8]) -> i32 {
    i32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// `.index`: relative offset → byte position in the segment's `.log`.
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

impl OffsetIndex {
    pub fn open(path: &Path, base_offset: i64, max_bytes: usize, writable: bool) -> Result<Self> {
        let file = if writable {
            IndexFile::open_writable(path, OFFSET_ENTRY, max_bytes)?
        } else {
            IndexFile::open_read_only(path, OFFSET_ENTRY)?
        };
        Ok(OffsetIndex { base_offset, file })
    }

    pub fn empty(path: &Path, base_offset: i64) -> Self {
        OffsetIndex { base_offset, file: IndexFile::empty(path, OFFSET_ENTRY) }
    }

    pub fn len(&self) -> usize {
        self.file.len
    }
    pub fn is_empty(&self) -> bool {
        self.file.len == 0
    }
    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    pub fn entry(&self, i: usize) -> (i64, u32) {
        let e = self.file.entry(i);
        (self.base_offset + i64::from(be_i32(&e[0..4])), be_i32(&e[4..8]) as u32)
    }

    pub fn last_entry(&self) -> Option<(i64, u32)> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }

    pub fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        let rel = i32::try_from(offset - self.base_offset)
            .map_err(|_| Error::InvalidArgument(format!("offset {offset} overflows the index")))?;
        let mut e = [0u8; OFFSET_ENTRY];
        e[0..4].copy_from_slice(&rel.to_be_bytes());
        e[4..8].copy_from_slice(&position.to_be_bytes());
        self.file.push(&e)
    }

    /// The (offset, position) of the greatest indexed offset <= target, or the
    /// segment start when no entry qualifies.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let rel = target.saturating_sub(self.base_offset);
        match self.file.floor(|e| i64::from(be_i32(&e[0..4])), rel) {
            Some(i) => self.entry(i),
            None => (self.base_offset, 0),
        }
    }

    /// Drops every entry for an offset >= `offset` (log truncation).
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = match self.file.floor(|e| i64::from(be_i32(&e[0..4])), offset - self.base_offset - 1) {
            Some(i) => i + 1,
            None => 0,
        };
        self.file.truncate_entries(keep);
    }

    /// Drops entries whose position lies past `size` (a truncated or torn log).
    pub fn truncate_to_position(&mut self, size: u32) {
        let keep = (0..self.len()).take_while(|&i| self.entry(i).1 < size).count();
        self.file.truncate_entries(keep);
    }

    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }
    pub fn reload(&mut self) -> Result<()> {
        self.file.reload()
    }
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }
    pub fn trim(&mut self) -> Result<()> {
        self.file.trim()
    }
}

/// `.timeindex`: max timestamp seen so far → relative offset.
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

impl TimeIndex {
    pub fn open(path: &Path, base_offset: i64, max_bytes: usize, writable: bool) -> Result<Self> {
        let file = if writable {
            IndexFile::open_writable(path, TIME_ENTRY, max_bytes)?
        } else {
            IndexFile::open_read_only(path, TIME_ENTRY)?
        };
        Ok(TimeIndex { base_offset, file })
    }

    pub fn empty(path: &Path, base_offset: i64) -> Self {
        TimeIndex { base_offset, file: IndexFile::empty(path, TIME_ENTRY) }
    }

    pub fn len(&self) -> usize {
        self.file.len
    }
    pub fn is_empty(&self) -> bool {
        self.file.len == 0
    }
    /// Full one entry early: the last slot is kept for the entry written when
    /// the segment is sealed.
    pub fn is_full(&self) -> bool {
        self.file.len + 1 >= self.file.max_entries
    }

    pub fn entry(&self, i: usize) -> (i64, i64) {
        let e = self.file.entry(i);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[0..8]);
        (i64::from_be_bytes(ts), self.base_offset + i64::from(be_i32(&e[8..12])))
    }

    pub fn last_entry(&self) -> Option<(i64, i64)> {
        self.len().checked_sub(1).map(|i| self.entry(i))
    }

    /// Adds (timestamp, offset) if the timestamp is newer than the last entry's;
    /// entries keep both columns non-decreasing. `is_final` may use the reserved slot.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, is_final: bool) -> Result<()> {
        if let Some((last_ts, last_off)) = self.last_entry() {
            if timestamp <= last_ts || offset < last_off {
                return Ok(());
            }
        }
        if (self.is_full() && !is_final) || self.file.is_full() {
            return Ok(());
        }
        let rel = i32::try_from(offset - self.base_offset)
            .map_err(|_| Error::InvalidArgument(format!("offset {offset} overflows the time index")))?;
        let mut e = [0u8; TIME_ENTRY];
        e[0..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..12].copy_from_slice(&rel.to_be_bytes());
        self.file.push(&e)
    }

    /// The offset of the greatest entry with timestamp <= target (the scan for the
    /// first record with timestamp >= target starts there), or the segment start.
    pub fn lookup(&self, target: i64) -> i64 {
        let ts = |e: &[u8]| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&e[0..8]);
            i64::from_be_bytes(b)
        };
        match self.file.floor(ts, target.saturating_sub(1)) {
            Some(i) => self.entry(i).1,
            None => self.base_offset,
        }
    }

    pub fn truncate_to(&mut self, offset: i64) {
        let keep = (0..self.len()).take_while(|&i| self.entry(i).1 < offset).count();
        self.file.truncate_entries(keep);
    }

    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }
    pub fn reload(&mut self) -> Result<()> {
        self.file.reload()
    }
    pub fn flush(&self) -> Result<()> {
        self.file.flush()
    }
    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }
    pub fn trim(&mut self) -> Result<()> {
        self.file.trim()
    }
}

#[cfg(test)]
#[path = "index_test.rs"]
mod tests;
