//! Background upkeep of a store: a thread that applies retention and
//! compaction and expires idle producer ids every
//! `log.retention.check.interval.ms`, and the time half of the flush policy,
//! and the maintenance run it (or a caller) makes.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::Store;
use crate::cleaner;
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::log::PartitionLog;

pub(super) struct MaintenanceThread {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: JoinHandle<()>,
}

/// What a maintenance run did, over all partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaintenanceReport {
    pub deleted_segments: usize,
    pub deleted_bytes: u64,
    pub cleaned_partitions: usize,
    pub cleaned_bytes_in: u64,
    pub cleaned_bytes_out: u64,
    pub records_removed: u64,
    pub files_removed: usize,
}

impl Store {
    /// A thread that runs `run_maintenance` every `log.retention.check.interval.ms`
    /// and flushes `flush.ms` topics when due. It holds the store weakly and
    /// stops with it.
    pub(super) fn start_maintenance(self: &Arc<Self>) -> Result<()> {
        let weak = Arc::downgrade(self);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = stop.clone();
        let interval = Duration::from_millis(self.config.retention_check_interval_ms as u64);
        let tick = interval.min(Duration::from_millis(250));
        let handle = std::thread::Builder::new()
            .name("seglog-maintenance".into())
            .spawn(move || {
                let mut last = Instant::now();
                loop {
                    {
                        let (lock, cv) = &*stop2;
                        let mut stopped = lock.lock();
                        if !*stopped {
                            cv.wait_for(&mut stopped, tick);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    let Some(store) = weak.upgrade() else { return };
                    for p in store.all_partitions() {
                        if let Err(e) = p.flush_if_due() {
                            store.note_maintenance_error(
                                &format!("flush of {}-{}", p.topic(), p.partition()),
                                &e,
                            );
                        }
                    }
                    if last.elapsed() >= interval {
                        last = Instant::now();
                        // The work left undone is retried at the next run; the
                        // error is kept for `describe` to show.
                        if let Err(e) = store.run_maintenance(false, None) {
                            store.note_maintenance_error("retention and cleaning", &e);
                        }
                    }
                }
            })
            .map_err(Error::Io)?;
        *self.maintenance.lock() = Some(MaintenanceThread { stop, handle });
        Ok(())
    }

    /// Keeps what the background thread failed at, since nobody waits on it
    /// to hear. A store closing under it is no failure.
    fn note_maintenance_error(&self, what: &str, e: &Error) {
        if matches!(e, Error::Closed) || self.is_closed() {
            return;
        }
        *self.maintenance_error.lock() =
            Some(format!("{what} failed at {} ms since the epoch: {e}", now_ms()));
    }

    /// The last failure of the background maintenance thread, if any: kept
    /// until a later one replaces it (so a failure that went away still shows).
    pub fn last_maintenance_error(&self) -> Option<String> {
        self.maintenance_error.lock().clone()
    }

    pub(super) fn stop_maintenance(&self) {
        let Some(t) = self.maintenance.lock().take() else { return };
        *t.stop.0.lock() = true;
        t.stop.1.notify_all();
        // The thread may be the one dropping the store: it must not join itself.
        if t.handle.thread().id() != std::thread::current().id() {
            let _ = t.handle.join();
        }
    }

    /// Applies retention and (if `log.cleaner.enable`) compaction to every
    /// partition (or only `topic`'s), removes `.deleted` files whose delay has
    /// passed, and writes the checkpoints. `force_clean` cleans regardless of
    /// `min.cleanable.dirty.ratio`.
    pub fn run_maintenance(&self, force_clean: bool, topic: Option<&str>) -> Result<MaintenanceReport> {
        self.check_writable("run_maintenance")?;
        let now = now_ms();
        let mut report = MaintenanceReport::default();
        let partitions: Vec<Arc<PartitionLog>> = match topic {
            Some(t) => self.topic(t)?.partitions.clone(),
            None => self.all_partitions(),
        };
        for p in &partitions {
            p.remove_expired_producers(now);
            let r = p.apply_retention(now)?;
            report.deleted_segments += r.deleted_segments;
            report.deleted_bytes += r.deleted_bytes;
            if self.config.cleaner_enable || force_clean {
                let key = (p.topic().to_string(), p.partition());
                let first_dirty = self.cleaner_offsets.lock().get(&key).copied().unwrap_or(0);
                let (dedupe, io) =
                    (self.config.cleaner_dedupe_buffer_size, self.config.cleaner_io_buffer_size);
                if let Some(c) = cleaner::clean(p, first_dirty, now, dedupe, io, force_clean)? {
                    report.cleaned_partitions += 1;
                    report.cleaned_bytes_in += c.bytes_in;
                    report.cleaned_bytes_out += c.bytes_out;
                    report.records_removed += c.records_in - c.records_out;
                    self.cleaner_offsets.lock().insert(key, c.cleaned_to);
                }
            }
            report.files_removed += p.remove_deleted_files(false)?;
        }
        self.check_open()?;
        self.write_checkpoints()?;
        Ok(report)
    }
}
