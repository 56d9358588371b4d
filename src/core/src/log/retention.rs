//! Kafka's `delete` cleanup policy (whole old segments by `retention.ms` and
//! `retention.bytes`, never the active one, with their producer state
//! snapshots), DeleteRecords, and the delayed removal of the files of deleted
//! segments.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::PartitionLog;
use crate::error::{Error, Result};
use crate::segment::{files, Segment};

/// What one retention run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionResult {
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
}

impl PartitionLog {
    /// Segments to delete, oldest first, stopping at the first one to keep
    /// (Kafka's rule): those wholly below the log start offset (DeleteRecords
    /// moved it past them), whatever the cleanup policy, and with the `delete`
    /// policy those past `retention.ms` or `retention.bytes`.
    fn retention_candidates(&self, now_ms: i64) -> Vec<Arc<Segment>> {
        let config = self.config();
        let segs = self.segments();
        let Some((_, inactive)) = segs.split_last() else { return Vec::new() };
        let log_start = self.log_start_offset();
        let mut total: u64 = segs.iter().map(|s| s.size()).sum();
        let mut out = Vec::new();
        for (seg, next) in inactive.iter().zip(&segs[1..]) {
            let below_start = next.base_offset <= log_start;
            let delete = config.cleanup_policy.delete;
            let by_time = delete && config.retention_ms >= 0 && {
                let newest = seg.max_timestamp();
                let newest = if newest >= 0 { newest } else { seg.modified_ms() };
                now_ms - newest > config.retention_ms
            };
            let by_size =
                delete && config.retention_bytes >= 0 && total - seg.size() >= config.retention_bytes as u64;
            if !(below_start || by_time || by_size) {
                break;
            }
            total -= seg.size();
            out.push(seg.clone());
        }
        out
    }

    /// Applies retention: deletes whole old segments and advances the log start
    /// offset. Deleted files are renamed `.deleted` and removed after
    /// `file.delete.delay.ms`, so that readers holding them finish safely.
    pub fn apply_retention(&self, now_ms: i64) -> Result<RetentionResult> {
        if self.is_read_only() {
            return Ok(RetentionResult::default());
        }
        let _m = self.maintenance.lock();
        let doomed = self.retention_candidates(now_ms);
        if doomed.is_empty() {
            return Ok(RetentionResult::default());
        }
        // The writer lock keeps a roll from racing the change of the segment set.
        let mut w = self.writer.lock();
        self.check_open()?;
        let mut result = RetentionResult::default();
        let mut segs = self.segments.write();
        for seg in &doomed {
            // A truncation (which does not wait for maintenance) may have
            // changed the set: only segments still there, and not the last, go.
            let last = segs.keys().next_back().copied();
            let still = segs.get(&seg.base_offset).is_some_and(|cur| Arc::ptr_eq(cur, seg));
            if segs.len() <= 1 || !still || last == Some(seg.base_offset) {
                break;
            }
            segs.remove(&seg.base_offset);
            self.schedule_delete(files::rename_deleted(&self.dir, seg.base_offset)?);
            // Its producer state snapshot goes with it (Kafka's rule); the
            // producers stay known until they expire.
            w.producers.delete_snapshot(seg.base_offset)?;
            result.deleted_segments += 1;
            result.deleted_bytes += seg.size();
        }
        let first = *segs.keys().next().unwrap_or(&0);
        drop(segs);
        self.start_offset.fetch_max(first, Ordering::AcqRel);
        self.epochs.lock().truncate_from_start(self.log_start_offset())?;
        Ok(result)
    }

    /// Files renamed `.deleted` go after `file.delete.delay.ms`.
    pub(super) fn schedule_delete(&self, files: Vec<PathBuf>) {
        let delay = Duration::from_millis(self.config().file_delete_delay_ms.max(0) as u64);
        let due = Instant::now() + delay;
        self.pending_deletes.lock().extend(files.into_iter().map(|f| (due, f)));
    }

    /// Removes `.deleted` files whose delay has passed (all of them with `force`).
    pub fn remove_deleted_files(&self, force: bool) -> Result<usize> {
        let now = Instant::now();
        let due: Vec<PathBuf> = {
            let mut pending = self.pending_deletes.lock();
            let (due, keep): (Vec<_>, Vec<_>) = pending.drain(..).partition(|(t, _)| force || *t <= now);
            *pending = keep;
            due.into_iter().map(|(_, p)| p).collect()
        };
        for p in &due {
            match fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::at(p)(e)),
            }
        }
        Ok(due.len())
    }

    /// Moves the log start offset forward (Kafka's DeleteRecords); segments
    /// wholly below it go at the next retention run.
    pub fn delete_records_before(&self, offset: i64) -> Result<()> {
        let end = self.log_end_offset();
        if offset > end {
            return Err(Error::OffsetOutOfRange {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
                start: self.log_start_offset(),
                end,
            });
        }
        self.start_offset.fetch_max(offset, Ordering::AcqRel);
        // The epoch of the new first offset now begins there (Kafka's
        // `truncateFromStart`); a read-only opener's cache is never written.
        if !self.is_read_only() {
            self.epochs.lock().truncate_from_start(self.log_start_offset())?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "retention_test.rs"]
mod tests;
