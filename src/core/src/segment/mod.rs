//! One log segment: `<base>.log` with its `.index` and `.timeindex`.
//!
//! The segment's committed size is an atomic that readers load without a lock;
//! the writer (one at a time, serialised by the partition) writes the bytes and
//! only then publishes the new size, so a reader never sees a partial batch.

pub mod files;
pub mod inspect;
mod recovery;
mod slice;
mod tail;

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::index::{OffsetIndex, TimeIndex};
use crate::record::batch::{RecordBatch, HEADER_LEN};

pub use files::{file_name, parse_file_name};
pub use recovery::Recovered;
pub use slice::{BatchInfo, FileRange};
/// Per-segment index bookkeeping, changed only by the writer.
struct IndexState {
    offsets: OffsetIndex,
    times: TimeIndex,
    bytes_since_last_entry: u64,
    max_timestamp_so_far: i64,
    offset_of_max_timestamp: i64,
    /// maxTimestamp of the first batch: what `segment.ms` is measured from.
    first_batch_timestamp: Option<i64>,
}

/// How a segment is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentMode {
    /// The writer's last segment: log writable, indexes preallocated and mapped.
    Active,
    /// The writer's older segments: read-only, indexes read into memory.
    Sealed,
    /// A reader in another process: read-only, nothing on disk changed, the
    /// committed size learned by CRC-checking what the writer appended.
    Reader,
}

pub struct Segment {
    pub base_offset: i64,
    log_path: PathBuf,
    log: File,
    size: AtomicU64,
    indexes: Mutex<IndexState>,
    writable: bool,
    /// The inode of the log file when opened, to notice a replaced file.
    inode: u64,
    /// For a reader: where a damaged batch sits that a valid one follows (so it
    /// is no write in progress), or u64::MAX.
    damaged_at: AtomicU64,
    /// A failed write left bytes past `size` that could not be cut off yet.
    torn: AtomicBool,
}

/// What recovery reads at a time.
const READ_CHUNK: usize = 64 * 1024;
/// What a header walk reads at a time: an index interval's worth and a header,
/// since a lookup starts at most about that far from its batch.
const WALK_CHUNK: usize = 8 * 1024;

impl Segment {
    pub fn paths(dir: &Path, base_offset: i64) -> (PathBuf, PathBuf, PathBuf) {
        files::segment_paths(dir, base_offset)
    }

    pub fn indexes_exist(dir: &Path, base_offset: i64) -> bool {
        let (_, index, time) = Self::paths(dir, base_offset);
        index.exists() && time.exists()
    }

    /// Opens the segment at `base_offset` (an Active one is created if missing).
    pub fn open(dir: &Path, base_offset: i64, index_bytes: usize, mode: SegmentMode) -> Result<Self> {
        let writable = mode == SegmentMode::Active;
        let (log_path, index_path, time_path) = Self::paths(dir, base_offset);
        let created = writable && !log_path.exists();
        let log = OpenOptions::new()
            .read(true)
            .write(writable)
            .create(writable)
            .truncate(false)
            .open(&log_path)
            .map_err(Error::at(&log_path))?;
        let opened = Self::open_files(log, log_path, index_path, time_path, base_offset, index_bytes, mode);
        if opened.is_err() && created {
            // A new segment that could not be set up (a full disk) leaves no files.
            let (log, index, time) = Self::paths(dir, base_offset);
            for p in [log, index, time] {
                let _ = fs::remove_file(p);
            }
        }
        opened
    }

    fn open_files(
        log: File,
        log_path: PathBuf,
        index_path: PathBuf,
        time_path: PathBuf,
        base_offset: i64,
        index_bytes: usize,
        mode: SegmentMode,
    ) -> Result<Self> {
        let writable = mode == SegmentMode::Active;
        let meta = log.metadata().map_err(Error::at(&log_path))?;
        let mut size = meta.len();
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        let (offsets, times) = if writable || (index_path.exists() && time_path.exists()) {
            (
                OffsetIndex::open(&index_path, base_offset, index_bytes, writable)?,
                TimeIndex::open(&time_path, base_offset, index_bytes, writable)?,
            )
        } else {
            // A reader racing the writer that is creating the files sees no index
            // yet: empty ones make lookups scan from position 0.
            (OffsetIndex::empty(&index_path, base_offset), TimeIndex::empty(&time_path, base_offset))
        };
        let times_last = times.last_entry();
        if mode == SegmentMode::Reader {
            // Bytes before the last index entry were written before the entry was;
            // past it, `catch_up_tail` accepts only whole, CRC-valid batches.
            size = offsets.last_entry().map_or(0, |e| u64::from(e.1)).min(size);
        }
        Ok(Segment {
            base_offset,
            log_path,
            log,
            size: AtomicU64::new(size),
            indexes: Mutex::new(IndexState {
                offsets,
                times,
                bytes_since_last_entry: 0,
                max_timestamp_so_far: times_last.map_or(-1, |e| e.0),
                offset_of_max_timestamp: times_last.map_or(base_offset, |e| e.1),
                first_batch_timestamp: None,
            }),
            writable,
            inode,
            damaged_at: AtomicU64::new(u64::MAX),
            torn: AtomicBool::new(false),
        })
    }

    /// The position of a damaged batch a reader found, if any.
    pub fn damaged_at(&self) -> Option<u64> {
        Some(self.damaged_at.load(Ordering::Acquire)).filter(|&p| p != u64::MAX)
    }

    /// Whether the path now names another file than the one this handle reads.
    pub fn file_replaced(&self) -> bool {
        match fs::metadata(&self.log_path) {
            Ok(m) => std::os::unix::fs::MetadataExt::ino(&m) != self.inode,
            Err(_) => true,
        }
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Committed size in bytes: everything below it is whole, valid batches.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub(crate) fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    /// Cheap checks that a loaded index agrees with its log: entries point
    /// inside the file and at batches that hold the indexed offset.
    pub fn index_is_sane(&self) -> Result<bool> {
        let ix = self.indexes.lock();
        let Some((offset, position)) = ix.offsets.last_entry() else { return Ok(true) };
        let size = self.size();
        if u64::from(position) + HEADER_LEN as u64 > size || offset < self.base_offset {
            return Ok(false);
        }
        drop(ix);
        let mut header = [0u8; HEADER_LEN];
        self.read_exact_at(&mut header, u64::from(position))?;
        Ok(match RecordBatch::header_only(&header) {
            Ok(b) => b.base_offset() <= offset && offset <= b.last_offset(),
            Err(_) => false,
        })
    }

    pub fn index_is_full(&self) -> bool {
        let ix = self.indexes.lock();
        ix.offsets.is_full() || ix.times.is_full()
    }

    /// maxTimestamp of the first batch, loaded lazily (what `segment.ms` uses).
    pub fn first_batch_timestamp(&self) -> Result<Option<i64>> {
        let mut ix = self.indexes.lock();
        if ix.first_batch_timestamp.is_none() && self.size() > 0 {
            let mut header = [0u8; HEADER_LEN];
            self.read_exact_at(&mut header, 0)?;
            ix.first_batch_timestamp = Some(RecordBatch::header_only(&header)?.max_timestamp());
        }
        Ok(ix.first_batch_timestamp)
    }

    /// The log file's modification time (ms), what retention falls back on for a
    /// segment without timestamps.
    pub fn modified_ms(&self) -> i64 {
        self.log
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    }

    /// The largest timestamp in the segment as far as the time index knows.
    pub fn max_timestamp(&self) -> i64 {
        self.indexes.lock().max_timestamp_so_far
    }

    /// Writes one batch (its offsets already assigned) at the end of the segment,
    /// indexing it if more than `index_interval` bytes went by since the last entry.
    ///
    /// A failed append leaves the segment as it was: a write that failed part-way
    /// (a full disk, a file-size limit) is cut back to the last good end, and the
    /// index is only touched once the batch is in the file. If even the cut fails,
    /// the segment refuses appends until a later one manages it.
    pub fn append(&self, batch: &[u8], info: &BatchInfo, index_interval: u64) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly("append"));
        }
        let position = self.size();
        if self.torn.load(Ordering::Acquire) {
            self.cut_back(position)?;
        }
        let pos = u32::try_from(position).map_err(|_| {
            Error::InvalidArgument(format!("segment position {position} overflows the index"))
        })?;
        // Everything that can refuse the index entry is checked before the
        // write (only the writer changes the indexes meanwhile); readers' index
        // lookups are not held up by the write.
        let index_it = {
            let mut ix = self.indexes.lock();
            let index_it = ix.bytes_since_last_entry > index_interval;
            if index_it {
                ix.offsets.prepare_append(info.last_offset)?;
                ix.times.prepare_append()?;
            }
            index_it
        };
        if let Err(e) = self.log.write_all_at(batch, position) {
            let e = Error::at(&self.log_path)(e);
            self.cut_back(position)?;
            return Err(e);
        }
        let mut ix = self.indexes.lock();
        if ix.first_batch_timestamp.is_none() && position == 0 {
            ix.first_batch_timestamp = Some(info.max_timestamp);
        }
        if info.max_timestamp > ix.max_timestamp_so_far {
            ix.max_timestamp_so_far = info.max_timestamp;
            ix.offset_of_max_timestamp = info.last_offset;
        }
        if index_it {
            ix.offsets.append(info.last_offset, pos)?;
            let (ts, off) = (ix.max_timestamp_so_far, ix.offset_of_max_timestamp);
            ix.times.maybe_append(ts, off, false)?;
            ix.bytes_since_last_entry = 0;
        }
        ix.bytes_since_last_entry += batch.len() as u64;
        drop(ix);
        self.size.store(position + batch.len() as u64, Ordering::Release);
        Ok(())
    }

    /// Cuts the log file back to `size`, the end of its last whole batch, after
    /// a write that failed part-way. Until that succeeds the segment is torn.
    fn cut_back(&self, size: u64) -> Result<()> {
        match self.log.set_len(size) {
            Ok(()) => {
                self.torn.store(false, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                self.torn.store(true, Ordering::Release);
                Err(Error::at(&self.log_path)(e))
            }
        }
    }

    pub fn read_exact_at(&self, buf: &mut [u8], position: u64) -> Result<()> {
        self.log.read_exact_at(buf, position).map_err(Error::at(&self.log_path))
    }

    /// Reads `len` bytes at `position` into a new buffer.
    pub fn read_bytes(&self, position: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, position)?;
        Ok(buf)
    }

    /// Walks batch headers from `start` up to `end`, reading in chunks and calling
    /// `f` for each whole batch; `f` returns false to stop. Headers only: no CRC.
    fn walk(&self, start: u64, end: u64, mut f: impl FnMut(BatchInfo) -> bool) -> Result<()> {
        let mut buf = vec![0u8; WALK_CHUNK];
        let (mut buf_pos, mut buf_len) = (start, 0usize);
        let mut pos = start;
        while pos + HEADER_LEN as u64 <= end {
            let rel = (pos - buf_pos) as usize;
            if rel + HEADER_LEN > buf_len {
                let n = ((end - pos) as usize).min(WALK_CHUNK);
                self.read_exact_at(&mut buf[..n], pos)?;
                buf_pos = pos;
                buf_len = n;
                continue;
            }
            let b = RecordBatch::header_only(&buf[rel..buf_len])?;
            let info = BatchInfo::from_batch(pos, &b);
            if pos + info.size > end {
                break;
            }
            if !f(info) {
                break;
            }
            pos += info.size;
        }
        Ok(())
    }

    /// The first batch whose last offset is >= `offset`, searching below `end`.
    pub fn find_batch(&self, offset: i64, end: u64) -> Result<Option<BatchInfo>> {
        let (_, start) = self.indexes.lock().offsets.lookup(offset);
        let mut start = u64::from(start);
        if start >= end {
            start = 0; // a stale hint from a reader's copy of a live index
        }
        match self.find_batch_from(offset, start, end) {
            // A hint is good if it does not land past the target; a reader's copy
            // of a live index may be stale, and then the scan starts over.
            Ok(Some(b)) if start > 0 && b.base_offset > offset => self.find_batch_from(offset, 0, end),
            Err(_) if start > 0 => self.find_batch_from(offset, 0, end),
            other => other,
        }
    }

    fn find_batch_from(&self, offset: i64, start: u64, end: u64) -> Result<Option<BatchInfo>> {
        let mut found = None;
        self.walk(start, end, |b| {
            if b.last_offset >= offset {
                found = Some(b);
                return false;
            }
            true
        })?;
        Ok(found)
    }

    /// The file range of whole batches from the one holding `offset`, at most
    /// `max_bytes` long but always at least one batch (so a large batch is not
    /// stuck forever), never past `end`.
    pub fn range_from(&self, offset: i64, max_bytes: u64, end: u64) -> Result<Option<FileRange>> {
        let Some(first) = self.find_batch(offset, end)? else { return Ok(None) };
        if first.size >= max_bytes {
            // One batch is all that was asked for (a lookup): no second walk.
            return Ok(Some(FileRange {
                path: self.log_path.clone(),
                position: first.position,
                length: first.size,
            }));
        }
        let mut length = 0u64;
        self.walk(first.position, end, |b| {
            if length > 0 && length + b.size > max_bytes {
                return false;
            }
            length += b.size;
            true
        })?;
        Ok(Some(FileRange { path: self.log_path.clone(), position: first.position, length }))
    }

    /// The first batch with a record timestamp >= `timestamp` (by its maxTimestamp).
    pub fn find_by_timestamp(&self, timestamp: i64, end: u64) -> Result<Option<BatchInfo>> {
        self.find_by_timestamp_from(timestamp, 0, end)
    }

    /// As `find_by_timestamp`, but not before byte `from` (to continue a search).
    pub fn find_by_timestamp_from(&self, timestamp: i64, from: u64, end: u64) -> Result<Option<BatchInfo>> {
        let hint = {
            let ix = self.indexes.lock();
            let offset = ix.times.lookup(timestamp);
            u64::from(ix.offsets.lookup(offset).1)
        };
        let start = if hint >= end { from } else { hint.max(from) };
        let mut found = None;
        self.walk(start, end, |b| {
            if b.max_timestamp >= timestamp {
                found = Some(b);
                return false;
            }
            true
        })?;
        Ok(found)
    }

    /// The last whole batch below `end`, starting from the last index entry.
    pub fn last_batch(&self, end: u64) -> Result<Option<BatchInfo>> {
        let hint = self.indexes.lock().offsets.last_entry().map_or(0, |e| u64::from(e.1));
        let start = if hint < end { hint } else { 0 };
        let mut last = None;
        self.walk(start, end, |b| {
            last = Some(b);
            true
        })?;
        Ok(last)
    }

    /// Cuts the segment back to just before the batch holding `offset`.
    pub fn truncate_to(&self, offset: i64) -> Result<u64> {
        let end = self.size();
        let cut = self.find_batch_from(offset, 0, end)?.map_or(end, |b| b.position);
        let mut ix = self.indexes.lock();
        ix.offsets.truncate_to(offset);
        ix.times.truncate_to(offset);
        ix.offsets.truncate_to_position(cut as u32);
        ix.bytes_since_last_entry = 0;
        self.log.set_len(cut).map_err(Error::at(&self.log_path))?;
        self.size.store(cut, Ordering::Release);
        Ok(end - cut)
    }

    /// fdatasync of the log only: what a durable append waits for.
    pub fn sync_log(&self) -> Result<()> {
        self.log.sync_data().map_err(Error::at(&self.log_path))
    }

    /// fdatasync of the log and both indexes.
    pub fn sync(&self) -> Result<()> {
        self.sync_log()?;
        let ix = self.indexes.lock();
        ix.offsets.sync()?;
        ix.times.sync()
    }

    /// What Kafka does when a segment stops being the active one (or the log
    /// closes): a last time-index entry, then both indexes trimmed to size.
    pub fn seal(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        let mut ix = self.indexes.lock();
        let (ts, off) = (ix.max_timestamp_so_far, ix.offset_of_max_timestamp);
        if ts >= 0 {
            ix.times.maybe_append(ts, off, true)?;
        }
        ix.offsets.trim()?;
        ix.times.trim()?;
        ix.times.sync()?;
        ix.offsets.sync()
    }

    /// Removes the segment's files (the caller has taken it out of the log).
    pub fn delete_files(&self) -> Result<()> {
        let dir = self.log_path.parent().unwrap_or(Path::new("."));
        let (log, index, time) = Self::paths(dir, self.base_offset);
        for p in [log, index, time] {
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::at(&p)(e)),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "segment_test.rs"]
mod tests;
