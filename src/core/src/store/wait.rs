//! Waiting for new data in any of several partitions: on the store's append
//! signal in the writing process, on inotify in a read-only opener (whose
//! writer is another process).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::inotify::DirWatcher;
use super::Store;
use crate::error::Result;
use crate::log::PartitionLog;

/// The longest one inotify wait lasts, which also catches what inotify cannot
/// see (a partition directory created after the watch was set up).
const WATCH_CAP: Duration = Duration::from_millis(500);

impl Store {
    /// Waits until one of `partitions` (topic, partition, position) has data at
    /// or past its position, or `timeout` passes. Returns whether one has.
    pub fn wait_for_data(&self, partitions: &[(String, i32, i64)], timeout: Duration) -> Result<bool> {
        let logs = partitions
            .iter()
            .map(|(t, p, pos)| Ok((self.partition(t, *p)?, *pos)))
            .collect::<Result<Vec<(Arc<PartitionLog>, i64)>>>()?;
        let has_data = || logs.iter().any(|(l, pos)| l.log_end_offset() > *pos);
        let deadline = Instant::now() + timeout;
        if self.is_read_only() {
            let dirs: Vec<&Path> = logs.iter().map(|(l, _)| l.dir()).collect();
            let watcher = DirWatcher::new(&dirs)?;
            loop {
                for (log, _) in &logs {
                    log.catch_up()?;
                }
                if has_data() {
                    return Ok(true);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(false);
                }
                watcher.wait(left.min(WATCH_CAP))?;
            }
        }
        let signal = self.append_signal();
        loop {
            let seen = signal.current();
            if has_data() {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !signal.wait_after(seen, left) {
                return Ok(has_data());
            }
        }
    }
}
