//! One topic-partition: an ordered set of segments, the last one active.
//!
//! Appends are serialised by the writer lock; reads take no lock beyond a brief
//! look at the segment map, and see data up to the log end offset, which is
//! published (atomically) only after the bytes are in the file. Durable appends
//! share fsyncs: whoever finds no flush running starts one that covers everything
//! appended so far, and the others wait for it (group commit).

use std::collections::BTreeMap;
use std::fs;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{CorruptBatch, Error, Result};
use crate::record::batch::{set_base_offset, set_log_append_time, set_partition_leader_epoch, BatchIter};
use crate::record::{RecordBatch, TimestampType};
use crate::segment::{parse_file_name, BatchInfo, FileRange, Segment, SegmentMode};

/// The leader epoch stamped on appended batches: an embedded log is its own
/// leader and never changes epoch.
pub const LEADER_EPOCH: i32 = 0;
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker-assigned time for LogAppendTime topics, else -1.
    pub log_append_time: i64,
    pub records: i64,
}

/// A read: whole batches from one segment, as a file range, plus the bounds the
/// reader may want (Kafka's Fetch returns the same).
#[derive(Clone)]
pub struct ReadSlice {
    pub segment: Option<Arc<Segment>>,
    pub range: Option<FileRange>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

impl ReadSlice {
    pub fn bytes(&self) -> Result<Vec<u8>> {
        match (&self.segment, &self.range) {
            (Some(seg), Some(r)) => seg.read_bytes(r.position, r.length as usize),
            _ => Ok(Vec::new()),
        }
    }
}

/// What opening the log found and did.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub recovered_segments: usize,
    pub truncated_bytes: u64,
    pub deleted_segments: usize,
}

/// Wakes consumers waiting for data in this process: bumped on every append to
/// any partition of a store (one per store, shared by its partitions).
#[derive(Default)]
pub struct AppendSignal {
    seq: Mutex<u64>,
    cv: Condvar,
}

impl AppendSignal {
    pub fn current(&self) -> u64 {
        *self.seq.lock()
    }

    fn bump(&self) {
        *self.seq.lock() += 1;
        self.cv.notify_all();
    }

    /// Waits until something was appended after `seen` (a value of `current`),
    /// or until the timeout. Returns whether something was.
    pub fn wait_after(&self, seen: u64, timeout: std::time::Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut seq = self.seq.lock();
        while *seq == seen {
            if self.cv.wait_until(&mut seq, deadline).timed_out() {
                break;
            }
        }
        *seq != seen
    }
}

struct FlushState {
    flushed_to: i64,
    running: bool,
}

pub(crate) struct WriterState {
    pub(crate) unflushed_messages: i64,
    pub(crate) last_flush: Instant,
}

pub struct PartitionLog {
    pub topic: String,
    pub partition: i32,
    pub(crate) dir: PathBuf,
    pub(crate) config: RwLock<Arc<LogConfig>>,
    pub(crate) segments: RwLock<BTreeMap<i64, Arc<Segment>>>,
    pub(crate) writer: Mutex<WriterState>,
    pub(crate) end_offset: AtomicI64,
    pub(crate) start_offset: AtomicI64,
    recovery_point: AtomicI64,
    flush: Mutex<FlushState>,
    flushed: Condvar,
    dir_dirty: AtomicBool,
    read_only: bool,
    closed: AtomicBool,
    /// Serialises a reader's look at what the writer added.
    follow: Mutex<()>,
    signal: RwLock<Option<Arc<AppendSignal>>>,
    /// Files renamed `.deleted`, removed once their time comes.
    pub(crate) pending_deletes: Mutex<Vec<(Instant, PathBuf)>>,
    /// One maintenance task (retention, cleaning) at a time per partition.
    pub maintenance: Mutex<()>,
    /// The earliest delete horizon the cleaner wrote (i64::MAX: none known): once
    /// it passes, the log is cleanable again even with nothing dirty.
    pub(crate) tombstone_horizon: AtomicI64,
    /// Set when an fsync failed: the kernel may have dropped the dirty pages, so
    /// a later fsync that succeeds proves nothing. The log refuses writes.
    sync_failed: AtomicBool,
}

fn list_segments(dir: &Path) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let entry = entry.map_err(Error::at(dir))?;
        let name = entry.file_name();
        if let Some(base) = name.to_str().and_then(|n| parse_file_name(n, ".log")) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Removes what an interrupted operation left behind: temporary files and
/// indexes whose log is gone (Kafka's rules before recovery).
fn remove_strays(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let entry = entry.map_err(Error::at(dir))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let orphan_index = [".index", ".timeindex"].iter().any(|sfx| {
            parse_file_name(name, sfx)
                .is_some_and(|b| !dir.join(crate::segment::file_name(b, ".log")).exists())
        });
        if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".tmp") || orphan_index
        {
            fs::remove_file(&path).map_err(Error::at(&path))?;
        }
    }
    Ok(())
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
            writer: Mutex::new(WriterState { unflushed_messages: 0, last_flush: Instant::now() }),
            end_offset: AtomicI64::new(0),
            start_offset: AtomicI64::new(0),
            recovery_point: AtomicI64::new(0),
            flush: Mutex::new(FlushState { flushed_to: 0, running: false }),
            flushed: Condvar::new(),
            // A new writer has not made its directory entries durable yet.
            dir_dirty: AtomicBool::new(!read_only),
            read_only,
            closed: AtomicBool::new(false),
            follow: Mutex::new(()),
            signal: RwLock::new(None),
            pending_deletes: Mutex::new(Vec::new()),
            maintenance: Mutex::new(()),
            tombstone_horizon: AtomicI64::new(i64::MAX),
            sync_failed: AtomicBool::new(false),
        }
    }

    /// Opens the log for writing. Unless the store shut down cleanly, every
    /// segment from the one holding `recovery_point` on is scanned and cut at the
    /// first bad batch; segments after a cut are deleted.
    pub fn open(
        dir: &Path,
        topic: &str,
        partition: i32,
        config: Arc<LogConfig>,
        recovery_point: i64,
        log_start_checkpoint: Option<i64>,
        clean_shutdown: bool,
    ) -> Result<(Self, LoadReport)> {
        fs::create_dir_all(dir).map_err(Error::at(dir))?;
        crate::cleaner::recover_swaps(dir)?;
        remove_strays(dir)?;
        let mut report = LoadReport::default();
        let mut bases = list_segments(dir)?;
        if bases.is_empty() {
            bases.push(log_start_checkpoint.unwrap_or(0).max(0));
        }
        let last_base = *bases.last().unwrap_or(&0);
        let index_bytes = config.segment_index_bytes;
        let max_batch = (config.max_message_bytes as u64).max(1 << 20) * 16;
        let allow_gaps = config.cleanup_policy.compact;
        let mut segments = BTreeMap::new();
        let recover_from =
            bases.iter().copied().take_while(|&b| b <= recovery_point).last().unwrap_or(bases[0]);
        let mut cut = false;
        for &base in &bases {
            if cut {
                Segment::open(dir, base, index_bytes, SegmentMode::Sealed)?.delete_files()?;
                report.deleted_segments += 1;
                continue;
            }
            let is_last = base == last_base;
            let mode = if is_last { SegmentMode::Active } else { SegmentMode::Sealed };
            let needs_recovery = !clean_shutdown && base >= recover_from;
            let seg = if needs_recovery || !Segment::indexes_exist(dir, base) {
                let seg = Segment::open(dir, base, index_bytes, SegmentMode::Active)?;
                let r = seg.recover(config.index_interval_bytes, max_batch, allow_gaps)?;
                report.recovered_segments += 1;
                report.truncated_bytes += r.truncated_bytes;
                if r.truncated_bytes > 0 {
                    cut = true;
                }
                if is_last || cut {
                    seg
                } else {
                    seg.seal()?;
                    Segment::open(dir, base, index_bytes, mode)?
                }
            } else {
                let seg = Segment::open(dir, base, index_bytes, mode)?;
                if !seg.index_is_sane()? {
                    // A damaged index is rebuilt from the log, as Kafka does.
                    drop(seg);
                    let seg = Segment::open(dir, base, index_bytes, SegmentMode::Active)?;
                    seg.recover(config.index_interval_bytes, max_batch, allow_gaps)?;
                    report.recovered_segments += 1;
                    if !is_last {
                        seg.seal()?;
                    }
                    Segment::open(dir, base, index_bytes, mode)?
                } else {
                    seg
                }
            };
            segments.insert(base, Arc::new(seg));
        }
        // A cut makes the cut segment the active one.
        let (&active_base, active) = segments
            .iter()
            .next_back()
            .ok_or_else(|| Error::InvalidArgument(format!("no segments in {}", dir.display())))?;
        let end = active.last_batch(active.size())?.map_or(active_base, |b| b.last_offset + 1);
        let first_base = *segments.keys().next().unwrap_or(&0);
        let start = log_start_checkpoint.unwrap_or(first_base).clamp(first_base, end);
        let rp = recovery_point.min(end);
        let durable = if clean_shutdown { end } else { rp };
        let log = PartitionLog::new(dir, topic, partition, config, segments, false);
        log.end_offset.store(end, Ordering::Release);
        log.start_offset.store(start, Ordering::Release);
        log.recovery_point.store(durable, Ordering::Release);
        log.flush.lock().flushed_to = durable;
        let epoch_file = dir.join(LEADER_EPOCH_CHECKPOINT);
        if !epoch_file.exists() {
            checkpoint::write_leader_epochs(&epoch_file, &[(LEADER_EPOCH, 0)])?;
        }
        Ok((log, report))
    }

    /// Opens the log for reading while another process may be writing it. Nothing
    /// on disk is changed; reads stop at the last whole, CRC-valid batch.
    pub fn open_read_only(dir: &Path, topic: &str, partition: i32, config: Arc<LogConfig>) -> Result<Self> {
        let log = PartitionLog::new(dir, topic, partition, config, BTreeMap::new(), true);
        log.follow_writer()?;
        Ok(log)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends will bump `signal`, waking in-process waiters.
    pub fn set_signal(&self, signal: Arc<AppendSignal>) {
        *self.signal.write() = Some(signal);
    }
    /// Refuses a keyless record for a compacted topic (Kafka's rule).
    pub fn check_key(&self, key: Option<&[u8]>) -> Result<()> {
        if key.is_none() && self.config.read().cleanup_policy.compact {
            return Err(Error::InvalidRecord(format!(
                "compacted topic {} cannot accept a record without a key",
                self.topic
            )));
        }
        Ok(())
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

    pub(crate) fn check_open(&self) -> Result<()> {
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

    fn active(&self) -> Result<Arc<Segment>> {
        self.segments.read().values().next_back().cloned().ok_or(Error::Closed)
    }

    /// Appends batches built by seglog itself (already well formed): offsets are
    /// assigned here. `buf` may hold several batches back to back.
    pub fn append_trusted(&self, buf: Vec<u8>) -> Result<AppendInfo> {
        self.append_inner(buf, false)
    }

    /// Appends batches from outside (a client, a file): each must pass the CRC
    /// check and decode into exactly the records its header declares.
    pub fn append(&self, buf: Vec<u8>) -> Result<AppendInfo> {
        self.append_inner(buf, true)
    }

    fn append_inner(&self, mut buf: Vec<u8>, validate: bool) -> Result<AppendInfo> {
        if self.read_only {
            return Err(Error::ReadOnly("append"));
        }
        let config = self.config();
        // Find the batch boundaries first, refusing the whole append if any is bad.
        let mut bounds = Vec::new();
        {
            let mut pos = 0;
            for b in BatchIter::new(&buf, validate) {
                let b = b?;
                if b.size() > config.max_message_bytes {
                    return Err(Error::RecordTooLarge { size: b.size(), max: config.max_message_bytes });
                }
                if validate {
                    if b.is_control() {
                        // Control batches are a broker's to write, never a client's.
                        return Err(CorruptBatch::BadRecord("control batch from a client".into()).into());
                    }
                    let payload = b.records_payload()?;
                    let recs = b.records(&payload)?;
                    if recs.is_empty() {
                        return Err(CorruptBatch::BadRecord("batch holds no records".into()).into());
                    }
                    if config.cleanup_policy.compact && recs.iter().any(|r| r.key.is_none()) {
                        return Err(Error::InvalidRecord(format!(
                            "compacted topic {} cannot accept a record without a key",
                            self.topic
                        )));
                    }
                }
                bounds.push((pos, b.size(), b.records_count(), b.last_offset_delta()));
                pos += b.size();
            }
        }
        if bounds.is_empty() {
            return Err(Error::InvalidArgument("nothing to append: no record batch given".into()));
        }
        let mut w = self.writer.lock();
        self.check_open()?;
        let log_append_time =
            if config.message_timestamp_type == TimestampType::LogAppendTime { now_ms() } else { -1 };
        let first = self.log_end_offset();
        let mut next = first;
        let mut records = 0i64;
        for &(pos, size, count, last_delta) in &bounds {
            let bytes = &mut buf[pos..pos + size];
            set_base_offset(bytes, next);
            set_partition_leader_epoch(bytes, LEADER_EPOCH);
            if log_append_time >= 0 {
                set_log_append_time(bytes, log_append_time);
            }
            let batch = RecordBatch::parse_header(bytes)?;
            let info = BatchInfo {
                position: 0,
                size: size as u64,
                base_offset: next,
                last_offset: next + i64::from(last_delta),
                max_timestamp: batch.max_timestamp(),
                records: count,
            };
            let seg = self.maybe_roll(&config, &info)?;
            seg.append(bytes, &info, config.index_interval_bytes)?;
            next = info.last_offset + 1;
            records += i64::from(count);
            self.end_offset.store(next, Ordering::Release);
        }
        if let Some(signal) = &*self.signal.read() {
            signal.bump();
        }
        w.unflushed_messages += records;
        let due = w.unflushed_messages >= config.flush_messages
            || (config.flush_ms < i64::MAX && w.last_flush.elapsed().as_millis() as i64 >= config.flush_ms);
        if due {
            w.unflushed_messages = 0;
            w.last_flush = Instant::now();
            drop(w);
            self.flush_to(next, false)?;
        }
        Ok(AppendInfo { base_offset: first, last_offset: next - 1, log_append_time, records })
    }

    /// Rolls to a new segment when Kafka would: the batch would overflow
    /// `segment.bytes`, the segment is older than `segment.ms`, an index is full,
    /// or the batch's offsets no longer fit a 32-bit relative offset.
    fn maybe_roll(&self, config: &LogConfig, info: &BatchInfo) -> Result<Arc<Segment>> {
        let seg = self.active()?;
        let size = seg.size();
        if size == 0 {
            return Ok(seg);
        }
        let too_big = size + info.size > config.segment_bytes;
        let too_old = match seg.first_batch_timestamp()? {
            Some(ts) if ts >= 0 => info.max_timestamp.saturating_sub(ts) > config.segment_ms,
            _ => false,
        };
        let overflow = info.last_offset - seg.base_offset > i64::from(i32::MAX);
        if !(too_big || too_old || overflow || seg.index_is_full()) {
            return Ok(seg);
        }
        seg.seal()?;
        let base = info.base_offset;
        let new = Arc::new(Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Active)?);
        self.segments.write().insert(base, new.clone());
        self.dir_dirty.store(true, Ordering::Release);
        Ok(new)
    }

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
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = checkpoint::sync_dir(&self.dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Explicit flush: log and indexes, everything appended so far.
    pub fn flush(&self) -> Result<()> {
        self.flush_to(self.log_end_offset(), true)
    }

    /// Blocks until everything up to `offset` (exclusive) is on disk.
    pub fn wait_durable(&self, offset: i64) -> Result<()> {
        self.flush_to(offset, false)
    }

    /// For a reader in another process: takes in what the writer appended or
    /// rolled since the last look.
    pub fn follow_writer(&self) -> Result<()> {
        self.follow_writer_until(i64::MAX)
    }

    /// As `follow_writer`, but content once the log end passes `wanted`: new
    /// bytes in the active segment then spare a directory listing.
    pub fn follow_writer_until(&self, wanted: i64) -> Result<()> {
        if !self.read_only {
            return Ok(());
        }
        let _guard = self.follow.lock();
        let config = self.config();
        let active = self.segments.read().values().next_back().cloned();
        if let Some(seg) = &active {
            if let Some(next) = seg.follow_tail()? {
                self.end_offset.fetch_max(next, Ordering::AcqRel);
                if next >= wanted {
                    return Ok(());
                }
            }
        }
        // Nothing new in the active segment: the writer may have rolled, or
        // removed old segments.
        let bases = match list_segments(&self.dir) {
            Ok(b) => b,
            Err(Error::IoAt { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut segs = self.segments.write();
        // A segment whose file was replaced (a cleaning swapped in a new one) is
        // reopened: the old handle reads the unlinked pre-clean file.
        segs.retain(|b, seg| bases.binary_search(b).is_ok() && !seg.file_replaced());
        for &base in &bases {
            if segs.contains_key(&base) {
                continue;
            }
            match Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Reader) {
                Ok(seg) => {
                    segs.insert(base, Arc::new(seg));
                }
                Err(Error::IoAt { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        let all: Vec<Arc<Segment>> = segs.values().cloned().collect();
        drop(segs);
        let mut end = None;
        for seg in &all {
            if let Some(next) = seg.follow_tail()? {
                end = Some(next);
            }
        }
        if let Some(seg) = all.last() {
            let e = end.unwrap_or_else(|| {
                seg.last_batch(seg.size()).ok().flatten().map_or(seg.base_offset, |b| b.last_offset + 1)
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

    /// Whole batches starting with the one that holds `offset`, at most
    /// `max_bytes` (but always one batch, however large), from one segment.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadSlice> {
        self.check_open()?;
        if self.read_only && offset >= self.log_end_offset() {
            self.follow_writer_until(offset.saturating_add(1))?;
            if offset >= self.log_end_offset() {
                // Caught up to a damaged batch: say so, rather than look like the end.
                let active = self.segments.read().values().next_back().cloned();
                if let Some((seg, pos)) = active.and_then(|s| s.damaged_at().map(|p| (s, p))) {
                    return Err(CorruptBatch::BadRecord(format!(
                        "the batch at position {pos} of {} is damaged (a valid batch follows it); \
                         the writer's next recovery cuts the log there",
                        seg.log_path().display()
                    ))
                    .into());
                }
            }
        }
        let end = self.log_end_offset();
        let start = self.log_start_offset();
        let empty =
            |seg| ReadSlice { segment: seg, range: None, log_start_offset: start, log_end_offset: end };
        if offset == end {
            return Ok(empty(None));
        }
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
                start,
                end,
            });
        }
        let candidates: Vec<Arc<Segment>> = {
            let map = self.segments.read();
            let first = map.range(..=offset).next_back().map_or(i64::MIN, |(b, _)| *b);
            map.range((Bound::Included(first), Bound::Unbounded)).map(|(_, s)| s.clone()).collect()
        };
        for seg in candidates {
            if let Some(range) = seg.range_from(offset, max_bytes, seg.size())? {
                return Ok(ReadSlice {
                    segment: Some(seg),
                    range: Some(range),
                    log_start_offset: start,
                    log_end_offset: end,
                });
            }
        }
        Ok(empty(None))
    }

    /// The earliest (offset, timestamp) of a record with timestamp >= `timestamp`,
    /// or None if every record is older (Kafka's ListOffsets by time).
    pub fn offset_for_time(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.check_open()?;
        self.follow_writer()?;
        let start = self.log_start_offset();
        let segs: Vec<Arc<Segment>> = self.segments.read().values().cloned().collect();
        let n = segs.len();
        for (i, seg) in segs.into_iter().enumerate() {
            if i + 1 < n && seg.max_timestamp() < timestamp {
                continue;
            }
            let mut from = 0;
            let size = seg.size();
            while let Some(b) = seg.find_by_timestamp_from(timestamp, from, size)? {
                let bytes = seg.read_bytes(b.position, b.size as usize)?;
                let batch = RecordBatch::parse(&bytes)?;
                let base_ts = batch.base_timestamp();
                let log_append = batch.timestamp_type() == TimestampType::LogAppendTime;
                let payload = batch.records_payload()?;
                for r in batch.records(&payload)? {
                    let ts = if log_append { batch.max_timestamp() } else { base_ts + r.timestamp_delta };
                    let off = batch.base_offset() + i64::from(r.offset_delta);
                    if ts >= timestamp && off >= start {
                        return Ok(Some((off, ts)));
                    }
                }
                from = b.position + b.size;
            }
        }
        Ok(None)
    }

    /// Removes every record at `offset` and after (to a batch boundary), as a
    /// follower truncates to its leader's high watermark.
    pub fn truncate_to(&self, offset: i64) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly("truncate"));
        }
        // Lock order as everywhere: maintenance, then writer. Cleaning and
        // retention must not rewrite segments this cuts away.
        let _m = self.maintenance.lock();
        let _w = self.writer.lock();
        self.check_open()?;
        let start = self.log_start_offset();
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        // No flush may run across a truncation: one that read the old log end
        // would otherwise mark re-appended offsets durable.
        let mut st = self.flush.lock();
        while st.running {
            self.flushed.wait(&mut st);
        }
        st.running = true;
        drop(st);
        let result = self.truncate_locked(offset, start);
        let end = self.log_end_offset();
        let mut st = self.flush.lock();
        st.running = false;
        st.flushed_to = st.flushed_to.min(end);
        self.recovery_point.fetch_min(end, Ordering::AcqRel);
        drop(st);
        self.flushed.notify_all();
        result
    }

    fn truncate_locked(&self, offset: i64, start: i64) -> Result<()> {
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

    /// Flushes and seals the active segment; the log refuses use afterwards.
    pub fn close(&self) -> Result<()> {
        if self.read_only {
            self.closed.store(true, Ordering::Release);
            return Ok(());
        }
        let _w = self.writer.lock();
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flush()?;
        self.active()?.seal()?;
        self.closed.store(true, Ordering::Release);
        Ok(())
    }

    /// Deletes the partition directory (the log must be closed or about to be dropped).
    pub fn delete(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        self.segments.write().clear();
        match fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::at(&self.dir)(e)),
        }
    }
}

#[cfg(test)]
#[path = "log_test.rs"]
mod tests;
