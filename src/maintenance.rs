//! Background upkeep of a partition: Kafka's `delete` cleanup policy (retention
//! by time and size, whole segments, never the active one), the delayed removal
//! of `.deleted` files, and time-based flushing (`flush.ms`).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::log::PartitionLog;
use crate::segment::Segment;

pub const DELETED_SUFFIX: &str = ".deleted";

/// Renames a segment's files to `<name>.deleted` (so that no reader lists them
/// any more) and returns the new paths; readers that have them open keep reading.
pub(crate) fn rename_deleted(dir: &Path, base: i64) -> Result<Vec<PathBuf>> {
    let (log, index, time) = Segment::paths(dir, base);
    let mut out = Vec::new();
    for p in [log, index, time] {
        let mut to = p.clone().into_os_string();
        to.push(DELETED_SUFFIX);
        let to = PathBuf::from(to);
        match fs::rename(&p, &to) {
            Ok(()) => out.push(to),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::at(&p)(e)),
        }
    }
    Ok(out)
}

/// What one retention run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionResult {
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
}

impl PartitionLog {
    /// Segments to delete under `retention.ms` and `retention.bytes`, oldest
    /// first, stopping at the first one to keep (Kafka's rule).
    fn retention_candidates(&self, now_ms: i64) -> Vec<Arc<Segment>> {
        let config = self.config();
        if !config.cleanup_policy.delete {
            return Vec::new();
        }
        let segs: Vec<Arc<Segment>> = self.segments.read().values().cloned().collect();
        let Some((_, inactive)) = segs.split_last() else { return Vec::new() };
        let mut total: u64 = segs.iter().map(|s| s.size()).sum();
        let mut out = Vec::new();
        for seg in inactive {
            let by_time = config.retention_ms >= 0 && {
                let newest = seg.max_timestamp();
                let newest = if newest >= 0 { newest } else { seg.modified_ms() };
                now_ms - newest > config.retention_ms
            };
            let by_size = config.retention_bytes >= 0 && total - seg.size() >= config.retention_bytes as u64;
            if !(by_time || by_size) {
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
        let _w = self.writer.lock();
        self.check_open()?;
        let delay = Duration::from_millis(self.config().file_delete_delay_ms.max(0) as u64);
        let mut result = RetentionResult::default();
        let mut segs = self.segments.write();
        for seg in &doomed {
            if segs.len() <= 1 {
                break;
            }
            segs.remove(&seg.base_offset);
            let files = rename_deleted(&self.dir, seg.base_offset)?;
            let due = Instant::now() + delay;
            self.pending_deletes.lock().extend(files.into_iter().map(|f| (due, f)));
            result.deleted_segments += 1;
            result.deleted_bytes += seg.size();
        }
        let first = *segs.keys().next().unwrap_or(&0);
        drop(segs);
        self.start_offset.fetch_max(first, Ordering::AcqRel);
        Ok(result)
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

    /// `flush.ms`: flushes if unflushed data is older than that.
    pub fn flush_if_due(&self) -> Result<()> {
        let config = self.config();
        if config.flush_ms == i64::MAX || self.is_read_only() {
            return Ok(());
        }
        let due = {
            let w = self.writer.lock();
            w.unflushed_messages > 0 && w.last_flush.elapsed().as_millis() as i64 >= config.flush_ms
        };
        if due {
            {
                let mut w = self.writer.lock();
                w.unflushed_messages = 0;
                w.last_flush = Instant::now();
            }
            self.flush_to(self.log_end_offset(), false)?;
        }
        Ok(())
    }

    /// Moves the log start offset forward (Kafka's DeleteRecords); whole
    /// segments below it go at the next retention run.
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
        Ok(())
    }
}

#[cfg(test)]
#[path = "maintenance_test.rs"]
mod tests;
