//! Kafka's `LeaderEpochFileCache`: for each leader epoch the offset its
//! leader's first batch got, so a follower (and a consumer, KIP-320) can ask
//! where an epoch ended and cut back what a former leader wrote past it. Kept
//! by the partition log beside its segments, truncated with them, and written
//! to `leader-epoch-checkpoint` (fsynced) on every change.

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::error::Result;

/// Kafka's `UNDEFINED_EPOCH`: no epoch known.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`: no end offset known.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One epoch and the offset its first batch got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

pub struct LeaderEpochFileCache {
    /// `None`: kept in memory only (a read-only opener's copy).
    path: Option<PathBuf>,
    /// Epochs rising, start offsets not falling.
    entries: Vec<EpochEntry>,
}

impl LeaderEpochFileCache {
    /// A cache holding `entries` (which must be in order) that writes its
    /// changes to `path`.
    pub fn new(path: &Path, entries: Vec<EpochEntry>) -> Self {
        LeaderEpochFileCache { path: Some(path.to_owned()), entries }
    }

    /// A cache that is never written (a read-only opener's view of the file).
    pub fn in_memory(entries: Vec<EpochEntry>) -> Self {
        LeaderEpochFileCache { path: None, entries }
    }

    /// Reads `path`: `Ok(None)` if missing, an error if damaged.
    pub fn read(path: &Path) -> Result<Option<Vec<EpochEntry>>> {
        Ok(checkpoint::read_leader_epochs(path)?
            .map(|v| v.into_iter().map(|(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect()))
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }
    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` began at `start_offset` (Kafka's `assign`):
    /// nothing changes for the latest epoch again at the same or a later
    /// offset, or for a negative epoch or offset (a batch no leader stamped).
    /// Otherwise entries the new one contradicts (an epoch not older, or a
    /// start offset not lower) are dropped from the end first, so epochs and
    /// offsets keep rising. Returns whether the cache changed; the file is
    /// written when it did.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool> {
        if epoch < 0 || start_offset < 0 {
            return Ok(false);
        }
        if let Some(last) = self.latest_entry() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return Ok(false);
            }
        }
        while self.entries.last().is_some_and(|e| e.epoch >= epoch || e.start_offset >= start_offset) {
            self.entries.pop();
        }
        self.entries.push(EpochEntry { epoch, start_offset });
        self.flush()?;
        Ok(true)
    }

    /// Where `requested` ended, as Kafka answers OffsetForLeaderEpoch
    /// (`endOffsetFor`): the latest epoch ends at `log_end`; an older one at
    /// the start of the next higher epoch, paired with the largest epoch at or
    /// below the requested one (the requested epoch itself if it is below the
    /// first); an unknown later one, `UNDEFINED_EPOCH` itself, or any epoch of
    /// an empty cache gets `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`.
    pub fn end_offset_for(&self, requested: i32, log_end: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|e| e.epoch <= requested) {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested, higher.start_offset),
        }
    }

    /// Drops the entries of epochs that began at or after `end_offset`, as
    /// the log is cut back to it (Kafka's `truncateFromEnd`).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<()> {
        if end_offset < 0 || self.latest_entry().is_none_or(|e| e.start_offset < end_offset) {
            return Ok(());
        }
        self.entries.retain(|e| e.start_offset < end_offset);
        self.flush()
    }

    /// Drops the entries wholly below `start_offset`, as the log start moves
    /// up to it, and moves the start of the epoch holding it up to it (Kafka's
    /// `truncateFromStart`).
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<()> {
        if start_offset < 0 || self.earliest_entry().is_none_or(|e| e.start_offset >= start_offset) {
            return Ok(());
        }
        let below = self.entries.iter().take_while(|e| e.start_offset <= start_offset).count();
        let holder = self.entries[below - 1].epoch;
        self.entries.drain(..below);
        self.entries.insert(0, EpochEntry { epoch: holder, start_offset });
        self.flush()
    }

    /// Replaces every entry (a rebuild from the log) and writes the file.
    pub fn replace(&mut self, entries: Vec<EpochEntry>) -> Result<()> {
        self.entries = entries;
        self.flush()
    }

    /// Writes the file (atomically, fsynced) if this cache has one.
    pub fn flush(&self) -> Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let pairs: Vec<(i32, i64)> = self.entries.iter().map(|e| (e.epoch, e.start_offset)).collect();
        checkpoint::write_leader_epochs(path, &pairs)
    }
}

#[cfg(test)]
#[path = "leader_epoch_test.rs"]
mod tests;
