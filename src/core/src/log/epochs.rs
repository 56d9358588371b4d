//! The log's side of leader epochs and the high watermark: the epoch cache
//! loaded (or rebuilt from the batches) at open, the epoch a leader stamps,
//! Kafka's OffsetForLeaderEpoch answer, and a follower's high watermark.

use std::sync::atomic::Ordering;

use super::{PartitionLog, LEADER_EPOCH, LEADER_EPOCH_CHECKPOINT};
use crate::error::{Error, Result};
use crate::leader_epoch::{EpochEntry, LeaderEpochFileCache};

impl PartitionLog {
    /// Loads `leader-epoch-checkpoint`, or rebuilds it from the batches'
    /// partitionLeaderEpoch when it is missing or damaged (returns whether it
    /// was damaged), then fits it to the log recovery left: entries from `end`
    /// on go, the first moves up to `start`. The log leads from its latest
    /// epoch; an empty cache gets that epoch at the log end (Kafka's
    /// `makeLeader`), so a new embedded log's file reads `0 0`, as always.
    pub(super) fn load_leader_epochs(&self, start: i64, end: i64) -> Result<bool> {
        let path = self.dir.join(LEADER_EPOCH_CHECKPOINT);
        let (loaded, damaged) = match LeaderEpochFileCache::read(&path) {
            Ok(Some(entries)) => (Some(entries), false),
            Ok(None) => (None, false),
            Err(Error::CorruptFile { .. }) => (None, true),
            Err(e) => return Err(e),
        };
        let entries = match &loaded {
            Some(entries) => entries.clone(),
            None => self.epochs_from_batches(end)?,
        };
        // Fitted in memory, so that the file is written once, and only if
        // it changed (most opens change nothing).
        let mut fitted = LeaderEpochFileCache::in_memory(entries);
        fitted.truncate_from_end(end)?;
        fitted.truncate_from_start(start)?;
        let epoch = fitted.latest_epoch().unwrap_or(LEADER_EPOCH).max(LEADER_EPOCH);
        if fitted.is_empty() {
            fitted.assign(epoch, end)?;
        }
        let cache = LeaderEpochFileCache::new(&path, fitted.entries().to_vec());
        if loaded.as_deref() != Some(cache.entries()) {
            cache.flush()?;
        }
        self.leader_epoch.store(epoch, Ordering::Release);
        *self.epochs.lock() = cache;
        Ok(damaged)
    }

    /// A read-only opener's copy of the writer's cache: what the file says
    /// now, or nothing if it is missing or damaged. It is not followed later.
    pub(super) fn load_leader_epochs_read_only(&self) {
        let path = self.dir.join(LEADER_EPOCH_CHECKPOINT);
        let entries = LeaderEpochFileCache::read(&path).ok().flatten().unwrap_or_default();
        let epoch = entries.last().map_or(LEADER_EPOCH, |e| e.epoch);
        self.leader_epoch.store(epoch, Ordering::Release);
        *self.epochs.lock() = LeaderEpochFileCache::in_memory(entries);
    }

    /// The epochs as the batches below `end` were stamped, by Kafka's
    /// `assign` rules. A damaged stretch ends what a segment can tell.
    fn epochs_from_batches(&self, end: i64) -> Result<Vec<EpochEntry>> {
        let mut cache = LeaderEpochFileCache::in_memory(Vec::new());
        for seg in self.segments() {
            let mut seen = Vec::new();
            let _ = seg.for_each_header(seg.base_offset, end, |info, b| {
                seen.push((b.partition_leader_epoch(), info.base_offset));
            });
            for (epoch, offset) in seen {
                cache.assign(epoch, offset)?;
            }
        }
        Ok(cache.entries().to_vec())
    }

    /// The epoch stamped on batches appended as leader.
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(Ordering::Acquire)
    }

    /// Makes `epoch` the one this log stamps as leader and records that it
    /// begins at the log end (Kafka's `makeLeader`). An epoch older than the
    /// log's current one, or than any batch it holds, is refused.
    pub fn set_leader_epoch(&self, epoch: i32) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("set the leader epoch"));
        }
        let _w = self.writer.lock();
        self.check_open()?;
        let newest = self.epochs.lock().latest_epoch().unwrap_or(LEADER_EPOCH).max(self.leader_epoch());
        if epoch < newest {
            return Err(Error::InvalidArgument(format!(
                "leader epoch {epoch} for {}-{}: expected {newest} or later, the newest this log has seen",
                self.topic, self.partition
            )));
        }
        self.epochs.lock().assign(epoch, self.log_end_offset())?;
        self.leader_epoch.store(epoch, Ordering::Release);
        self.high_watermark_kept.store(true, Ordering::Release);
        Ok(())
    }

    /// The entries of the leader epoch cache, oldest first.
    pub fn leader_epoch_entries(&self) -> Vec<EpochEntry> {
        self.epochs.lock().entries().to_vec()
    }

    /// The latest epoch in the cache (Kafka's `latestEpoch`).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.lock().latest_epoch()
    }

    /// `(epoch, end offset)` for `requested`, as Kafka's OffsetForLeaderEpoch
    /// answers it (`LeaderEpochFileCache.endOffsetFor` with this log's end):
    /// `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)` for an epoch it does not know.
    pub fn offset_for_leader_epoch(&self, requested: i32) -> (i32, i64) {
        let cache = self.epochs.lock();
        cache.end_offset_for(requested, self.log_end_offset())
    }

    /// A follower's high watermark: its leader's, but never past its own log
    /// end and never backwards (only a truncation sets it back). Returns the
    /// high watermark now.
    pub fn set_high_watermark(&self, offset: i64) -> Result<i64> {
        if self.read_only {
            return Err(Error::ReadOnly("set the high watermark"));
        }
        if offset < 0 {
            return Err(Error::InvalidArgument(format!("high watermark {offset}: expected an offset >= 0")));
        }
        // Under the writer lock, so that a truncation's cut is not undone.
        let _w = self.writer.lock();
        self.check_open()?;
        let hw = offset.min(self.log_end_offset());
        self.high_watermark.fetch_max(hw, Ordering::AcqRel);
        self.high_watermark_kept.store(true, Ordering::Release);
        Ok(self.high_watermark.load(Ordering::Acquire))
    }

    /// Makes the log one replica of several (or, with `false`, the only
    /// one): a replicated log's appends as leader leave the high watermark
    /// where it is, for the leader to move once its in-sync replicas have
    /// the records.
    pub fn set_replicated(&self, replicated: bool) {
        let _w = self.writer.lock();
        self.replicated.store(replicated, Ordering::Release);
        if replicated {
            self.high_watermark_kept.store(true, Ordering::Release);
        }
    }

    pub fn is_replicated(&self) -> bool {
        self.replicated.load(Ordering::Acquire)
    }

    /// The high watermark to keep in `replication-offset-checkpoint`, if the
    /// log's is kept there (see `high_watermark_kept`).
    pub fn checkpointed_high_watermark(&self) -> Option<i64> {
        self.high_watermark_kept.load(Ordering::Acquire).then(|| self.high_watermark())
    }

    /// The high watermark the store's checkpoint held at open: the log's is
    /// that, or its log end if recovery left less.
    pub(crate) fn restore_high_watermark(&self, offset: i64) {
        let _w = self.writer.lock();
        let hw = offset.clamp(self.log_start_offset(), self.log_end_offset());
        self.high_watermark.store(hw, Ordering::Release);
        self.high_watermark_kept.store(true, Ordering::Release);
    }
}

#[cfg(test)]
#[path = "epochs_test.rs"]
mod tests;
