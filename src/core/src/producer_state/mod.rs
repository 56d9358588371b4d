//! Kafka's `ProducerStateManager`: per producer id, its epoch and its latest
//! batches, so that a fenced producer (older epoch) and a gap in sequences
//! are refused and a retried batch is answered with the offsets of its first
//! copy instead of being written twice (the idempotent producer). Kept by the
//! partition log under its writer lock; `.snapshot` files spare a reopen the
//! scan of the whole log.

mod entry;
pub mod snapshot;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub use entry::{
    decrement_sequence, increment_sequence, next_sequence, BatchMetadata, ProducerBatch, ProducerStateEntry,
    NUM_BATCHES_TO_RETAIN,
};

/// Kafka's default `producer.id.expiration.ms`: a producer idle this long is forgotten.
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;

/// What checking an append's batches found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendCheck {
    /// Every batch may be written.
    Ok,
    /// A batch is a retry of one already in the log: this is its first copy,
    /// and nothing of the append is written (as Kafka answers).
    Duplicate(BatchMetadata),
}

/// How far an append's producer fields are checked (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validation {
    /// A client's batches: duplicates, epochs and sequences.
    Client,
    /// seglog's own writers: only the epoch (Kafka's coordinator origin).
    EpochOnly,
}

pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerStateEntry>,
    /// One past the last offset whose batches the state reflects (Kafka's
    /// `lastMapOffset`).
    map_end: i64,
    /// The offset of the latest snapshot taken (Kafka's `lastSnapOffset`).
    last_snap: i64,
    /// The snapshot files known in `dir`.
    snapshots: BTreeSet<i64>,
    /// Snapshots written without an fsync, synced by the next flush.
    unsynced: Vec<PathBuf>,
}

impl ProducerStateManager {
    /// An empty state for the log in `dir`; `load_snapshot_list` reads what
    /// snapshot files it holds.
    pub fn new(dir: &Path) -> Self {
        ProducerStateManager {
            dir: dir.to_owned(),
            producers: HashMap::new(),
            map_end: 0,
            last_snap: 0,
            snapshots: BTreeSet::new(),
            unsynced: Vec::new(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads which snapshot files `dir` holds.
    pub fn load_snapshot_list(&mut self) -> Result<()> {
        self.snapshots = snapshot::list(&self.dir)?.into_iter().collect();
        Ok(())
    }

    /// Kafka's `removeStraySnapshots`: snapshots that name no segment are
    /// deleted, except the latest one if it lies beyond the last segment's
    /// base (the one a clean shutdown wrote at the log end).
    pub fn remove_stray_snapshots(&mut self, segment_bases: &[i64]) -> Result<()> {
        self.load_snapshot_list()?;
        let max_base = segment_bases.iter().copied().max();
        let strays: Vec<i64> =
            self.snapshots.iter().copied().filter(|o| segment_bases.binary_search(o).is_err()).collect();
        if let Some((&latest, older)) = strays.split_last() {
            for &o in older {
                self.delete_snapshot(o)?;
            }
            if max_base.is_some_and(|m| latest < m) {
                self.delete_snapshot(latest)?;
            }
        }
        Ok(())
    }

    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// Every producer's state, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }

    pub fn map_end(&self) -> i64 {
        self.map_end
    }

    pub fn set_map_end(&mut self, offset: i64) {
        self.map_end = offset;
    }

    /// The offsets of the snapshot files, oldest first.
    pub fn snapshot_offsets(&self) -> Vec<i64> {
        self.snapshots.iter().copied().collect()
    }

    pub fn latest_snapshot(&self) -> Option<i64> {
        self.snapshots.iter().next_back().copied()
    }

    /// Checks the batches of one append, in order, against the state and
    /// against each other; nothing is changed. A retry of a batch in the log
    /// (checked for client appends only, as Kafka) ends the check.
    pub fn check_append(&self, batches: &[ProducerBatch], validation: Validation) -> Result<AppendCheck> {
        // Each producer's state with the append's earlier batches applied, and
        // its epoch before the append.
        let mut updated: HashMap<i64, (ProducerStateEntry, i16)> = HashMap::new();
        for b in batches {
            let committed = self.producers.get(&b.producer_id);
            if validation == Validation::Client {
                if let Some(dup) = committed.and_then(|e| e.find_duplicate(b)) {
                    return Ok(AppendCheck::Duplicate(dup));
                }
            }
            let (entry, committed_epoch) = updated.entry(b.producer_id).or_insert_with(|| {
                let e = committed.cloned().unwrap_or_else(|| ProducerStateEntry::empty(b.producer_id));
                let epoch = e.epoch;
                (e, epoch)
            });
            entry.check_epoch(b)?;
            if validation == Validation::Client {
                entry.check_sequence(b, *committed_epoch)?;
            }
            entry.apply(b);
        }
        Ok(AppendCheck::Ok)
    }

    /// Takes a written batch in, unchecked (an accepted append, or replay of
    /// the log), and moves the map end past it.
    pub fn apply(&mut self, b: &ProducerBatch) {
        self.producers
            .entry(b.producer_id)
            .or_insert_with(|| ProducerStateEntry::empty(b.producer_id))
            .apply(b);
        self.map_end = self.map_end.max(b.last_offset + 1);
    }

    /// Forgets producers idle for `expiration_ms` or longer (by the timestamp
    /// of their last batch, as Kafka). Returns how many went.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| !is_expired(e, now_ms, expiration_ms));
        before - self.producers.len()
    }

    /// Forgets every producer and snapshot, starting over at `offset` (Kafka's
    /// `truncateFullyAndStartAt`).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<()> {
        self.producers.clear();
        for o in self.snapshot_offsets() {
            self.delete_snapshot(o)?;
        }
        self.last_snap = 0;
        self.map_end = offset;
        Ok(())
    }

    /// Kafka's `truncateAndReload`: snapshots above `log_end` (their offsets
    /// are gone) or at or below `log_start` are deleted; unless the state
    /// already ends at `log_end`, it is reloaded from the latest snapshot left
    /// (or emptied at `log_start`). The caller replays the log from
    /// `map_end()` on. A damaged snapshot is deleted, never trusted: the next
    /// older one is tried. Returns the damaged ones' errors (for a report).
    pub fn truncate_and_reload(
        &mut self,
        log_start: i64,
        log_end: i64,
        now_ms: i64,
        expiration_ms: i64,
    ) -> Result<Vec<Error>> {
        for o in self.snapshot_offsets() {
            if o > log_end || o <= log_start {
                self.delete_snapshot(o)?;
            }
        }
        let mut damaged = Vec::new();
        if log_end == self.map_end {
            self.last_snap = self.latest_snapshot().unwrap_or(log_start);
            self.map_end = self.map_end.max(log_start);
            return Ok(damaged);
        }
        self.producers.clear();
        while let Some(o) = self.latest_snapshot() {
            match snapshot::read(&snapshot::path(&self.dir, o)) {
                Ok(entries) => {
                    for e in entries {
                        if !is_expired(&e, now_ms, expiration_ms) {
                            self.producers.insert(e.producer_id, e);
                        }
                    }
                    self.last_snap = o;
                    self.map_end = o;
                    return Ok(damaged);
                }
                Err(e @ Error::CorruptFile { .. }) => {
                    damaged.push(e);
                    self.delete_snapshot(o)?;
                }
                Err(e) => return Err(e),
            }
        }
        self.last_snap = log_start;
        self.map_end = log_start;
        Ok(damaged)
    }

    /// Writes a snapshot at the map end, if there is none there or later
    /// (Kafka's `takeSnapshot`). Without `sync` the file joins those the next
    /// flush fsyncs. Returns whether one was written.
    pub fn take_snapshot(&mut self, sync: bool) -> Result<bool> {
        if self.map_end <= self.last_snap {
            return Ok(false);
        }
        let offset = self.map_end;
        let path = snapshot::path(&self.dir, offset);
        let mut entries: Vec<&ProducerStateEntry> = self.producers.values().collect();
        entries.sort_unstable_by_key(|e| e.producer_id);
        snapshot::write(&path, &snapshot::encode(entries.into_iter()), sync)?;
        if !sync {
            self.unsynced.push(path);
        }
        self.snapshots.insert(offset);
        self.last_snap = offset;
        Ok(true)
    }

    /// The snapshots written without an fsync since the last call.
    pub fn take_unsynced(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.unsynced)
    }

    /// Deletes the snapshot at `offset` (a segment based there went).
    pub fn delete_snapshot(&mut self, offset: i64) -> Result<()> {
        self.snapshots.remove(&offset);
        let path = snapshot::path(&self.dir, offset);
        self.unsynced.retain(|p| *p != path);
        snapshot::remove(&path)
    }

    /// Each producer's last data offset: the batch the cleaner must keep so
    /// that a rebuild from the log still knows the producer's last sequence.
    pub fn last_data_offsets(&self) -> HashMap<i64, i64> {
        self.producers
            .values()
            .filter(|e| e.last_data_offset() >= 0)
            .map(|e| (e.producer_id, e.last_data_offset()))
            .collect()
    }
}

fn is_expired(e: &ProducerStateEntry, now_ms: i64, expiration_ms: i64) -> bool {
    e.current_txn_first_offset.is_none() && now_ms.saturating_sub(e.last_timestamp) >= expiration_ms
}

#[cfg(test)]
#[path = "producer_state_test.rs"]
mod tests;
