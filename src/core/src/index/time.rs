//! `.timeindex` entries: (int64 max timestamp so far, int32 relative offset).

use super::{be_i32, be_i64, Index, IndexEntry};
use crate::error::{Error, Result};

pub struct TimeEntry;

impl IndexEntry for TimeEntry {
    const SIZE: usize = 12;
    /// (timestamp, offset)
    type Value = (i64, i64);
    fn decode(e: &[u8], base_offset: i64) -> (i64, i64) {
        (be_i64(&e[0..8]), base_offset + i64::from(be_i32(&e[8..12])))
    }
    /// (timestamp, relative offset)
    fn raw(e: &[u8]) -> (i64, i64) {
        (be_i64(&e[0..8]), i64::from(be_i32(&e[8..12])))
    }
}

fn timestamp(e: &[u8]) -> i64 {
    be_i64(&e[0..8])
}

impl Index<TimeEntry> {
    /// Full one entry early: the last slot is kept for the entry written when
    /// the segment is sealed.
    pub fn is_full(&self) -> bool {
        self.file.len + 1 >= self.file.max_entries
    }

    /// Makes sure the next `n` `maybe_append`s that add an entry will succeed,
    /// as many as fit (see `OffsetIndex::prepare_appends`).
    pub fn prepare_appends(&mut self, n: usize) -> Result<()> {
        let n = n.min(self.file.room());
        if n == 0 {
            return Ok(()); // maybe_append then adds nothing
        }
        self.file.reserve(n)
    }

    /// Entries that can still be added before the one kept for sealing.
    pub fn room(&self) -> usize {
        self.file.room().saturating_sub(1)
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
        let mut e = [0u8; TimeEntry::SIZE];
        e[0..8].copy_from_slice(&timestamp.to_be_bytes());
        e[8..12].copy_from_slice(&rel.to_be_bytes());
        self.file.push(&e)
    }

    /// The offset of the greatest entry with timestamp <= target (the scan for the
    /// first record with timestamp >= target starts there), or the segment start.
    pub fn lookup(&self, target: i64) -> i64 {
        match self.file.floor(timestamp, target.saturating_sub(1)) {
            Some(i) => self.entry(i).1,
            None => self.base_offset,
        }
    }

    /// The greatest entry (timestamp, offset) with timestamp < target: where the
    /// scan for the first record at or after `target` may start, if it holds up.
    pub fn lookup_entry(&self, target: i64) -> Option<(i64, i64)> {
        self.file.floor(timestamp, target.saturating_sub(1)).map(|i| self.entry(i))
    }

    /// Drops every entry for an offset >= `offset` (log truncation).
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = (0..self.len()).take_while(|&i| self.entry(i).1 < offset).count();
        self.file.truncate_entries(keep);
    }
}
