//! `.index` entries: (int32 offset relative to the segment base, int32 position).

use super::{be_i32, Index, IndexEntry};
use crate::error::{Error, Result};

pub struct OffsetEntry;

impl IndexEntry for OffsetEntry {
    const SIZE: usize = 8;
    /// (offset, position in the log)
    type Value = (i64, u32);
    fn decode(e: &[u8], base_offset: i64) -> (i64, u32) {
        (base_offset + i64::from(be_i32(&e[0..4])), be_i32(&e[4..8]) as u32)
    }
    /// (relative offset, position)
    fn raw(e: &[u8]) -> (i64, i64) {
        (i64::from(be_i32(&e[0..4])), i64::from(be_i32(&e[4..8])))
    }
}

fn relative(e: &[u8]) -> i64 {
    i64::from(be_i32(&e[0..4]))
}

impl Index<OffsetEntry> {
    pub fn is_full(&self) -> bool {
        self.file.is_full()
    }

    /// Makes sure the next `n` `append`s will succeed, the last (largest) for
    /// `offset`: the offsets fit and the entries have room and disk blocks (a
    /// writer calls this before it writes the batches the entries are for).
    pub fn prepare_appends(&mut self, offset: i64, n: usize) -> Result<()> {
        i32::try_from(offset - self.base_offset)
            .map_err(|_| Error::InvalidArgument(format!("offset {offset} overflows the index")))?;
        self.file.reserve(n)
    }

    /// Entries that can still be added.
    pub fn room(&self) -> usize {
        self.file.room()
    }

    pub fn append(&mut self, offset: i64, position: u32) -> Result<()> {
        let rel = i32::try_from(offset - self.base_offset)
            .map_err(|_| Error::InvalidArgument(format!("offset {offset} overflows the index")))?;
        let mut e = [0u8; OffsetEntry::SIZE];
        e[0..4].copy_from_slice(&rel.to_be_bytes());
        e[4..8].copy_from_slice(&position.to_be_bytes());
        self.file.push(&e)
    }

    /// The (offset, position) of the greatest indexed offset <= target, or the
    /// segment start when no entry qualifies.
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let rel = target.saturating_sub(self.base_offset);
        match self.file.floor(relative, rel) {
            Some(i) => self.entry(i),
            None => (self.base_offset, 0),
        }
    }

    /// Drops every entry for an offset >= `offset` (log truncation).
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = self.file.floor(relative, offset - self.base_offset - 1).map_or(0, |i| i + 1);
        self.file.truncate_entries(keep);
    }

    /// Drops entries whose position lies past `size` (a truncated or torn log).
    pub fn truncate_to_position(&mut self, size: u32) {
        let keep = (0..self.len()).take_while(|&i| self.entry(i).1 < size).count();
        self.file.truncate_entries(keep);
    }
}
