//! Appending to the log: offsets assigned by patching each batch's header in
//! place, segment rolls, and the flush policy's count of unflushed records.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use super::{PartitionLog, WriterState};
use crate::clock::now_ms;
use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::producer_state::{AppendCheck, ProducerBatch, ProducerStateManager, Validation};
use crate::record::batch::{
    set_base_offset, set_create_time, set_log_append_time, set_partition_leader_epoch, NO_TIMESTAMP,
};
use crate::record::compression::MAX_UNCOMPRESSED_BATCH_BYTES;
use crate::record::validator::BatchRules;
use crate::record::{build_batches, BatchBuilder, Compression, NewRecord, RecordBatch, TimestampType};
use crate::segment::{BatchInfo, Segment, SegmentMode};

/// Where an append landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker-assigned time for LogAppendTime topics, else -1.
    pub log_append_time: i64,
    /// Records written (0 for a duplicate).
    pub records: i64,
    /// The append was a retry of a batch already in the log (an idempotent
    /// producer's, same epoch and sequence range as one of its last five):
    /// nothing was written, and `base_offset`/`last_offset` are those of the
    /// first copy (`log_append_time` too, on a LogAppendTime topic). A broker
    /// answers them with error code 0, as Kafka does.
    pub duplicate: bool,
}

/// Who built the batches of an append, which decides how far they are checked
/// (Kafka's `AppendOrigin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A client or a file: every batch is CRC-checked and validated.
    Client,
    /// seglog's own producer in this process: well formed by construction;
    /// only the size bound is checked.
    Embedded,
    /// seglog's group coordinator writing `__consumer_offsets`: built by seglog
    /// like `Embedded`, and the only origin an internal topic accepts (Kafka's
    /// `AppendOrigin.COORDINATOR`).
    Coordinator,
}

/// Kafka's internal topics: written only by their coordinators, never by a
/// client (Kafka's `Topic.isInternal`).
pub const INTERNAL_TOPICS: &[&str] = &["__consumer_offsets", "__transaction_state"];

pub fn is_internal_topic(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// The error for a user's write to an internal topic.
pub fn internal_topic_error(name: &str, what: &str) -> Error {
    Error::InvalidTopic {
        name: name.to_string(),
        reason: format!(
            "{what} is not allowed on an internal topic: it is written only by seglog's group \
             coordinator (commit offsets through a Consumer)"
        ),
    }
}

/// At most this many bytes and batches of one append go to a segment in one
/// write (`append_buffers`).
const RUN_BYTES: u64 = 1 << 20;
const RUN_BATCHES: usize = 64;

impl PartitionLog {
    pub(super) fn rules<'a>(&'a self, config: &LogConfig) -> BatchRules<'a> {
        BatchRules {
            topic: &self.topic,
            partition: self.partition,
            max_batch_bytes: config.max_message_bytes,
            segment_bytes: config.segment_bytes,
            compacted: config.cleanup_policy.compact,
            timestamp_type: config.message_timestamp_type,
            timestamp_before_max_ms: config.message_timestamp_before_max_ms,
            timestamp_after_max_ms: config.message_timestamp_after_max_ms,
            max_uncompressed_bytes: MAX_UNCOMPRESSED_BATCH_BYTES,
        }
    }

    /// Checks a record's timestamp as the topic's `message.timestamp.*` rules
    /// say (a LogAppendTime topic replaces it, so anything goes there).
    pub fn check_timestamp(&self, timestamp: i64, now: i64) -> Result<()> {
        let config = self.config();
        if config.message_timestamp_type == TimestampType::LogAppendTime {
            return Ok(());
        }
        Ok(self.rules(&config).check_timestamp(timestamp, now)?)
    }

    /// Refuses a keyless record for a compacted topic (Kafka's rule).
    pub fn check_key(&self, key: Option<&[u8]>) -> Result<()> {
        self.rules(&self.config()).check_key(key)
    }

    /// Encodes `records` into batches and appends them; a record whose timestamp
    /// is `NO_TIMESTAMP` gets the time of the append. With `durable`, returns once
    /// they are fsynced. `origin` says who asks (the batches are seglog's own).
    pub fn append_records(
        &self,
        records: &[NewRecord<'_>],
        compression: Compression,
        durable: bool,
        origin: AppendOrigin,
    ) -> Result<AppendInfo> {
        if records.is_empty() {
            return Err(Error::InvalidArgument("records is empty: nothing to append".into()));
        }
        let config = self.config();
        let rules = self.rules(&config);
        let now = now_ms();
        for r in records {
            rules.check_key(r.key)?;
            if config.message_timestamp_type == TimestampType::CreateTime {
                rules.check_timestamp(r.timestamp, now)?;
            }
        }
        let stamped: Vec<NewRecord<'_>>;
        let records = if records.iter().any(|r| r.timestamp == NO_TIMESTAMP) {
            stamped = records
                .iter()
                .map(|r| NewRecord {
                    timestamp: if r.timestamp == NO_TIMESTAMP { now } else { r.timestamp },
                    ..*r
                })
                .collect();
            &stamped[..]
        } else {
            records
        };
        let max = config.max_message_bytes.min(1 << 20);
        // Built in the topic's codec straight away, where it has one.
        let compression = config.compression_type.unwrap_or(compression);
        let buf = build_batches(records, compression, TimestampType::CreateTime, max)?;
        let origin = if origin == AppendOrigin::Client { AppendOrigin::Embedded } else { origin };
        let info = self.append_as_leader(buf, origin)?;
        if durable {
            self.wait_durable(info.last_offset + 1)?;
        }
        Ok(info)
    }

    /// Appends the batches in `buf` (back to back) as the partition's leader:
    /// offsets, leader epoch and timestamps (LogAppendTime, or a client's
    /// CreateTime batch's maxTimestamp) are assigned here. All or nothing: the
    /// whole append is refused if any batch is bad, and cut back if a write fails.
    ///
    /// Batches with a producer id are checked against the producer state
    /// (Kafka's idempotent producer): from a `Client`, a retry of one of the
    /// producer's last five batches makes the whole append a duplicate (see
    /// `AppendInfo::duplicate`; nothing is written), an epoch older than the
    /// producer's is `InvalidProducerEpoch`, and a sequence that does not follow
    /// is `OutOfOrderSequence`; from seglog's own writers only the epoch is
    /// checked. The state takes each batch in once it is written.
    ///
    /// A topic whose `compression.type` names a codec stores a client's (or
    /// an embedded producer's) batches in it, as Kafka's broker does.
    pub fn append_as_leader(&self, mut buf: Vec<u8>, origin: AppendOrigin) -> Result<AppendInfo> {
        self.append_buffers(&mut [&mut buf[..]], origin)
    }

    /// Whether every batch of `bufs` is in `target` already (a header that
    /// does not parse is not: the validator answers for it).
    fn all_in(bufs: &[&mut [u8]], target: Compression) -> bool {
        bufs.iter().all(|buf| {
            let mut pos = 0;
            while pos < buf.len() {
                match RecordBatch::parse_header(&buf[pos..]) {
                    Ok(h) if h.compression().ok() == Some(target) => pos += h.size(),
                    _ => return false,
                }
            }
            true
        })
    }

    /// `buf`'s batches with their records in `target`: a batch in another
    /// codec is validated first (its errors are the client's own) and built again
    /// with the same producer fields, offset deltas and timestamps; one in
    /// `target` already is kept as it is.
    fn recompressed(&self, buf: Vec<u8>, target: Compression) -> Result<Vec<u8>> {
        let config = self.config();
        let rules = self.rules(&config);
        let now = now_ms();
        let mut pos = 0;
        let mut out: Option<Vec<u8>> = None;
        while pos < buf.len() {
            // A batch in `target` already is left to `append_buffers` to check,
            // once; only one to rebuild is decoded here.
            // (A header that does not parse gets the validator's answer below.)
            if let Ok(header) = RecordBatch::parse_header(&buf[pos..]) {
                if header.compression().ok() == Some(target) {
                    let size = header.size();
                    if let Some(out) = out.as_mut() {
                        out.extend_from_slice(&buf[pos..pos + size]);
                    }
                    pos += size;
                    continue;
                }
            }
            let (b, _) = rules.validate_client_batch(&buf[pos..], now)?;
            let out = out.get_or_insert_with(|| buf[..pos].to_vec());
            let payload = b.records_payload()?;
            let mut again = BatchBuilder::rewrite_of(&b, None)?.compression(target);
            for r in b.records(&payload)? {
                again.append_original(b.base_timestamp(), &r);
            }
            out.extend_from_slice(&again.build()?);
            pos += b.size();
        }
        Ok(out.unwrap_or(buf))
    }

    /// `append_as_leader` of the batches of several buffers, in order, as one
    /// append (all or nothing). Batches bound for the same segment are written
    /// with one `pwritev` (up to `RUN_BYTES`): one 64 KiB write per batch runs
    /// at half the speed of the same bytes in 256 KiB writes.
    pub fn append_buffers(&self, bufs: &mut [&mut [u8]], origin: AppendOrigin) -> Result<AppendInfo> {
        if origin != AppendOrigin::Coordinator {
            if let Some(target) = self.config().compression_type {
                if !Self::all_in(bufs, target) {
                    let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
                    let mut buf = self.recompressed(joined, target)?;
                    return self.append_in_place(&mut [&mut buf[..]], origin);
                }
            }
        }
        self.append_in_place(bufs, origin)
    }

    /// `append_buffers` of batches as they are (offsets, epoch and
    /// timestamps assigned in their buffers).
    fn append_in_place(&self, bufs: &mut [&mut [u8]], origin: AppendOrigin) -> Result<AppendInfo> {
        if self.read_only {
            return Err(Error::ReadOnly("append"));
        }
        if origin != AppendOrigin::Coordinator && is_internal_topic(&self.topic) {
            return Err(internal_topic_error(&self.topic, "appending"));
        }
        let config = self.config();
        let rules = self.rules(&config);
        let now = now_ms();
        // Find the batch boundaries first, refusing the whole append if any is bad.
        let mut bounds = Vec::new();
        for (at, buf) in bufs.iter().enumerate() {
            let mut pos = 0;
            while pos < buf.len() {
                let rest = &buf[pos..];
                let (size, count, last_delta, max_ts) = if origin == AppendOrigin::Client {
                    let (b, valid) = rules.validate_client_batch(rest, now)?;
                    (b.size(), valid.records, b.last_offset_delta(), Some(valid.max_timestamp))
                } else {
                    let b = RecordBatch::parse_header(rest)?;
                    rules.check_size(&b)?;
                    (b.size(), b.records_count(), b.last_offset_delta(), None)
                };
                bounds.push((at, pos, size, count, last_delta, max_ts));
                pos += size;
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
        let epoch = self.leader_epoch();
        if let Some(newer) = self.latest_epoch().filter(|&e| e > epoch) {
            return Err(Error::InvalidArgument(format!(
                "{}-{} holds batches of leader epoch {newer}, newer than its leader epoch {epoch}: \
                 set_leader_epoch first",
                self.topic, self.partition
            )));
        }
        let span: i64 = bounds.iter().map(|b| i64::from(b.4.max(0)) + 1).sum();
        if first > super::MAX_OFFSET - span {
            return Err(Error::InvalidArgument(format!(
                "offsets from {first} for {span} more would pass the largest offset a log holds ({})",
                super::MAX_OFFSET
            )));
        }
        // Each batch's producer fields with the offsets it is about to get.
        let mut producer_batches = Vec::with_capacity(bounds.len());
        let mut next = first;
        for &(at, pos, size, _, last_delta, max_ts) in &bounds {
            let b = RecordBatch::header_only(&bufs[at][pos..pos + size])?;
            let ts = if log_append_time >= 0 { log_append_time } else { max_ts.unwrap_or(b.max_timestamp()) };
            producer_batches.push(ProducerBatch::of(&b, next, ts));
            next += i64::from(last_delta.max(0)) + 1;
        }
        let checked: Vec<ProducerBatch> = producer_batches.iter().flatten().copied().collect();
        if !checked.is_empty() {
            let validation =
                if origin == AppendOrigin::Client { Validation::Client } else { Validation::EpochOnly };
            if let AppendCheck::Duplicate(m) = w.producers.check_append(&checked, validation)? {
                return Ok(AppendInfo {
                    base_offset: m.first_offset,
                    last_offset: m.last_offset,
                    log_append_time: if log_append_time >= 0 { m.timestamp } else { -1 },
                    records: 0,
                    duplicate: true,
                });
            }
        }
        // Each batch's offsets, leader epoch and timestamps, set in place.
        let mut infos = Vec::with_capacity(bounds.len());
        let mut next = first;
        for &(at, pos, size, count, last_delta, max_ts) in &bounds {
            let bytes = &mut bufs[at][pos..pos + size];
            set_base_offset(bytes, next);
            set_partition_leader_epoch(bytes, epoch);
            if log_append_time >= 0 {
                set_log_append_time(bytes, log_append_time);
            } else if let Some(max_ts) = max_ts {
                // Kafka keeps a client's records but not its word on the batch's
                // timestamp type or maxTimestamp.
                set_create_time(bytes, max_ts);
            }
            let max_timestamp = match RecordBatch::parse_header(bytes) {
                Ok(b) => b.max_timestamp(),
                Err(e) => return Err(self.give_up_append(first, first, e.into(), &mut w)),
            };
            infos.push(BatchInfo {
                position: 0,
                size: size as u64,
                base_offset: next,
                last_offset: next + i64::from(last_delta),
                max_timestamp,
                records: count,
            });
            next += i64::from(last_delta) + 1;
        }
        let parts: Vec<&[u8]> =
            bounds.iter().map(|&(at, pos, size, ..)| &bufs[at][pos..pos + size]).collect();
        // Then the writes: runs of batches for one segment, each run in one write.
        let (next, records) =
            match self.write_in_runs(&config, &parts, &infos, |_| epoch, &producer_batches, &mut w) {
                Ok(reached) => reached,
                // Nothing of a failed append may stay: earlier batches of it were
                // never acknowledged, and readers have not seen them (the end offset
                // is published only below).
                Err((next, e)) => return Err(self.give_up_append(first, next, e, &mut w)),
            };
        let advance = !self.replicated.load(Ordering::Acquire);
        self.publish_append(w, &config, next, records, advance)?;
        Ok(AppendInfo {
            base_offset: first,
            last_offset: next - 1,
            log_append_time,
            records,
            duplicate: false,
        })
    }

    /// Writes `parts`, the batches of one append (with their `infos`, leader
    /// epochs and producer fields), at the log end: runs of batches bound for
    /// one segment, each run in one write (see `run_takes`). Each batch's epoch
    /// is recorded before it is written (Kafka's order: no batch is ever on disk
    /// without its epoch's start), its producer fields applied once it is.
    /// Returns the next offset and the records written, or, on a failure, the
    /// next offset reached so far (for `give_up_append`) and the error.
    pub(super) fn write_in_runs(
        &self,
        config: &LogConfig,
        parts: &[&[u8]],
        infos: &[BatchInfo],
        epoch_of: impl Fn(usize) -> i32,
        producer_batches: &[Option<ProducerBatch>],
        w: &mut WriterState,
    ) -> std::result::Result<(i64, i64), (i64, Error)> {
        let mut next = self.log_end_offset();
        let mut records = 0i64;
        let mut run: Option<(Arc<Segment>, usize)> = None; // its segment and first batch
        for i in 0..=infos.len() {
            let joins = match (&run, infos.get(i)) {
                (Some((seg, start)), Some(info)) => self.run_takes(seg, &infos[*start..i], info, config),
                _ => false,
            };
            if !joins {
                if let Some((seg, start)) = run.take() {
                    if let Err(e) =
                        seg.append_run(&parts[start..i], &infos[start..i], config.index_interval_bytes)
                    {
                        self.note_write_error(&e);
                        return Err((next, e));
                    }
                    for (info, producer) in infos[start..i].iter().zip(&producer_batches[start..i]) {
                        if let Some(p) = producer {
                            w.producers.apply(p);
                        }
                        next = info.last_offset + 1;
                        records += i64::from(info.records);
                    }
                }
            }
            let Some(info) = infos.get(i) else { break };
            let mut written = self.epochs.lock().assign(epoch_of(i), info.base_offset).map(|_| ());
            if !joins {
                written = written.and_then(|_| self.maybe_roll(config, info, &mut w.producers)).map(|seg| {
                    run = Some((seg, i));
                });
            }
            if let Err(e) = written {
                self.note_write_error(&e);
                return Err((next, e));
            }
        }
        Ok((next, records))
    }

    /// Undoes a failed append whose batches reached `next` (from `first`):
    /// cuts them back, or, if none was written, forgets the epoch entry it may
    /// have made. Returns the error to report; if even the cut fails, the log
    /// no longer knows its own tail and refuses writes until a reopen recovers it.
    pub(super) fn give_up_append(&self, first: i64, next: i64, e: Error, w: &mut WriterState) -> Error {
        if next == first {
            let _ = self.epochs.lock().truncate_from_end(first);
            return e;
        }
        match self.truncate_locked(first, self.log_start_offset(), &mut w.producers) {
            Ok(()) => e,
            Err(cut) => {
                self.sync_failed.store(true, Ordering::Release);
                Error::IoAt {
                    path: self.dir.clone(),
                    source: std::io::Error::other(format!(
                        "{e}; then cutting the failed append back failed: {cut}"
                    )),
                }
            }
        }
    }

    /// Makes an append that reached the file visible: the new log end for
    /// readers and waiters (and, for a leader whose appends advance it, the high
    /// watermark), then the flush policy's count, flushing when it is due once
    /// the writer lock is released.
    pub(super) fn publish_append(
        &self,
        mut w: MutexGuard<'_, WriterState>,
        config: &LogConfig,
        next: i64,
        records: i64,
        advance_high_watermark: bool,
    ) -> Result<()> {
        w.producers.set_map_end(next);
        self.end_offset.store(next, Ordering::Release);
        if advance_high_watermark {
            self.high_watermark.store(next, Ordering::Release);
        } else {
            self.high_watermark_kept.store(true, Ordering::Release);
        }
        if let Some(signal) = &*self.signal.read() {
            signal.bump(&self.topic, self.partition);
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
        Ok(())
    }

    /// Whether `info`'s batch can be written with the run `batches` (not yet
    /// written) to `seg`: the run stays within `RUN_BYTES` and `RUN_BATCHES`,
    /// and nothing `maybe_roll` checks would have rolled the segment before it
    /// had the run been written batch by batch (a doubt ends the run: the batch
    /// then goes through `maybe_roll` after the run is written).
    fn run_takes(&self, seg: &Segment, batches: &[BatchInfo], info: &BatchInfo, config: &LogConfig) -> bool {
        let bytes: u64 = batches.iter().map(|b| b.size).sum();
        if batches.len() >= RUN_BATCHES || bytes + info.size > RUN_BYTES {
            return false;
        }
        let first_timestamp = match batches.first() {
            Some(b) if seg.size() == 0 => Some(b.max_timestamp),
            _ => match seg.first_batch_timestamp() {
                Ok(ts) => ts,
                Err(_) => return false,
            },
        };
        let index_full = seg.index_room() <= batches.len();
        !rolls_before(seg, seg.size() + bytes, first_timestamp, index_full, info, config)
    }

    /// Rolls to a new segment when Kafka would: the batch would overflow
    /// `segment.bytes`, the segment is older than `segment.ms`, an index is full,
    /// or the batch's offsets no longer fit a 32-bit relative offset.
    /// A roll also snapshots the producer state at the new segment's base.
    pub(super) fn maybe_roll(
        &self,
        config: &LogConfig,
        info: &BatchInfo,
        producers: &mut ProducerStateManager,
    ) -> Result<Arc<Segment>> {
        let seg = self.active()?;
        let size = seg.size();
        if size == 0 {
            return Ok(seg);
        }
        if !rolls_before(&seg, size, seg.first_batch_timestamp()?, seg.index_is_full(), info, config) {
            return Ok(seg);
        }
        seg.seal()?;
        let base = info.base_offset;
        let new = Arc::new(Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Active)?);
        if config.preallocate {
            new.preallocate(config.segment_bytes);
        }
        self.segments.write().insert(base, new.clone());
        self.dir_dirty.store(true, Ordering::Release);
        self.snapshot_at_roll(producers, base);
        Ok(new)
    }
}

#[cfg(test)]
#[path = "append_test.rs"]
mod tests;

/// How long a segment stays the active one at most (Kafka's `maxSegmentMs`):
/// `segment.ms`, or less on a compacted topic whose `max.compaction.lag.ms`
/// is shorter, so that records can be cleaned within that lag.
fn max_segment_ms(config: &LogConfig) -> i64 {
    if config.cleanup_policy.compact {
        config.segment_ms.min(config.max_compaction_lag_ms)
    } else {
        config.segment_ms
    }
}

/// How much sooner than `segment.ms` this segment rolls: below
/// `segment.jitter.ms` (and `segment.ms`), fixed per segment (drawn from its
/// base offset, so it holds across restarts), so that a topic's partitions
/// do not all roll at once.
fn roll_jitter(base_offset: i64, config: &LogConfig) -> i64 {
    let bound = config.segment_jitter_ms.min(config.segment_ms);
    if bound <= 0 {
        return 0;
    }
    // SplitMix64's finaliser: a well-spread value from the base offset.
    let mut x = (base_offset as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x % bound as u64) as i64
}

/// Kafka's roll rule: whether a batch (`info`) goes to a new segment rather
/// than to `seg` holding `size` bytes, whose first batch has `first_timestamp`
/// and whose indexes are full or not: it would pass `segment.bytes`, it is
/// `segment.ms` (see `max_segment_ms`, less the segment's jitter) newer than
/// the segment's first batch, an index is full, or its
/// offsets no longer fit a 32-bit offset relative to the segment's base.
fn rolls_before(
    seg: &Segment,
    size: u64,
    first_timestamp: Option<i64>,
    index_full: bool,
    info: &BatchInfo,
    config: &LogConfig,
) -> bool {
    let too_big = size + info.size > config.segment_bytes;
    let too_old = first_timestamp.is_some_and(|ts| {
        ts >= 0
            && info.max_timestamp.saturating_sub(ts)
                > max_segment_ms(config) - roll_jitter(seg.base_offset, config)
    });
    let overflow = info.last_offset - seg.base_offset > i64::from(i32::MAX);
    too_big || too_old || overflow || index_full
}
