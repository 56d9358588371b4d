//! One log segment: `<base>.log` with its `.index` and `.timeindex`.
//!
//! The segment's committed size is an atomic that readers load without a lock;
//! the writer (one at a time, serialised by the partition) writes the bytes and
//! only then publishes the new size, so a reader never sees a partial batch.

mod append;
pub mod files;
mod find;
pub mod inspect;
mod map;
mod recovery;
mod slice;
mod tail;
mod verified;

use std::fs::{self, File, OpenOptions};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{CorruptBatch, Error, Result};
use crate::index::{OffsetIndex, TimeIndex};
use crate::record::batch::{RecordBatch, HEADER_LEN, LOG_OVERHEAD};

pub use files::{file_name, parse_file_name};
use map::LogMap;
pub use recovery::Recovered;
pub use slice::{BatchInfo, FileRange};
use verified::VerifiedRanges;
pub use verified::{CrcTicket, RecordMarks};
/// Per-segment index bookkeeping, changed only by the writer.
struct IndexState {
    offsets: OffsetIndex,
    times: TimeIndex,
    bytes_since_last_entry: u64,
    max_timestamp_so_far: i64,
    offset_of_max_timestamp: i64,
    /// maxTimestamp of the first batch: what `segment.ms` is measured from.
    first_batch_timestamp: Option<i64>,
    /// A reader's time index is read at its first use (`times_read`), not when
    /// the segment opens: reads by offset, most of a reader's, never need it.
    times_unread: bool,
}

impl IndexState {
    /// The time index, read first if it has not been (and with it the newest
    /// timestamp it knows).
    fn times_read(&mut self) -> Result<&TimeIndex> {
        if self.times_unread {
            self.times.reload()?;
            let last = self.times.last_entry();
            self.max_timestamp_so_far = last.map_or(-1, |e| e.0);
            if let Some(e) = last {
                self.offset_of_max_timestamp = e.1;
            }
            self.times_unread = false;
        }
        Ok(&self.times)
    }
}

/// What a read checks of a segment's batches beyond their CRC, which covers
/// neither baseOffset nor batchLength: offsets inside the segment's range, each
/// batch starting where the one before it ended (or, where a cleaner removes
/// whole batches, not before), and every batch whole inside the committed size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    /// The next segment's base offset: no batch here reaches it (i64::MAX for
    /// the last segment).
    pub next_base: i64,
    /// A compacted log: offsets may skip ahead between batches.
    pub allow_gaps: bool,
}

impl Expect {
    /// Only what holds in any log: offsets in order and inside the segment.
    pub const ANY: Expect = Expect { next_base: i64::MAX, allow_gaps: true };
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
    /// Where damage sits: for a reader, a damaged batch that a valid one follows
    /// (so it is no write in progress); for the writer, where a sealed segment's
    /// batches stop short of the next segment. u64::MAX: none known.
    damaged_at: AtomicU64,
    /// A failed write left bytes past `size` that could not be cut off yet.
    torn: AtomicBool,
    /// How far the writer's file has disk blocks (`allocate_ahead`); past
    /// `size`, they are given back when the segment is sealed.
    allocated: AtomicU64,
    /// The file system refused to allocate ahead (it cannot): appends no longer try.
    no_allocate: AtomicBool,
    /// What passed its CRC in this process (not kept by a reader process).
    verified: VerifiedRanges,
    /// The log file mapped, for reads (not by a reader process: see `map`).
    map: LogMap,
}

/// What recovery reads at a time.
const READ_CHUNK: usize = 64 * 1024;
/// What a header walk reads at a time: an index interval's worth and a header,
/// since a lookup starts at most about that far from its batch.
const WALK_CHUNK: usize = 8 * 1024;
/// What it reads first (from an index hint a lookup's batch is often the first
/// or second), and after stepping over a batch too large for a chunk (the next
/// is likely as large: only its header is of use). Copying a page-cache page
/// costs about as much as the call itself, so reading 8 KiB to use 61 bytes
/// would triple the cost of a lookup in a log of 16 KiB batches.
const WALK_FIRST: usize = 2 * 1024;
const WALK_AFTER_LARGE: usize = 512;
/// How far past its end an active segment's file is allocated at most, and at
/// least (see `allocate_ahead`).
const ALLOCATE_AHEAD: u64 = 1 << 20;
const ALLOCATE_AHEAD_MIN: u64 = 64 * 1024;

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
        // Blocks well past the end (allocated ahead by a writer that did not seal
        // the segment: a crash) are given back when this writer seals it. Below
        // the slack they may be the file system's own (an extent tree's).
        let blocks = std::os::unix::fs::MetadataExt::blocks(&meta).saturating_mul(512);
        let allocated = if blocks > size.next_multiple_of(4096) + ALLOCATE_AHEAD_MIN { blocks } else { size };
        let reader = mode == SegmentMode::Reader;
        let (offsets, times) = if reader {
            // A reader racing the writer that is creating the files sees no index
            // yet: an empty one makes lookups scan from position 0. Its time
            // index is read at the first time lookup (`times_read`).
            let offsets = if index_path.exists() {
                OffsetIndex::open(&index_path, base_offset, index_bytes, false)?
            } else {
                OffsetIndex::empty(&index_path, base_offset)
            };
            (offsets, TimeIndex::empty(&time_path, base_offset))
        } else if writable || (index_path.exists() && time_path.exists()) {
            (
                OffsetIndex::open(&index_path, base_offset, index_bytes, writable)?,
                TimeIndex::open(&time_path, base_offset, index_bytes, writable)?,
            )
        } else {
            (OffsetIndex::empty(&index_path, base_offset), TimeIndex::empty(&time_path, base_offset))
        };
        let times_last = times.last_entry();
        if reader {
            // Bytes before the last index entry were written before the entry was;
            // past it, `catch_up_tail` accepts only whole, CRC-valid batches. The
            // file's length was read before the index: a writer that moved on in
            // between leaves an entry past it, and the length itself may fall
            // inside a batch being written, so only the entry, a batch boundary,
            // may start the committed size.
            size = offsets.last_entry().map(|e| u64::from(e.1)).filter(|&p| p <= size).unwrap_or(0);
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
                times_unread: reader,
            }),
            writable,
            inode,
            damaged_at: AtomicU64::new(u64::MAX),
            torn: AtomicBool::new(false),
            allocated: AtomicU64::new(if writable { allocated } else { 0 }),
            no_allocate: AtomicBool::new(false),
            // Only this process writes the files of an Active or Sealed segment:
            // what passed its CRC stays so until truncation cuts it off.
            verified: VerifiedRanges::new(mode != SegmentMode::Reader),
            // Likewise, only this process shortens them: they may be mapped.
            map: LogMap::new(mode != SegmentMode::Reader),
        })
    }

    /// Records damage found where the CRC cannot show it (the segment does not
    /// end where the next one begins), so that searches do not pass it silently.
    pub fn mark_damaged(&self, position: u64) {
        self.damaged_at.fetch_min(position, Ordering::AcqRel);
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

    /// The log file's descriptor, for a zero-copy send (sendfile/splice) of a
    /// `FileRange` read from this segment. It stays open, on the same file, as
    /// long as the `Segment` lives: nothing replaces or closes a segment's
    /// file; the cleaner, retention and truncation that remove or rewrite a
    /// segment make new `Segment` objects (or rename or unlink the path, which
    /// an open descriptor outlives). The one change a holder can see is a
    /// truncation (`truncate_to` of the log) cutting the file shorter: a send
    /// of a range read before it then comes up short (sendfile returns fewer
    /// bytes, or 0, at the new end of file), and the sender must treat that as
    /// the end of the data rather than wait for more.
    pub fn log_fd(&self) -> BorrowedFd<'_> {
        self.log.as_fd()
    }

    /// Committed size in bytes: everything below it is whole, valid batches.
    pub fn size(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub(crate) fn set_size(&self, size: u64) {
        self.size.store(size, Ordering::Release);
    }

    /// Cheap checks that the loaded indexes agree with the log: the last offset
    /// entry points at the batch holding its offset, the batches from there on
    /// meet `expect` and the last one its CRC, the last time entry names a
    /// batch's last offset and that batch's max timestamp, and no batch after it
    /// has a newer timestamp (what a sealed segment's final entry promises).
    pub fn index_is_sane(&self, expect: Expect) -> Result<bool> {
        let (offsets_last, times_last) = {
            let mut ix = self.indexes.lock();
            let offsets_last = ix.offsets.last_entry();
            (offsets_last, ix.times_read()?.last_entry())
        };
        let end = self.size();
        if let Some((offset, position)) = offsets_last {
            if offset < self.base_offset || u64::from(position) >= end {
                return Ok(false);
            }
            if self.hinted_walk((offset, position), end, Expect::ANY, |_| false).is_err() {
                return Ok(false);
            }
        }
        let Ok(last) = self.last_batch(end, expect) else { return Ok(false) };
        if let Some(b) = last {
            if !self.crc_valid(&b)? {
                return Ok(false);
            }
        }
        Ok(match (times_last, last) {
            (_, None) => times_last.is_none(),
            (None, Some(b)) => b.max_timestamp < 0,
            (Some((ts, off)), Some(b)) => {
                b.max_timestamp <= ts && matches!(self.time_entry_batch(ts, off, end), Ok(Some(_)))
            }
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
        let mut ix = self.indexes.lock();
        match ix.times_read() {
            Ok(_) => ix.max_timestamp_so_far,
            // Unknown: as new as can be, so that no search passes this segment by.
            Err(_) => i64::MAX,
        }
    }

    /// Reads `buf.len()` bytes at `position` (see `read_exact_at_uninit`).
    pub fn read_exact_at(&self, buf: &mut [u8], position: u64) -> Result<()> {
        // SAFETY: initialised bytes may be viewed as MaybeUninit<u8> (same
        // layout), and `read_exact_at_uninit` only ever writes bytes into it.
        let uninit = unsafe { &mut *(std::ptr::from_mut(buf) as *mut [MaybeUninit<u8>]) };
        self.read_exact_at_uninit(uninit, position).map(|_| ())
    }

    /// `f` on the `len` bytes at `position` borrowed from the map; None if the
    /// segment is not mapped (a reader process's) or they are not committed.
    pub fn with_mapped<R>(&self, position: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        self.map.with(&self.log, || self.size(), position, len, f).ok()
    }

    /// Drops this process's mapping of the bytes `[position, position + len)`
    /// (see `LogMap::release`): for a range sent on with `sendfile` or copied
    /// out, whose pages need not stay in the process's resident set.
    pub fn release_mapped(&self, position: u64, len: u64) {
        self.map.release(position, len);
    }

    /// Whether the batches in `[position, position + len)` passed their CRC in
    /// this process already; take it before reading the bytes.
    pub fn crc_ticket(&self, position: u64, len: u64) -> CrcTicket {
        self.verified.ticket(position, len)
    }

    /// Records that the batches read under `ticket` passed their CRC.
    pub fn crc_passed(&self, ticket: CrcTicket, position: u64, len: u64) {
        self.verified.passed(ticket, position, len);
    }

    /// Where records start in the batch at `position`, if a lookup left it.
    pub fn record_marks(&self, position: u64) -> Option<RecordMarks> {
        self.verified.marks(position)
    }

    /// Keeps where records start in the batch at `position` (found in bytes
    /// read under `ticket`, which a truncation since voids).
    pub fn keep_record_marks(&self, ticket: CrcTicket, position: u64, marks: RecordMarks) {
        self.verified.keep_marks(ticket, position, marks);
    }

    /// Reads `len` bytes at `position` into a new buffer.
    pub fn read_bytes(&self, position: u64, len: usize) -> Result<Vec<u8>> {
        match self.map.with(&self.log, || self.size(), position, len, <[u8]>::to_vec) {
            Ok(v) => Ok(v),
            Err(_) => self.read_bytes_unmapped(position, len),
        }
    }

    /// Reads into fresh, unzeroed memory (zeroing a megabyte only to overwrite
    /// it was a tenth of a read-only `poll_arrow` pass).
    fn read_bytes_unmapped(&self, position: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        self.pread_exact(&mut buf.spare_capacity_mut()[..len], position)?;
        // SAFETY: `pread_exact` filled all `len` bytes of the spare capacity.
        unsafe { buf.set_len(len) };
        Ok(buf)
    }

    /// Reads `buf.len()` bytes at `position` into memory that need not be
    /// initialised (a buffer on the stack, left unzeroed: zeroing 32 KiB for
    /// every reader's lookup touched stack pages a read never reaches), and
    /// returns them.
    pub fn read_exact_at_uninit<'b>(
        &self,
        buf: &'b mut [MaybeUninit<u8>],
        position: u64,
    ) -> Result<&'b [u8]> {
        let len = buf.len();
        let mapped = self.map.with(
            &self.log,
            || self.size(),
            position,
            len,
            |b| {
                // SAFETY: `b` and `buf` are both `len` bytes long and distinct
                // (`b` is the map's, `buf` a borrow of the caller's memory).
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), buf.as_mut_ptr().cast::<u8>(), len) }
            },
        );
        if mapped.is_err() {
            self.pread_exact(buf, position)?;
        }
        // SAFETY: all `len` bytes were written, by the copy or by `pread_exact`;
        // MaybeUninit<u8> has u8's layout.
        Ok(unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len) })
    }

    /// Fills `buf` from the log file at `position` with `pread`, which only
    /// writes to it; an error if the file ends first.
    fn pread_exact(&self, buf: &mut [MaybeUninit<u8>], position: u64) -> Result<()> {
        let fd = self.log.as_raw_fd();
        let mut done = 0;
        while done < buf.len() {
            let Ok(at) = libc::off_t::try_from(position + done as u64) else {
                return Err(Error::at(&self.log_path)(std::io::ErrorKind::InvalidInput.into()));
            };
            // SAFETY: the pointer and length describe the unfilled rest of
            // `buf`, memory the caller lends us, which pread only writes.
            let n = unsafe { libc::pread(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done, at) };
            match n {
                0 => return Err(Error::at(&self.log_path)(std::io::ErrorKind::UnexpectedEof.into())),
                n if n < 0 => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(Error::at(&self.log_path)(e));
                    }
                }
                n => done += n as usize,
            }
        }
        Ok(())
    }

    /// Whether the batch a walk found passes its CRC (what a header walk skips).
    pub fn crc_valid(&self, b: &BatchInfo) -> Result<bool> {
        Ok(RecordBatch::parse(&self.read_bytes(b.position, b.size as usize)?).is_ok())
    }

    /// A `CorruptRecordError` naming this segment's file and the position.
    pub fn corrupt(&self, position: u64, reason: impl Into<String>) -> Error {
        CorruptBatch::InSegment { path: self.log_path.clone(), position, reason: reason.into() }.into()
    }

    /// Cuts the segment back to just before the batch holding `offset`. What the
    /// indexes knew of the batches cut (their timestamps too) goes with them.
    pub fn truncate_to(&self, offset: i64) -> Result<u64> {
        let end = self.size();
        let cut = self.find_batch(offset, end, Expect::ANY)?;
        let (cut, cut_offset) = cut.map_or((end, offset), |b| (b.position, b.base_offset.min(offset)));
        let mut ix = self.indexes.lock();
        ix.offsets.truncate_to(cut_offset);
        ix.times.truncate_to(cut_offset);
        ix.offsets.truncate_to_position(u32::try_from(cut).unwrap_or(u32::MAX));
        ix.bytes_since_last_entry = 0;
        ix.first_batch_timestamp = None;
        let kept = ix.times.last_entry();
        ix.max_timestamp_so_far = kept.map_or(-1, |e| e.0);
        ix.offset_of_max_timestamp = kept.map_or(self.base_offset, |e| e.1);
        drop(ix);
        // The kept batches after the last time entry may hold newer timestamps.
        let from = match kept {
            Some((_, off)) => self.find_batch(off, cut, Expect::ANY)?.map_or(0, |b| b.position),
            None => 0,
        };
        let mut newest = (-1i64, self.base_offset);
        self.walk(from, cut, None, Expect::ANY, |b| {
            if b.max_timestamp > newest.0 {
                newest = (b.max_timestamp, b.last_offset);
            }
            true
        })?;
        let mut ix = self.indexes.lock();
        if newest.0 > ix.max_timestamp_so_far {
            (ix.max_timestamp_so_far, ix.offset_of_max_timestamp) = newest;
        }
        drop(ix);
        let shortening = self.map.shorten();
        self.set_file_len(cut).map_err(Error::at(&self.log_path))?;
        self.size.store(cut, Ordering::Release);
        drop(shortening);
        // After the new size: a read that started before the cut records nothing.
        self.verified.truncate(cut);
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
    /// closes): a last time-index entry, then both indexes trimmed to size; and
    /// the log's blocks allocated past its end given back.
    pub fn seal(&self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.release_ahead();
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

impl AsFd for Segment {
    /// See `log_fd`.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.log.as_fd()
    }
}

#[cfg(test)]
#[path = "segment_test.rs"]
mod tests;
