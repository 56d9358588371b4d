//! One topic-partition: an ordered set of segments, the last one active
//! (Kafka's `UnifiedLog`). Its child modules own its parts: loading and
//! recovery, append, flush, read, truncation, retention, the catch-up of a
//! read-only opener, and the segment swap the cleaner asks for.
//!
//! Appends are serialised by the writer lock; reads take no lock beyond a brief
//! look at the segment map, and see data up to the log end offset, which is
//! published (atomically) only after the bytes are in the file. Lock order,
//! wherever both are taken: maintenance, then writer.

mod append;
mod epochs;
mod flush;
mod follower;
mod loader;
mod producers;
mod read;
mod refresh;
mod replace;
mod retention;
mod signal;
mod swaps;
mod truncate;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::leader_epoch::LeaderEpochFileCache;
use crate::producer_state::ProducerStateManager;
use crate::segment::Segment;

pub use append::{internal_topic_error, is_internal_topic, AppendInfo, AppendOrigin, INTERNAL_TOPICS};
pub use loader::LoadReport;
pub use read::ReadSlice;
pub use retention::RetentionResult;
pub use signal::{AppendListener, AppendSignal};

/// The leader epoch an embedded log stamps on appended batches: it is its own
/// leader and never changes epoch (a broker sets others, `set_leader_epoch`).
pub const LEADER_EPOCH: i32 = 0;
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
/// The largest offset a log holds: a batch's offsets run up to `i32::MAX` past
/// its base, and one past the last must still fit an i64. Segment names, log
/// start offsets and appends beyond it are refused.
pub const MAX_OFFSET: i64 = i64::MAX - i32::MAX as i64 - 1;

/// How far fsyncs have reached, and whether one is running (group commit).
struct FlushState {
    flushed_to: i64,
    running: bool,
}

/// What the writer lock guards: what the flush policy counts between flushes
/// (`flush.messages`, `flush.ms`), and the producer state, which changes only
/// with what is written.
struct WriterState {
    unflushed_messages: i64,
    last_flush: Instant,
    /// Empty, and never built, in a read-only opener.
    producers: ProducerStateManager,
}

pub struct PartitionLog {
    topic: String,
    partition: i32,
    dir: PathBuf,
    config: RwLock<Arc<LogConfig>>,
    segments: RwLock<BTreeMap<i64, Arc<Segment>>>,
    writer: Mutex<WriterState>,
    end_offset: AtomicI64,
    /// The offset below which reads are served to consumers (Kafka's high
    /// watermark). Without replication it follows the log end: advanced by
    /// every append as leader, set back by a truncation. A follower's is set
    /// from its leader's (`set_high_watermark`).
    high_watermark: AtomicI64,
    /// Whether the high watermark is kept in `replication-offset-checkpoint`:
    /// once replication touched the log (a leader epoch set, a follower
    /// append or high watermark) or the checkpoint held it at open. An
    /// embedded log's is not, so its high watermark at open is its log end.
    high_watermark_kept: AtomicBool,
    /// Whether the log is one replica of several: then its high watermark is
    /// moved by its leader (`set_high_watermark`), never by its own appends.
    replicated: AtomicBool,
    /// The epoch stamped on batches appended as leader.
    leader_epoch: AtomicI32,
    /// Where each leader epoch began. Changed under the writer lock (then
    /// this lock); read under this lock alone.
    epochs: Mutex<LeaderEpochFileCache>,
    start_offset: AtomicI64,
    recovery_point: AtomicI64,
    flush: Mutex<FlushState>,
    flushed: Condvar,
    dir_dirty: AtomicBool,
    read_only: bool,
    closed: AtomicBool,
    /// Serialises a read-only opener's look at what the writer added.
    catch_up: Mutex<()>,
    signal: RwLock<Option<Arc<AppendSignal>>>,
    /// Files renamed `.deleted`, removed once their time comes.
    pending_deletes: Mutex<Vec<(Instant, PathBuf)>>,
    /// One maintenance task (retention, cleaning, truncation) at a time.
    maintenance: Mutex<()>,
    /// The earliest delete horizon the cleaner wrote (i64::MAX: none known): once
    /// it passes, the log is cleanable again even with nothing dirty.
    tombstone_horizon: AtomicI64,
    /// Odd while a truncation cuts segments back, bumped at its start and end:
    /// a read that failed while it changed (or ran) is read again.
    cuts: AtomicU64,
    /// Set when an fsync failed: the kernel may have dropped the dirty pages, so
    /// a later fsync that succeeds proves nothing. The log refuses writes.
    sync_failed: AtomicBool,
    /// Set when a write failed (even one cut back cleanly): the store must not
    /// call such a log cleanly shut down, so the next open checks its tail.
    write_failed: AtomicBool,
    /// Producer state snapshots written without an fsync (at rolls), synced by
    /// the next flush. Apart from the writer lock, which a flush may not take.
    unsynced_snapshots: Mutex<Vec<PathBuf>>,
}

impl PartitionLog {
    /// The state of a log with these segments and nothing else known yet.
    fn new(
        dir: &Path,
        topic: &str,
        partition: i32,
        config: Arc<LogConfig>,
        segments: BTreeMap<i64, Arc<Segment>>,
        read_only: bool,
    ) -> Self {
        PartitionLog {
            topic: topic.to_string(),
            partition,
            dir: dir.to_owned(),
            config: RwLock::new(config),
            segments: RwLock::new(segments),
            writer: Mutex::new(WriterState {
                unflushed_messages: 0,
                last_flush: Instant::now(),
                producers: ProducerStateManager::new(dir),
            }),
            end_offset: AtomicI64::new(0),
            high_watermark: AtomicI64::new(0),
            high_watermark_kept: AtomicBool::new(false),
            replicated: AtomicBool::new(false),
            leader_epoch: AtomicI32::new(LEADER_EPOCH),
            epochs: Mutex::new(LeaderEpochFileCache::in_memory(Vec::new())),
            start_offset: AtomicI64::new(0),
            recovery_point: AtomicI64::new(0),
            flush: Mutex::new(FlushState { flushed_to: 0, running: false }),
            flushed: Condvar::new(),
            // A new writer has not made its directory entries durable yet.
            dir_dirty: AtomicBool::new(!read_only),
            read_only,
            closed: AtomicBool::new(false),
            catch_up: Mutex::new(()),
            signal: RwLock::new(None),
            pending_deletes: Mutex::new(Vec::new()),
            maintenance: Mutex::new(()),
            tombstone_horizon: AtomicI64::new(i64::MAX),
            cuts: AtomicU64::new(0),
            sync_failed: AtomicBool::new(false),
            write_failed: AtomicBool::new(false),
            unsynced_snapshots: Mutex::new(Vec::new()),
        }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }
    pub fn partition(&self) -> i32 {
        self.partition
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends will bump `signal`, waking in-process waiters.
    pub fn set_signal(&self, signal: Arc<AppendSignal>) {
        *self.signal.write() = Some(signal);
    }

    pub fn config(&self) -> Arc<LogConfig> {
        self.config.read().clone()
    }
    pub fn set_config(&self, config: Arc<LogConfig>) {
        *self.config.write() = config;
    }
    pub fn log_end_offset(&self) -> i64 {
        self.end_offset.load(Ordering::Acquire)
    }
    /// The offset below which consumers may read (Kafka's high watermark):
    /// the log end until replication exists. A read-only opener, which has no
    /// word from the writer on it, uses the log end it has caught up to.
    pub fn high_watermark(&self) -> i64 {
        if self.read_only {
            return self.log_end_offset();
        }
        self.high_watermark.load(Ordering::Acquire)
    }
    pub fn log_start_offset(&self) -> i64 {
        self.start_offset.load(Ordering::Acquire)
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point.load(Ordering::Acquire)
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
    pub fn segment_count(&self) -> usize {
        self.segments.read().len()
    }
    pub fn size_bytes(&self) -> u64 {
        self.segments.read().values().map(|s| s.size()).sum()
    }
    pub fn segment_bases(&self) -> Vec<i64> {
        self.segments.read().keys().copied().collect()
    }
    /// The segments as they are now, oldest first; the last is the active one.
    pub fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments.read().values().cloned().collect()
    }

    /// Holds off other maintenance (retention, cleaning, truncation) of this log.
    pub fn lock_maintenance(&self) -> MutexGuard<'_, ()> {
        self.maintenance.lock()
    }
    /// The earliest delete horizon of the tombstones the cleaner kept.
    pub fn tombstone_horizon(&self) -> i64 {
        self.tombstone_horizon.load(Ordering::Acquire)
    }
    pub fn set_tombstone_horizon(&self, horizon: i64) {
        self.tombstone_horizon.store(horizon, Ordering::Release);
    }

    /// Refuses use after close, and writes after a failed fsync.
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if self.sync_failed.load(Ordering::Acquire) {
            return Err(Error::IoAt {
                path: self.dir.clone(),
                source: std::io::Error::other(
                    "an earlier fsync of this log failed; reopen the store to recover",
                ),
            });
        }
        Ok(())
    }

    /// Whether a write to this log failed since it was opened.
    pub fn had_write_error(&self) -> bool {
        self.write_failed.load(Ordering::Acquire)
    }

    /// Notes an I/O failure of a write (see `had_write_error`).
    fn note_write_error(&self, e: &Error) {
        if matches!(e, Error::IoAt { .. } | Error::Io(_)) {
            self.write_failed.store(true, Ordering::Release);
        }
    }

    fn active(&self) -> Result<Arc<Segment>> {
        self.segments.read().values().next_back().cloned().ok_or(Error::Closed)
    }

    /// Closes the log: a writer flushes and seals the active segment and writes
    /// a producer state snapshot at the log end (so a clean reopen scans
    /// nothing). The log refuses use afterwards and lets go of its segments
    /// (their files and maps), so that a closed store holds no files however
    /// long its object lives; a read still in progress keeps the segment it
    /// holds until it is done.
    pub fn close(&self) -> Result<()> {
        if self.read_only {
            self.closed.store(true, Ordering::Release);
            self.segments.write().clear();
            return Ok(());
        }
        let mut w = self.writer.lock();
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flush()?;
        self.active()?.seal()?;
        // After the flush, so that a failure here (a full disk) costs only
        // the snapshot; it still fails the close, so the store is not marked
        // cleanly shut down and the next open rebuilds the state from the log.
        w.producers.set_map_end(self.log_end_offset());
        if w.producers.take_snapshot(true)? {
            crate::checkpoint::sync_dir(&self.dir)?;
        }
        self.closed.store(true, Ordering::Release);
        self.segments.write().clear();
        Ok(())
    }

    /// Deletes the partition directory (the log must be closed or about to be dropped).
    /// Removes the partition's directory: renamed aside first
    /// (`<topic>-<partition>.<id>-delete`, as Kafka does), so that a crash
    /// part-way never leaves a half-removed directory under the partition's
    /// name; a store finishes such removals when it opens.
    pub fn delete(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        self.segments.write().clear();
        let Some(doomed) = crate::checkpoint::rename_aside(&self.dir, "delete")? else { return Ok(()) };
        match fs::remove_dir_all(&doomed) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::at(&doomed)(e)),
        }
    }
}

#[cfg(test)]
#[path = "log_test.rs"]
mod tests;
