//! Cutting the log back to an offset, as a follower truncates to its leader.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::PartitionLog;
use crate::error::{Error, Result};
use crate::segment::{Segment, SegmentMode};

impl PartitionLog {
    /// Removes every record at `offset` and after (to a batch boundary), as a
    /// follower truncates to its leader's high watermark.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("truncate"));
        }
        // Cleaning and retention must not rewrite segments this cuts away.
        let _m = self.maintenance.lock();
        let _w = self.writer.lock();
        self.check_open()?;
        let start = self.log_start_offset();
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        self.without_flushes(|| self.truncate_locked(offset, start))
    }

    pub(super) fn truncate_locked(&self, offset: i64, start: i64) -> Result<()> {
        if offset < start {
            return Err(Error::OffsetOutOfRange {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
                start,
                end: self.log_end_offset(),
            });
        }
        let config = self.config();
        let mut segs = self.segments.write();
        let first_base = *segs.keys().next().unwrap_or(&0);
        let doomed: Vec<i64> = segs.range(offset..).map(|(b, _)| *b).filter(|&b| b > first_base).collect();
        for b in doomed {
            if let Some(s) = segs.remove(&b) {
                s.delete_files()?;
            }
        }
        let (&base, last) = segs.iter().next_back().ok_or(Error::Closed)?;
        let size = last.size();
        drop(segs);
        // The new last segment becomes the active one again.
        let active =
            Arc::new(Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Active)?);
        active.set_size(size);
        active.truncate_to(offset)?;
        let end = active.last_batch(active.size())?.map_or(base, |b| b.last_offset + 1);
        self.segments.write().insert(base, active);
        self.end_offset.store(end, Ordering::Release);
        self.dir_dirty.store(true, Ordering::Release);
        Ok(())
    }
}
