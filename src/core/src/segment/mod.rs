//! One log segment: `<base>.log` with its `.index` and `.timeindex`.
//!
//! The segment's committed size is an atomic that readers load without a lock;
//! the writer (one at a time, serialised by the partition) writes the bytes and
//! only then publishes the new size, so a reader never sees a partial batch.

pub mod files;
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

    /// Writes one batch (its offsets already assigned) at the end of the segment,
    /// indexing it if more than `index_interval` bytes went by since the last entry.
    ///
    /// A failed append leaves the segment as it was: a write that failed part-way
    /// (a full disk, a file-size limit) is cut back to the last good end, and the
    /// index is only touched once the batch is in the file. If even the cut fails,
    /// the segment refuses appends until a later one manages it.
    pub fn append(&self, batch: &[u8], info: &BatchInfo, index_interval: u64) -> Result<()> {
        self.append_run(&[batch], std::slice::from_ref(info), index_interval)
    }

    /// `append` of consecutive batches (`infos[i]` describes `batches[i]`) with
    /// one write: the file and indexes end exactly as after appending them one
    /// by one, and a failed write leaves none of them. The caller makes sure the
    /// indexes have room for an entry per batch (`index_room`).
    pub fn append_run(&self, batches: &[&[u8]], infos: &[BatchInfo], index_interval: u64) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly("append"));
        }
        if batches.len() != infos.len() || batches.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} batches described by {} infos",
                batches.len(),
                infos.len()
            )));
        }
        let position = self.size();
        if self.torn.load(Ordering::Acquire) {
            self.cut_back(position)?;
        }
        let total: u64 = batches.iter().map(|b| b.len() as u64).sum();
        // Where each batch starts, as the index stores it.
        let mut starts = Vec::with_capacity(batches.len());
        let mut at = position;
        for b in batches {
            starts.push(
                u32::try_from(at).map_err(|_| {
                    Error::InvalidArgument(format!("segment position {at} overflows the index"))
                })?,
            );
            at += b.len() as u64;
        }
        // Which batches get an index entry (the same rule as one by one), and
        // everything that can refuse those entries, checked before the write
        // (only the writer changes the indexes meanwhile); readers' index
        // lookups are not held up by the write.
        let indexed: Vec<bool> = {
            let mut ix = self.indexes.lock();
            let mut since = ix.bytes_since_last_entry;
            let indexed: Vec<bool> = batches
                .iter()
                .map(|b| {
                    let index_it = since > index_interval;
                    since = (if index_it { 0 } else { since }) + b.len() as u64;
                    index_it
                })
                .collect();
            let entries = indexed.iter().filter(|&&i| i).count();
            // Offsets grow: the last indexed batch has the largest entry.
            if let Some((info, _)) = infos.iter().zip(&indexed).rev().find(|(_, &i)| i) {
                ix.offsets.prepare_appends(info.last_offset, entries)?;
                ix.times.prepare_appends(entries)?;
            }
            indexed
        };
        self.allocate_ahead(position + total);
        if let Err(e) = write_all_vectored_at(&self.log, batches, position) {
            let e = Error::at(&self.log_path)(e);
            self.cut_back(position)?;
            return Err(e);
        }
        let mut ix = self.indexes.lock();
        for ((info, &pos), (&index_it, batch)) in infos.iter().zip(&starts).zip(indexed.iter().zip(batches)) {
            if ix.first_batch_timestamp.is_none() && pos == 0 {
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
        }
        drop(ix);
        self.size.store(position + total, Ordering::Release);
        Ok(())
    }

    /// Index entries this segment can still take (the fewer of its two indexes').
    pub fn index_room(&self) -> usize {
        let ix = self.indexes.lock();
        ix.offsets.room().min(ix.times.room())
    }

    /// Makes sure the file has disk blocks up to `end`, allocating ahead of it
    /// (`fallocate`, the file's size unchanged: what readers and recovery see
    /// stays the log's bytes). Writing into blocks the file already has skips
    /// the file system's per-page allocation work: on ext4, 1 MiB writes into
    /// blocks allocated ahead take about a third less time than into a fresh
    /// file. The step grows with the
    /// segment, to ALLOCATE_AHEAD, so small segments take little. Failing
    /// costs nothing but the speed-up: the write allocates as it goes (and a
    /// full disk fails the write itself, as without this).
    fn allocate_ahead(&self, end: u64) {
        let have = self.allocated.load(Ordering::Acquire);
        if end <= have || self.no_allocate.load(Ordering::Relaxed) {
            return;
        }
        let to = end + end.clamp(ALLOCATE_AHEAD_MIN, ALLOCATE_AHEAD);
        let from = have.max(self.size());
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(from), libc::off_t::try_from(to - from)) else {
            return;
        };
        // SAFETY: fallocate only reads its integer arguments; the descriptor is
        // this segment's open log file.
        let r = unsafe { libc::fallocate(self.log.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, len) };
        if r == 0 {
            self.allocated.store(to, Ordering::Release);
        } else if matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EOPNOTSUPP | libc::ENOSYS)
        ) {
            self.no_allocate.store(true, Ordering::Relaxed);
        }
    }

    /// Gives back the blocks allocated past the end (a cut to the size the file
    /// already has frees them; mapped pages and readers see no change). Only
    /// disk space rides on it: a cut that fails leaves the log as it was, and
    /// the next seal tries again.
    fn release_ahead(&self) {
        let size = self.size();
        if self.allocated.load(Ordering::Acquire) > size.next_multiple_of(4096) {
            let _ = self.set_file_len(size);
        }
    }

    /// Sets the log file's length (the writer's), which also frees any blocks
    /// allocated past it.
    fn set_file_len(&self, len: u64) -> std::io::Result<()> {
        self.log.set_len(len)?;
        self.allocated.store(len, Ordering::Release);
        Ok(())
    }

    /// Cuts the log file back to `size`, the end of its last whole batch, after
    /// a write that failed part-way. Until that succeeds the segment is torn.
    fn cut_back(&self, size: u64) -> Result<()> {
        match self.set_file_len(size) {
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

    /// Walks batch headers from `start` up to `end`, reading in chunks and calling
    /// `f` for each whole batch; `f` returns false to stop. Headers only: no CRC,
    /// but what the CRC does not cover is checked (see `Expect`): `prev_next` is
    /// the offset the first batch must start at (None: not known, from a hint).
    fn walk(
        &self,
        start: u64,
        end: u64,
        prev_next: Option<i64>,
        expect: Expect,
        mut f: impl FnMut(BatchInfo) -> bool,
    ) -> Result<()> {
        self.walk_headers(start, end, prev_next, expect, |info, _| f(info))
    }

    /// As `walk`, also handing `f` each batch's header (its first 61 bytes only).
    fn walk_headers(
        &self,
        start: u64,
        end: u64,
        mut prev_next: Option<i64>,
        expect: Expect,
        mut f: impl FnMut(BatchInfo, &RecordBatch<'_>) -> bool,
    ) -> Result<()> {
        let len = end.saturating_sub(start) as usize;
        let walk = |bytes: &[u8]| self.walk_in(bytes, start, end, prev_next, expect, &mut f);
        if let Some(walked) = self.with_mapped(start, len, walk) {
            return walked;
        }
        let mut buf = vec![0u8; WALK_CHUNK];
        let (mut buf_pos, mut buf_len) = (start, 0usize);
        let mut pos = start;
        let mut chunk = WALK_FIRST;
        while pos < end {
            let rel = (pos - buf_pos) as usize;
            if rel + HEADER_LEN > buf_len {
                if pos + HEADER_LEN as u64 > end {
                    return Err(self.corrupt(
                        pos,
                        format!("{} bytes at the end of the segment are not a whole batch", end - pos),
                    ));
                }
                let n = ((end - pos) as usize).min(chunk);
                self.read_exact_at(&mut buf[..n], pos)?;
                buf_pos = pos;
                buf_len = n;
                chunk = WALK_CHUNK;
                continue;
            }
            let b =
                RecordBatch::header_only(&buf[rel..buf_len]).map_err(|e| self.corrupt(pos, e.to_string()))?;
            let info = BatchInfo::from_batch(pos, &b);
            self.check_batch(&info, b.last_offset_delta(), prev_next, end, expect)?;
            if !f(info, &b) {
                break;
            }
            prev_next = Some(info.last_offset + 1);
            pos += info.size;
            if info.size >= WALK_CHUNK as u64 {
                chunk = WALK_AFTER_LARGE;
            }
        }
        Ok(())
    }

    /// `walk_headers` over `bytes`, the segment's `[start, end)` in memory.
    fn walk_in(
        &self,
        bytes: &[u8],
        start: u64,
        end: u64,
        mut prev_next: Option<i64>,
        expect: Expect,
        f: &mut impl FnMut(BatchInfo, &RecordBatch<'_>) -> bool,
    ) -> Result<()> {
        let mut rel = 0usize;
        while rel < bytes.len() {
            let pos = start + rel as u64;
            if rel + HEADER_LEN > bytes.len() {
                return Err(self.corrupt(
                    pos,
                    format!("{} bytes at the end of the segment are not a whole batch", end - pos),
                ));
            }
            let b = RecordBatch::header_only(&bytes[rel..]).map_err(|e| self.corrupt(pos, e.to_string()))?;
            let info = BatchInfo::from_batch(pos, &b);
            self.check_batch(&info, b.last_offset_delta(), prev_next, end, expect)?;
            if !f(info, &b) {
                break;
            }
            prev_next = Some(info.last_offset + 1);
            rel = rel.saturating_add(info.size as usize);
        }
        Ok(())
    }

    /// What the CRC cannot vouch for in a batch header found at `info.position`.
    fn check_batch(
        &self,
        info: &BatchInfo,
        last_offset_delta: i32,
        prev_next: Option<i64>,
        end: u64,
        expect: Expect,
    ) -> Result<()> {
        let (base, last) = (info.base_offset, info.last_offset);
        let problem = if info.position + info.size > end {
            Some(format!(
                "batchLength {} runs past the segment's end at position {end}",
                info.size - LOG_OVERHEAD as u64
            ))
        } else if last_offset_delta < 0 {
            Some(format!("lastOffsetDelta {last_offset_delta} is negative"))
        } else if base < self.base_offset || last - self.base_offset > i64::from(i32::MAX) {
            Some(format!("baseOffset {base} lies outside the segment that starts at {}", self.base_offset))
        } else if last >= expect.next_base {
            Some(format!(
                "offsets {base}..={last} reach into the next segment, which starts at {}",
                expect.next_base
            ))
        } else {
            match prev_next {
                Some(want) if base < want || (base > want && !expect.allow_gaps) => {
                    Some(format!("baseOffset {base} where offset {want} was expected"))
                }
                _ => None,
            }
        };
        match problem {
            Some(p) => Err(self.corrupt(info.position, p)),
            None => Ok(()),
        }
    }

    /// Walks from an index entry's position after checking the entry's claim:
    /// the batch there holds its offset. An index is a hint, never trusted.
    fn hinted_walk(
        &self,
        (claimed, position): (i64, u32),
        end: u64,
        expect: Expect,
        mut f: impl FnMut(BatchInfo) -> bool,
    ) -> Result<()> {
        let mut first = true;
        let mut bad_claim = None;
        self.walk(u64::from(position), end, None, expect, |b| {
            if first {
                first = false;
                if !(b.base_offset <= claimed && claimed <= b.last_offset) {
                    bad_claim = Some(b);
                    return false;
                }
            }
            f(b)
        })?;
        match bad_claim {
            Some(b) => Err(self.corrupt(
                b.position,
                format!(
                    "the index puts offset {claimed} in the batch of offsets {}..={}",
                    b.base_offset, b.last_offset
                ),
            )),
            None => Ok(()),
        }
    }

    /// The first batch whose last offset is >= `offset`, searching below `end`:
    /// from the index's hint for `offset` if it holds up, else from the start.
    pub fn find_batch(&self, offset: i64, end: u64, expect: Expect) -> Result<Option<BatchInfo>> {
        let mut found = None;
        let mut holds = |b: BatchInfo| {
            if b.last_offset >= offset {
                found = Some(b);
                return false;
            }
            true
        };
        let hint = self.indexes.lock().offsets.lookup(offset);
        // A bad hint, or damage after it, costs only a second walk from the
        // start, which reports the damage (the batches passed on the way are
        // all before `offset`, so nothing was found yet).
        if hint.1 > 0 && u64::from(hint.1) < end && self.hinted_walk(hint, end, expect, &mut holds).is_ok() {
            return Ok(found);
        }
        self.walk(0, end, Some(self.base_offset), expect, holds)?;
        Ok(found)
    }

    /// The file range of whole batches from the one holding `offset`, at most
    /// `max_bytes` long but always at least one batch (so a large batch is not
    /// stuck forever), never past `end`.
    pub fn range_from(
        &self,
        offset: i64,
        max_bytes: u64,
        end: u64,
        expect: Expect,
    ) -> Result<Option<FileRange>> {
        self.range_upto(offset, max_bytes, end, expect, i64::MAX)
    }

    /// As `range_from`, but only batches whose base offset is below
    /// `max_offset` (a read bound such as the high watermark); None if the
    /// batch holding `offset` starts at or after it.
    pub fn range_upto(
        &self,
        offset: i64,
        max_bytes: u64,
        end: u64,
        expect: Expect,
        max_offset: i64,
    ) -> Result<Option<FileRange>> {
        let Some(first) = self.find_batch(offset, end, expect)? else { return Ok(None) };
        if first.base_offset >= max_offset {
            return Ok(None);
        }
        let mut length = first.size;
        if first.size < max_bytes {
            self.walk(first.position + first.size, end, Some(first.last_offset + 1), expect, |b| {
                if b.base_offset >= max_offset || length + b.size > max_bytes {
                    return false;
                }
                length += b.size;
                true
            })?;
        }
        Ok(Some(FileRange { path: self.log_path.clone(), position: first.position, length }))
    }

    /// Calls `f` with the header of each batch from the one holding `offset`
    /// up to (not including) the first whose base offset reaches `end_offset`.
    /// Headers only, no CRC (what producer state replay needs: the segment was
    /// checked when it was recovered). Offsets are checked as `Expect::ANY`.
    pub fn for_each_header(
        &self,
        offset: i64,
        end_offset: i64,
        mut f: impl FnMut(BatchInfo, &RecordBatch<'_>),
    ) -> Result<()> {
        let end = self.size();
        let Some(first) = self.find_batch(offset, end, Expect::ANY)? else { return Ok(()) };
        self.walk_headers(first.position, end, None, Expect::ANY, |info, b| {
            if info.base_offset >= end_offset {
                return false;
            }
            f(info, b);
            true
        })
    }

    /// The batch a time index entry (timestamp, offset) names, if the entry holds
    /// up: that batch ends at `offset` and its max timestamp is `timestamp`.
    fn time_entry_batch(&self, timestamp: i64, offset: i64, end: u64) -> Result<Option<BatchInfo>> {
        if offset < self.base_offset {
            return Ok(None);
        }
        Ok(self
            .find_batch(offset, end, Expect::ANY)?
            .filter(|b| b.last_offset == offset && b.max_timestamp == timestamp))
    }

    /// The first batch with a record timestamp >= `timestamp` (by its maxTimestamp).
    pub fn find_by_timestamp(&self, timestamp: i64, end: u64, expect: Expect) -> Result<Option<BatchInfo>> {
        self.find_by_timestamp_from(timestamp, None, end, expect)
    }

    /// As `find_by_timestamp`, but after the batch `after` (to continue a search).
    /// The time index is a hint: its entry is used only if the batch it names
    /// agrees with it, else the search starts at the segment's start.
    pub fn find_by_timestamp_from(
        &self,
        timestamp: i64,
        after: Option<&BatchInfo>,
        end: u64,
        expect: Expect,
    ) -> Result<Option<BatchInfo>> {
        let (start, prev_next) = match after {
            Some(a) => (a.position + a.size, Some(a.last_offset + 1)),
            None => {
                let entry = self.indexes.lock().times_read()?.lookup_entry(timestamp);
                let hinted = match entry {
                    Some((ts, off)) => self.time_entry_batch(ts, off, end).ok().flatten(),
                    None => None,
                };
                match hinted {
                    Some(b) => (b.position, None),
                    None => (0, Some(self.base_offset)),
                }
            }
        };
        let mut found = None;
        let mut damaged = None;
        self.walk(start, end, prev_next, expect, |b| {
            if b.max_timestamp >= timestamp {
                found = Some(b);
                return false;
            }
            // Passed over on its maxTimestamp: that must be the batch's own (CRC).
            match self.read_bytes(b.position, b.size as usize) {
                Ok(bytes) => match RecordBatch::parse(&bytes) {
                    Ok(_) => true,
                    Err(e) => {
                        damaged = Some(self.corrupt(b.position, e.to_string()));
                        false
                    }
                },
                Err(e) => {
                    damaged = Some(e);
                    false
                }
            }
        })?;
        match damaged {
            Some(e) => Err(e),
            None => Ok(found),
        }
    }

    /// The last whole batch below `end`, starting from the last index entry
    /// (if it holds up).
    pub fn last_batch(&self, end: u64, expect: Expect) -> Result<Option<BatchInfo>> {
        let hint = self.indexes.lock().offsets.last_entry();
        if let Some(hint) = hint.filter(|h| h.1 > 0 && u64::from(h.1) < end) {
            let mut last = None;
            if self
                .hinted_walk(hint, end, expect, |b| {
                    last = Some(b);
                    true
                })
                .is_ok()
            {
                return Ok(last);
            }
        }
        let mut last = None;
        self.walk(0, end, Some(self.base_offset), expect, |b| {
            last = Some(b);
            true
        })?;
        Ok(last)
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

/// Writes all of `parts`, back to back, at `offset` of `file` (`pwritev`,
/// continued after a short write or an interrupted call).
fn write_all_vectored_at(file: &File, parts: &[&[u8]], offset: u64) -> std::io::Result<()> {
    use std::io::IoSlice;
    // At most IOV_MAX (1024 on Linux) slices per call.
    const MAX_SLICES: usize = 1024;
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    let mut offset = offset;
    IoSlice::advance_slices(&mut rest, 0); // drops leading empty parts
    while !rest.is_empty() {
        let n = rest.len().min(MAX_SLICES);
        let off = libc::off_t::try_from(offset).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "file offset overflows off_t")
        })?;
        // SAFETY: IoSlice is ABI-compatible with iovec on Unix (std documents
        // it), and `rest[..n]` are live slices borrowed for the call.
        let wrote =
            unsafe { libc::pwritev(file.as_raw_fd(), rest.as_ptr().cast::<libc::iovec>(), n as i32, off) };
        if wrote < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if wrote == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        offset += wrote as u64;
        IoSlice::advance_slices(&mut rest, wrote as usize);
    }
    Ok(())
}

#[cfg(test)]
#[path = "segment_test.rs"]
mod tests;
