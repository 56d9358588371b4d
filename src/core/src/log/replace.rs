//! The one call through which the cleaner changes the log: a cleaned segment,
//! already written and fsynced as a `.swap` file, takes the place of the
//! segments it was made from.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::PartitionLog;
use crate::checkpoint::sync_dir;
use crate::error::{Error, Result};
use crate::segment::{files, Segment, SegmentMode};

impl PartitionLog {
    /// Swaps `swap` in for `old` (consecutive segments, the first one's base
    /// offset naming the result): the old files are renamed `.deleted`, durably,
    /// before the swap becomes the segment, so that a crash at any point leaves
    /// what the loader completes. If the log was closed meanwhile, the swap
    /// is dropped and the log stays as it was.
    pub fn replace_segments(&self, old: &[Arc<Segment>], swap: &Path) -> Result<()> {
        let Some(first) = old.first() else {
            return Err(Error::InvalidArgument("replace_segments: no segments to replace".into()));
        };
        let base = first.base_offset;
        let config = self.config();
        let _w = self.writer.lock();
        if let Err(e) = self.check_open() {
            let _ = fs::remove_file(swap);
            return Err(e);
        }
        // A truncation (which does not wait for cleaning) may have removed or
        // reopened these segments meanwhile: then the pass is dropped.
        let unchanged = {
            let segs = self.segments.read();
            let last = segs.keys().next_back().copied();
            old.iter().all(|s| {
                Some(s.base_offset) != last && segs.get(&s.base_offset).is_some_and(|cur| Arc::ptr_eq(cur, s))
            })
        };
        if !unchanged {
            let _ = fs::remove_file(swap);
            return Err(Error::InvalidArgument(format!(
                "cleaning of {} dropped: the log was truncated while it ran",
                self.dir.display()
            )));
        }
        let mut deleted = Vec::new();
        for seg in old {
            deleted.extend(files::rename_deleted(&self.dir, seg.base_offset)?);
        }
        // The old segments must be gone, durably, before the swap takes their place.
        sync_dir(&self.dir)?;
        let log_path = self.dir.join(files::file_name(base, files::LOG));
        fs::rename(swap, &log_path).map_err(Error::at(swap))?;
        sync_dir(&self.dir)?;
        let new = Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Active)?;
        new.recover(config.index_interval_bytes, u64::MAX, true)?;
        new.seal()?;
        drop(new);
        let sealed =
            Arc::new(Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Sealed)?);
        let mut segs = self.segments.write();
        for seg in old {
            segs.remove(&seg.base_offset);
        }
        segs.insert(base, sealed);
        drop(segs);
        self.schedule_delete(deleted);
        Ok(())
    }
}
