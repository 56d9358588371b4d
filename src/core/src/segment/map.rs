//! A read-only memory map of a segment's log file, for the process that writes
//! it: reads below the committed size are served from the map (a copy from the
//! page cache with no system call, or no copy at all), which makes a random
//! lookup a few microseconds instead of a 16 KiB `pread`.
//!
//! A mapped page past the end of its file raises SIGBUS when touched, so the
//! map is used only where nothing but this process can shorten the file (the
//! writer's own segments; a reader process never maps), only for bytes below
//! the committed size, and every shortening of the file (`truncate_to`,
//! recovery's cut) holds the map's write lock while it sets the new length and
//! size: a read holds the read lock from its bounds check to its last byte.
//! The active segment grows under the map: the map covers the file's length
//! rounded up, and is remade larger when a read reaches past it (mapping past
//! the end of a file is allowed; only touching those pages is not).

use std::fs::File;

use memmap2::{Mmap, MmapOptions, UncheckedAdvice};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockWriteGuard};

/// The map covers the file rounded up to this, so that an active segment is
/// remapped once per this much growth.
const MAP_STEP: u64 = 64 << 20;

/// What a page fault in a file map brings in around the page touched (Linux's
/// `fault_around_bytes`, 64 KiB): released ranges are widened to it.
const FAULT_AROUND: u64 = 64 << 10;

pub(super) struct LogMap {
    enabled: bool,
    map: RwLock<Option<Mmap>>,
    /// The lowest position read through the map since the last `release`
    /// (u64::MAX: none): where the next release starts, so that what a
    /// lookup walked before the range it found goes too.
    touched_from: AtomicU64,
}

/// Held while the file is made shorter: no mapped read runs meanwhile.
#[must_use]
pub(super) struct Shortening<'a> {
    _guard: RwLockWriteGuard<'a, Option<Mmap>>,
}

impl LogMap {
    pub(super) fn new(enabled: bool) -> Self {
        LogMap { enabled, map: RwLock::new(None), touched_from: AtomicU64::new(u64::MAX) }
    }

    /// `f` on the bytes `[position, position + len)` of `file`, if the map can
    /// serve them: `committed()` (read under the lock) must cover them. `f` is
    /// handed back if not (the map is off, or the bytes are not all committed):
    /// the caller reads them another way.
    pub(super) fn with<R, F: FnOnce(&[u8]) -> R>(
        &self,
        file: &File,
        committed: impl Fn() -> u64,
        position: u64,
        len: usize,
        f: F,
    ) -> Result<R, F> {
        let Some(end) = position.checked_add(len as u64).filter(|_| self.enabled) else { return Err(f) };
        {
            let guard = self.map.read();
            if end > committed() {
                return Err(f);
            }
            if let Some(m) = guard.as_ref().filter(|m| m.len() as u64 >= end) {
                self.touched_from.fetch_min(position, Ordering::Relaxed);
                return Ok(f(&m[position as usize..end as usize]));
            }
        }
        let mut guard = self.map.write();
        if end > committed() {
            return Err(f);
        }
        if guard.as_ref().is_none_or(|m| (m.len() as u64) < end) {
            let Ok(len) = usize::try_from(end.div_ceil(MAP_STEP).saturating_mul(MAP_STEP)) else {
                return Err(f);
            };
            // SAFETY: the pages read are below the committed size, which is at
            // most the file's length; the file is shortened only by this process,
            // under the write lock that this map's reads exclude (`shorten`); a
            // page past the end of the file is never touched.
            match unsafe { MmapOptions::new().len(len).map(file) } {
                Ok(m) => *guard = Some(m),
                Err(_) => return Err(f),
            }
        }
        let guard = RwLockWriteGuard::downgrade(guard);
        match guard.as_ref() {
            Some(m) => {
                self.touched_from.fetch_min(position, Ordering::Relaxed);
                Ok(f(&m[position as usize..end as usize]))
            }
            None => Err(f),
        }
    }

    /// Unmaps from this process the pages holding `[position, position + len)`
    /// and whatever was read through the map below it since the last release
    /// (`MADV_DONTNEED`): the page cache keeps them and a later read through
    /// the map faults them in again. For bytes read through the map only to
    /// find their batches on their way to a socket (and the walk from an
    /// index entry to them), which would otherwise stay in the process's
    /// resident set for as long as the map lives.
    ///
    /// The range is widened to whole `FAULT_AROUND` blocks: a fault in a file
    /// map brings in the block around the page touched.
    pub(super) fn release(&self, position: u64, len: u64) {
        let guard = self.map.read();
        let Some(m) = guard.as_ref() else { return };
        let start = self.touched_from.swap(u64::MAX, Ordering::Relaxed).min(position);
        let Ok(from) = usize::try_from(start / FAULT_AROUND * FAULT_AROUND) else { return };
        let end = position.saturating_add(len).div_ceil(FAULT_AROUND).saturating_mul(FAULT_AROUND);
        let to = usize::try_from(end).unwrap_or(usize::MAX).min(m.len());
        if to > from {
            // SAFETY: the map is a read-only shared map of a file, whose pages
            // MADV_DONTNEED only unmaps: a read after it (including one holding
            // a borrow of the map now, under the read lock as this is) sees the
            // file's same bytes again from the page cache. Nothing is freed.
            let _ = unsafe { m.unchecked_advise_range(UncheckedAdvice::DontNeed, from, to - from) };
        }
    }

    /// Taken before the file is cut shorter and held until the new size is
    /// published; the old map goes (reads after it map the file again).
    pub(super) fn shorten(&self) -> Shortening<'_> {
        let mut guard = self.map.write();
        *guard = None;
        Shortening { _guard: guard }
    }
}

#[cfg(test)]
#[path = "map_test.rs"]
mod tests;
