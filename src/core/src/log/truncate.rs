//! Cutting the log back to an offset, as a follower truncates to its leader;
//! the producer state and the leader epoch cache are cut back with it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::PartitionLog;
use crate::error::{Error, Result};
use crate::producer_state::ProducerStateManager;
use crate::segment::{Expect, Segment, SegmentMode};

impl PartitionLog {
    /// Removes every record at `offset` and after (to a batch boundary), as a
    /// follower truncates to its leader's high watermark. Producer state
    /// snapshots above the new end are deleted and the state is rebuilt from
    /// the latest one left and the batches after it (Kafka's
    /// `truncateAndReload`); the high watermark comes back to the new end if
    /// it was past it.
    ///
    /// A reader holding one of the cut segments (an `Arc<Segment>`, a file
    /// range from `read`) keeps its file descriptor: the file is cut shorter
    /// (or unlinked), so a read or sendfile of the cut range comes up short.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("truncate"));
        }
        // No wait for a cleaning or retention pass: both take the writer lock to
        // change the segment set and give up if the segments they worked on are
        // gone (Kafka aborts cleaning for a truncation too).
        let mut w = self.writer.lock();
        self.check_open()?;
        let start = self.log_start_offset();
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        self.without_flushes(|| self.truncate_locked(offset, start, &mut w.producers))
    }

    pub(super) fn truncate_locked(
        &self,
        offset: i64,
        start: i64,
        producers: &mut ProducerStateManager,
    ) -> Result<()> {
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
        let was_active = segs.values().next_back().cloned().ok_or(Error::Closed)?;
        let doomed: Vec<i64> = segs.range(offset..).map(|(b, _)| *b).filter(|&b| b > first_base).collect();
        for b in doomed {
            if let Some(s) = segs.remove(&b) {
                s.delete_files()?;
            }
        }
        let (&base, last) = segs.iter().next_back().ok_or(Error::Closed)?;
        let last = last.clone();
        drop(segs);
        // The new last segment becomes the active one again. The active one is cut
        // in place: a second writable handle would map its indexes a second time,
        // and its trims could pull pages from under the first mapping's readers.
        let active = if Arc::ptr_eq(&last, &was_active) {
            last
        } else {
            let active =
                Arc::new(Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Active)?);
            active.set_size(last.size());
            active
        };
        active.truncate_to(offset)?;
        let expect = Expect { next_base: i64::MAX, allow_gaps: config.cleanup_policy.compact };
        let end = active.last_batch(active.size(), expect)?.map_or(base, |b| b.last_offset + 1);
        self.segments.write().insert(base, active);
        self.end_offset.store(end, Ordering::Release);
        self.high_watermark.fetch_min(end, Ordering::AcqRel);
        self.dir_dirty.store(true, Ordering::Release);
        self.epochs.lock().truncate_from_end(end)?;
        self.rebuild_producer_state(producers, end, false)?;
        Ok(())
    }
}
