//! The storage both index kinds share: a file of fixed-size, sorted entries,
//! memory-mapped and preallocated (sparse) for the writer, with disk blocks
//! allocated a chunk ahead of the entries, so that a full disk is an error
//! naming the file and never a SIGBUS; read into memory for a read-only opener
//! in another process.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use memmap2::MmapMut;

use crate::error::{Error, Result};

enum Entries {
    /// The writer's view: a shared mapping of the preallocated file.
    Mapped(MmapMut),
    /// A reader's private copy of the entries known so far.
    Loaded(Vec<u8>),
}

/// The storage shared by both index kinds: fixed-size, sorted entries.
pub(super) struct IndexFile {
    /// No descriptor is kept open (Kafka's indexes close their file once
    /// mapped): a partition holds one open file, its active segment's log,
    /// plus one per older segment. What needs the file opens it by path.
    path: PathBuf,
    entries: Entries,
    entry_size: usize,
    pub(super) len: usize,
    pub(super) max_entries: usize,
    /// Bytes from the start of the file known to have disk blocks behind them:
    /// a mapped page without one faults (SIGBUS) when the disk is full.
    allocated: usize,
}

/// How far ahead of its entries a writable index gets disk blocks at a time.
const ALLOCATE_CHUNK: usize = 64 * 1024;

/// Allocates disk blocks for `len` bytes of `file` from `offset` (inside its length).
fn allocate(file: &File, offset: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let too_big = |_| std::io::Error::from_raw_os_error(libc::EFBIG);
    let (offset, len) =
        (libc::off_t::try_from(offset).map_err(too_big)?, libc::off_t::try_from(len).map_err(too_big)?);
    loop {
        // SAFETY: `file` is an open descriptor for the call's duration; the
        // call touches no memory of ours.
        match unsafe { libc::posix_fallocate(file.as_raw_fd(), offset, len) } {
            0 => return Ok(()),
            libc::EINTR => continue,
            err => return Err(std::io::Error::from_raw_os_error(err)),
        }
    }
}

/// What a reader's first load of an index reads at once (8,192 entries of an
/// offset index: a 1 GiB segment of 128 KiB batches, or 32 MiB at Kafka's
/// 4 KiB index interval).
const FIRST_READ: usize = 64 * 1024;

/// Reads into `buf` from `position` until it is full or the file ends; the
/// bytes read.
fn read_up_to(file: &File, buf: &mut [u8], position: u64) -> std::io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match file.read_at(&mut buf[at..], position + at as u64) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// Reads `buf.len()` bytes at `position`; false if the file ends first.
fn read_exact_at(file: &File, buf: &mut [u8], position: u64) -> std::io::Result<bool> {
    match file.read_exact_at(buf, position) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

impl IndexFile {
    pub(super) fn open_writable(path: &Path, entry_size: usize, max_bytes: usize) -> Result<Self> {
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
        // Sparse: blocks are allocated as entries need them (`reserve_next`).
        file.set_len((max_entries * entry_size) as u64).map_err(Error::at(path))?;
        // SAFETY: the store's lock file guarantees that this process is the only
        // writer of this file, and it is never shrunk while the mapping lives
        // (`trim` drops the mapping first). Readers in other processes use pread.
        // The mapping stays valid once the descriptor is closed.
        let map = unsafe { MmapMut::map_mut(&file) }.map_err(Error::at(path))?;
        drop(file);
        // No read-ahead on a fault: the kernel would otherwise fill its whole
        // read-ahead window (8 MiB on some virtual disks) of the preallocated,
        // mostly empty file with zeroed pages at the first touch of an entry,
        // about 13 % of a bulk writer's time. Entries are written one page
        // after another and looked up by binary search; neither gains from it.
        // Only advice: a kernel that ignores it costs speed, not correctness.
        let _ = map.advise(memmap2::Advice::Random);
        let mut idx = IndexFile {
            path: path.to_owned(),
            entries: Entries::Mapped(map),
            entry_size,
            len,
            max_entries,
            allocated: 0,
        };
        // A preallocated file from a crash holds trailing zero entries; keep only
        // the real ones (the caller sanity-checks them against the log).
        idx.len = idx.count_nonzero_prefix(len);
        idx.allocated = idx.len * entry_size; // written, so backed
        Ok(idx)
    }

    pub(super) fn open_read_only(path: &Path, entry_size: usize) -> Result<Self> {
        let file = File::open(path).map_err(Error::at(path))?;
        let mut idx = IndexFile::empty(path, entry_size);
        idx.read_entries(&file)?;
        Ok(idx)
    }

    pub(super) fn empty(path: &Path, entry_size: usize) -> Self {
        IndexFile {
            path: path.to_owned(),
            entries: Entries::Loaded(Vec::new()),
            entry_size,
            len: 0,
            max_entries: usize::MAX,
            allocated: 0,
        }
    }

    /// Re-reads the file's entries (a reader following a live writer).
    pub(super) fn reload(&mut self) -> Result<()> {
        if !matches!(self.entries, Entries::Loaded(_)) {
            return Ok(());
        }
        match File::open(&self.path) {
            Ok(file) => self.read_entries(&file),
            Err(_) => Ok(()), // not created yet, or deleted: what was read stays
        }
    }

    fn read_entries(&mut self, file: &File) -> Result<()> {
        let Entries::Loaded(buf) = &mut self.entries else { return Ok(()) };
        let es = self.entry_size;
        let size = file.metadata().map_err(Error::at(&self.path))?.len() as usize;
        let count = size / es;
        // The entries read before are kept if the last of them is still there
        // as it was (a writer appends to an index, or cuts it back and appends
        // again), and only what follows is read: a reader catching up with a
        // writer reads the new entries, not the whole index again each time.
        // An entry is a hint that every lookup checks against the log, so one
        // left stale by a cut rewritten identically costs a walk, not data.
        let mut done = 0;
        if self.len > 0 && es <= 16 && self.len <= count && self.len * es <= buf.len() {
            let last = (self.len - 1) * es;
            let mut was = [0u8; 16];
            let was = &mut was[..es];
            if read_exact_at(file, was, last as u64).map_err(Error::at(&self.path))?
                && was[..] == buf[last..last + es]
            {
                done = self.len;
            }
        }
        if done == 0 && count > 0 {
            // A first load reads the file's first stretch in one call: most
            // indexes end inside it, and finding that end with single-entry
            // reads took ~20 calls. Only a longer one goes on as below.
            let first = count.min(FIRST_READ / es);
            if self.read_range(file, 0, first)? < first || first == count {
                return Ok(());
            }
            done = first;
        }
        // A live writer's index is preallocated (10 MiB by default) with its
        // entries a prefix. Past what is known, where that prefix ends is found
        // first, with reads of single entries, and then it alone is read, into
        // a buffer of its size: reading ahead in chunks faulted in fresh pages
        // for zeros and copied the buffer as it grew (a third of a cold
        // lookup's page faults, with a 1 MiB read-ahead).
        let end = self.filled_end(file, done, count)?;
        self.read_range(file, done, end)?;
        Ok(())
    }

    /// Reads entries `from..to` in after the first `from` held, and takes the
    /// filled prefix of what the copy then holds as the entries; their number.
    fn read_range(&mut self, file: &File, from: usize, to: usize) -> Result<usize> {
        let es = self.entry_size;
        let Entries::Loaded(buf) = &mut self.entries else { return Ok(self.len) };
        buf.truncate(from * es);
        buf.reserve_exact((to - from) * es);
        buf.resize(to * es, 0);
        // A file cut back since ends the read early: what was read is all there is.
        let at = from * es
            + read_up_to(file, &mut buf[from * es..], (from * es) as u64).map_err(Error::at(&self.path))?;
        buf.truncate(at - at % es);
        let n = buf.len() / es;
        // A cut while this read may have left zeros inside what was read.
        self.len = self.count_nonzero_prefix(n);
        if let Entries::Loaded(buf) = &mut self.entries {
            buf.truncate(self.len * es);
        }
        Ok(self.len)
    }

    /// The number of entries the file's filled prefix holds, knowing that the
    /// first `known` are filled and the file has room for `count`: the whole file
    /// when its last entry is filled (a sealed index), else the first all-zero
    /// entry, found by doubling steps from `known` and then halving.
    fn filled_end(&self, file: &File, known: usize, count: usize) -> Result<usize> {
        let es = self.entry_size;
        let is_zero = |i: usize| -> Result<bool> {
            let mut e = [0u8; 16];
            let e = &mut e[..es.min(16)];
            let whole = read_exact_at(file, e, (i * es) as u64).map_err(Error::at(&self.path))?;
            Ok(!whole || e.iter().all(|&b| b == 0))
        };
        if known >= count || is_zero(known)? {
            return Ok(known.min(count));
        }
        if !is_zero(count - 1)? {
            return Ok(count);
        }
        // Filled: [0, lo); zero: hi.
        let (mut lo, mut step) = (known + 1, 256);
        let mut hi = count - 1;
        while lo + step < hi {
            if is_zero(lo + step)? {
                hi = lo + step;
                break;
            }
            lo += step + 1;
            step *= 2;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if is_zero(mid)? {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    /// The bytes a reader's copy of the entries holds room for.
    #[cfg(test)]
    pub(super) fn loaded_capacity(&self) -> usize {
        match &self.entries {
            Entries::Mapped(_) => 0,
            Entries::Loaded(v) => v.capacity(),
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        match &self.entries {
            Entries::Mapped(m) => &m[..],
            Entries::Loaded(v) => &v[..],
        }
    }

    pub(super) fn entry(&self, i: usize) -> &[u8] {
        &self.bytes()[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Entries are written in order and no real entry is all zeros (a segment's
    /// first batch is never indexed), so the filled prefix ends at the first zero entry.
    pub(super) fn count_nonzero_prefix(&self, upper: usize) -> usize {
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

    pub(super) fn is_full(&self) -> bool {
        self.len >= self.max_entries
    }

    /// Entries that can still be added.
    pub(super) fn room(&self) -> usize {
        self.max_entries.saturating_sub(self.len)
    }

    /// Makes sure the next entry can be written: the index takes entries and
    /// the entry's bytes have disk blocks behind them, so writing it through the
    /// mapping cannot fault on a full disk. Allocates a chunk ahead at a time.
    pub(super) fn reserve_next(&mut self) -> Result<()> {
        self.reserve(1)
    }

    /// Makes sure `n` more entries have room and disk blocks.
    pub(super) fn reserve(&mut self, n: usize) -> Result<()> {
        let Entries::Mapped(map) = &self.entries else {
            return Err(Error::ReadOnly("writing an index"));
        };
        let end = (self.len + n) * self.entry_size;
        if end > map.len() {
            return Err(Error::ReadOnly("writing a full index"));
        }
        if end > self.allocated {
            let upto = (self.allocated + ALLOCATE_CHUNK).max(end).min(map.len());
            OpenOptions::new()
                .write(true)
                .open(&self.path)
                .and_then(|file| allocate(&file, self.allocated, upto - self.allocated))
                .map_err(Error::at(&self.path))?;
            self.allocated = upto;
        }
        Ok(())
    }

    pub(super) fn push(&mut self, entry: &[u8]) -> Result<()> {
        self.reserve_next()?;
        let Entries::Mapped(map) = &mut self.entries else {
            return Err(Error::ReadOnly("writing an index"));
        };
        let at = self.len * self.entry_size;
        map[at..at + self.entry_size].copy_from_slice(entry);
        self.len += 1;
        Ok(())
    }

    /// Index of the greatest entry whose key is <= target, by binary search.
    pub(super) fn floor(&self, key: impl Fn(&[u8]) -> i64, target: i64) -> Option<usize> {
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

    pub(super) fn truncate_entries(&mut self, n: usize) {
        let n = n.min(self.len);
        if let Entries::Mapped(map) = &mut self.entries {
            map[n * self.entry_size..self.len * self.entry_size].fill(0);
        }
        self.len = n;
    }

    pub(super) fn flush(&self) -> Result<()> {
        if let Entries::Mapped(m) = &self.entries {
            m.flush().map_err(Error::at(&self.path))?;
        }
        Ok(())
    }

    /// Shrinks the file to exactly its entries and stops accepting new ones:
    /// what Kafka does when a segment goes inactive or the log closes.
    pub(super) fn trim(&mut self) -> Result<()> {
        if !matches!(self.entries, Entries::Mapped(_)) {
            return Ok(());
        }
        self.flush()?;
        let keep = self.len;
        let saved = self.bytes()[..self.len * self.entry_size].to_vec();
        self.entries = Entries::Loaded(saved);
        self.max_entries = self.len;
        OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|f| {
                f.set_len((keep * self.entry_size) as u64)?;
                f.sync_data()
            })
            .map_err(Error::at(&self.path))
    }

    /// Makes the entries durable: msync of the mapping (a loaded index was
    /// made durable when it was trimmed, or is a reader's copy).
    pub(super) fn sync(&self) -> Result<()> {
        self.flush()
    }
}
