//! A read-only opener catching up with the process that writes the log: new
//! bytes in the active segment, rolled segments, and segments retention or a
//! cleaning removed or replaced. (Not a replica: nothing is fetched or copied.)

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::PartitionLog;
use crate::checkpoint;
use crate::error::{Error, Result};
use crate::segment::{files, Expect, Segment, SegmentMode};

impl PartitionLog {
    /// Takes in what the writer appended or rolled since the last look. A no-op
    /// for the writing process itself.
    pub fn catch_up(&self) -> Result<()> {
        self.catch_up_until(i64::MAX)
    }

    /// As `catch_up`, but content once the log end passes `wanted`: new bytes in
    /// the active segment then spare a directory listing.
    pub fn catch_up_until(&self, wanted: i64) -> Result<()> {
        if !self.read_only {
            return Ok(());
        }
        let _guard = self.catch_up.lock();
        let config = self.config();
        let active = self.segments.read().values().next_back().cloned();
        if let Some(seg) = &active {
            if let Some(next) = seg.catch_up_tail()? {
                self.end_offset.fetch_max(next, Ordering::AcqRel);
                if next >= wanted {
                    return Ok(());
                }
            }
        }
        // Nothing new in the active segment: the writer may have rolled, or
        // removed old segments.
        let bases = match files::list_segments(&self.dir) {
            Ok(b) => b,
            Err(Error::IoAt { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut segs = self.segments.write();
        // A segment whose file was replaced (a cleaning swapped in a new one) is
        // reopened: the old handle reads the unlinked pre-clean file.
        segs.retain(|b, seg| bases.binary_search(b).is_ok() && !seg.file_replaced());
        let mut opened = Vec::new();
        for &base in &bases {
            if segs.contains_key(&base) {
                continue;
            }
            match Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Reader) {
                Ok(seg) => {
                    segs.insert(base, Arc::new(seg));
                    opened.push(base);
                }
                Err(Error::IoAt { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let all: Vec<Arc<Segment>> = segs.values().cloned().collect();
        drop(segs);
        let mut end = None;
        for seg in &all {
            // `opened` is in base order, as `bases` is.
            let next = if opened.binary_search(&seg.base_offset).is_ok() {
                seg.catch_up_opened_tail()?
            } else {
                seg.catch_up_tail()?
            };
            if let Some(next) = next {
                end = Some(next);
            }
        }
        if let Some(seg) = all.last() {
            let e = end.unwrap_or_else(|| {
                seg.last_batch(seg.size(), Expect::ANY)
                    .ok()
                    .flatten()
                    .map_or(seg.base_offset, |b| b.last_offset + 1)
            });
            self.end_offset.fetch_max(e, Ordering::AcqRel);
        }
        if let Some(first) = all.first() {
            let start = self.log_start_from_checkpoint().unwrap_or(first.base_offset).max(first.base_offset);
            self.start_offset.store(start, Ordering::Release);
        }
        Ok(())
    }

    fn log_start_from_checkpoint(&self) -> Option<i64> {
        let path = self.dir.parent()?.join(checkpoint::LOG_START_OFFSET);
        checkpoint::read_offsets(&path).ok()?.get(&(self.topic.clone(), self.partition)).copied()
    }
}
