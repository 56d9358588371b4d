//! Making appends durable. Concurrent callers share one fsync (group commit):
//! whoever finds no flush running starts one that covers everything appended so
//! far, and the others wait for it. Also the time half of the flush policy.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::PartitionLog;
use crate::checkpoint;
use crate::error::{Error, Result};
use crate::segment::Segment;

impl PartitionLog {
    /// Makes everything below `target` durable. Concurrent callers share one
    /// fsync: a flush in progress covers all that was appended before it began.
    pub fn flush_to(&self, target: i64, indexes_too: bool) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut st = self.flush.lock();
        loop {
            if st.flushed_to >= target && !indexes_too {
                return Ok(());
            }
            if !st.running {
                break;
            }
            self.flushed.wait(&mut st);
        }
        st.running = true;
        let from = st.flushed_to;
        drop(st);
        let end = self.log_end_offset();
        let result = self.check_open().and_then(|_| self.sync_range(from, indexes_too));
        if matches!(result, Err(Error::IoAt { .. } | Error::Io(_))) {
            self.sync_failed.store(true, Ordering::Release);
        }
        let mut st = self.flush.lock();
        st.running = false;
        if result.is_ok() && end > st.flushed_to {
            st.flushed_to = end;
            self.recovery_point.fetch_max(end, Ordering::AcqRel);
        }
        drop(st);
        self.flushed.notify_all();
        result
    }

    fn sync_range(&self, from: i64, indexes_too: bool) -> Result<()> {
        let segs: Vec<Arc<Segment>> = {
            let map = self.segments.read();
            let first = map.range(..=from).next_back().map_or(i64::MIN, |(b, _)| *b);
            map.range(first..).map(|(_, s)| s.clone()).collect()
        };
        for s in &segs {
            if indexes_too {
                s.sync()?;
            } else {
                s.sync_log()?;
            }
        }
        self.sync_snapshots()?;
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = checkpoint::sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs `f` with no flush in progress and none starting: a flush that read
    /// the old log end would otherwise mark offsets durable that `f` cuts and
    /// re-appending writes again. Afterwards, what was flushed is capped at the
    /// (possibly lower) log end.
    pub(super) fn without_flushes<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut st = self.flush.lock();
        while st.running {
            self.flushed.wait(&mut st);
        }
        st.running = true;
        drop(st);
        let result = f();
        let end = self.log_end_offset();
        let mut st = self.flush.lock();
        st.running = false;
        st.flushed_to = st.flushed_to.min(end);
        self.recovery_point.fetch_min(end, Ordering::AcqRel);
        drop(st);
        self.flushed.notify_all();
        result
    }

    /// Explicit flush: log and indexes, everything appended so far.
    pub fn flush(&self) -> Result<()> {
        self.flush_to(self.log_end_offset(), true)
    }

    /// Blocks until everything up to `offset` (exclusive) is on disk.
    pub fn wait_durable(&self, offset: i64) -> Result<()> {
        self.flush_to(offset, false)
    }

    /// `flush.ms`: flushes if unflushed data is older than that.
    pub fn flush_if_due(&self) -> Result<()> {
        let config = self.config();
        if config.flush_ms == i64::MAX || self.is_read_only() {
            return Ok(());
        }
        let due = {
            let mut w = self.writer.lock();
            let due =
                w.unflushed_messages > 0 && w.last_flush.elapsed().as_millis() as i64 >= config.flush_ms;
            if due {
                w.unflushed_messages = 0;
                w.last_flush = Instant::now();
            }
            due
        };
        if due {
            self.flush_to(self.log_end_offset(), false)?;
        }
        Ok(())
    }
}
