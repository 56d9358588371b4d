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

    /// Empties the log and starts it again at `offset`, as a follower does
    /// whose log ends before its leader's log start (Kafka's
    /// `truncateFullyAndStartAt`): every segment goes, a new empty one begins
    /// at `offset`, and the log start, log end, high watermark and recovery
    /// point all become `offset`; the leader epoch cache and the producer
    /// state start empty.
    pub fn truncate_fully_and_start_at(&self, offset: i64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("truncate"));
        }
        if !(0..=super::MAX_OFFSET).contains(&offset) {
            return Err(Error::InvalidArgument(format!(
                "start offset {offset}: expected 0 to {}",
                super::MAX_OFFSET
            )));
        }
        let mut w = self.writer.lock();
        self.check_open()?;
        self.without_flushes(|| {
            self.cutting(|| {
                let config = self.config();
                let mut segs = self.segments.write();
                // The old files go first: the new segment may have an old one's name.
                for (_, s) in std::mem::take(&mut *segs) {
                    s.delete_files()?;
                }
                let active = Arc::new(Segment::open(
                    &self.dir,
                    offset,
                    config.segment_index_bytes,
                    SegmentMode::Active,
                )?);
                segs.insert(offset, active);
                drop(segs);
                self.start_offset.store(offset, Ordering::Release);
                self.end_offset.store(offset, Ordering::Release);
                self.recovery_point.store(offset, Ordering::Release);
                self.high_watermark.store(offset, Ordering::Release);
                self.dir_dirty.store(true, Ordering::Release);
                self.epochs.lock().replace(Vec::new())?;
                w.producers.truncate_fully_and_start_at(offset)
            })
        })
    }

    /// `f` (a read of this log, without side effects) run again until no
    /// truncation ran during it: a cut under a read makes it come up short, or
    /// (cut and written again) read other bytes than its range was found on.
    pub fn read_through_cuts<R>(&self, mut f: impl FnMut() -> Result<R>) -> Result<R> {
        loop {
            let before = self.cuts();
            if before.is_multiple_of(2) {
                let r = f();
                if self.cuts() == before {
                    return r;
                }
            }
            std::thread::yield_now();
        }
    }

    /// Odd while a truncation runs; changed by each one.
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::Acquire)
    }

    /// Marks a truncation in progress for `read_through_cuts` while `f` runs.
    fn cutting<R>(&self, f: impl FnOnce() -> R) -> R {
        self.cuts.fetch_add(1, Ordering::AcqRel);
        let r = f();
        self.cuts.fetch_add(1, Ordering::AcqRel);
        r
    }

    pub(super) fn truncate_locked(
        &self,
        offset: i64,
        start: i64,
        producers: &mut ProducerStateManager,
    ) -> Result<()> {
        self.cutting(|| self.truncate_locked_inner(offset, start, producers))
    }

    fn truncate_locked_inner(
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
