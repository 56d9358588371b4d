//! Kafka's `compact` cleanup policy: keep, for each key, only its latest record.
//!
//! A pass maps each key of the dirty part of the log (from the cleaner
//! checkpoint to the active segment) to its latest offset, in a map bounded by
//! the dedupe buffer (a huge topic is cleaned in several passes); then rewrites
//! the inactive segments, in groups of at most `segment.bytes`, keeping a record
//! only if no later record has its key. Offsets never change (gaps are fine);
//! each batch keeps its base offset and last offset delta. Tombstones are kept
//! until their batch's delete horizon (set, as Kafka does, to now +
//! `delete.retention.ms` when a cleaning first keeps them) has passed. The
//! last batch of each producer the log knows is kept (if only as an empty
//! batch), as Kafka does, so that a producer state rebuilt from the log still
//! knows the producer's last sequence.
//!
//! Segments are read batch by batch through a buffer of half of
//! `log.cleaner.io.buffer.size` and written through the other half (Kafka's
//! split), so memory does not grow with `segment.bytes`.
//!
//! The cleaner is a client of the log: it reads segments and hands each cleaned
//! group, written as `<base>.log.cleaned`, fsynced and renamed `.swap`, to
//! `PartitionLog::replace_segments`. A crash at any point leaves files that the
//! log's loader completes or drops on the next open.

mod reader;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::sync::Arc;

use crate::checkpoint::sync_dir;
use crate::error::{Error, Result};
use crate::log::PartitionLog;
use crate::record::{BatchBuilder, RecordBatch};
use crate::segment::files::{self, file_name, with_suffix};
use crate::segment::Segment;
use reader::BatchReader;

/// Bytes one entry of the key map takes, for the buffer bound (Kafka: 16-byte
/// hash + 8-byte offset).
const ENTRY_BYTES: usize = 24;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanResult {
    /// The first offset not yet cleaned (the new cleaner checkpoint).
    pub cleaned_to: i64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub records_in: u64,
    pub records_out: u64,
    pub segments_in: usize,
    pub segments_out: usize,
    /// The earliest delete horizon of the tombstones kept (i64::MAX: none).
    pub min_horizon: i64,
}

fn key_hash(key: &[u8]) -> u128 {
    xxhash_rust::xxh3::xxh3_128(key)
}

/// The dirty ratio of the segments a cleaning may reach (`segs`, up to the
/// first uncleanable one, which is left out as the active one is): bytes past
/// the cleaner checkpoint over all their bytes, as Kafka measures it.
pub fn dirty_ratio(segs: &[Arc<Segment>], first_dirty: i64) -> f64 {
    let Some((_, inactive)) = segs.split_last() else { return 0.0 };
    let total: u64 = inactive.iter().map(|s| s.size()).sum();
    if total == 0 {
        return 0.0;
    }
    let dirty: u64 = dirty_segments(segs, first_dirty).map(|s| s.size()).sum();
    dirty as f64 / total as f64
}

/// The segments before the last of `segs` holding a record at or past
/// `first_dirty` (those whose successor starts after it).
fn dirty_segments(segs: &[Arc<Segment>], first_dirty: i64) -> impl Iterator<Item = &Arc<Segment>> {
    segs.iter()
        .zip(segs.iter().skip(1))
        .filter(move |(_, next)| next.base_offset > first_dirty)
        .map(|(s, _)| s)
}

/// One cleaning pass. `first_dirty` is the cleaner checkpoint; `buffer_bytes`
/// bounds the key map and `io_buffer_bytes` the read and write buffers; with
/// `force` the dirty ratio is not checked. Returns None when there was nothing to do.
pub fn clean(
    log: &PartitionLog,
    first_dirty: i64,
    now_ms: i64,
    buffer_bytes: usize,
    io_buffer_bytes: usize,
    force: bool,
) -> Result<Option<CleanResult>> {
    let io_half = io_buffer_bytes / 2;
    let config = log.config();
    if !config.cleanup_policy.compact || log.is_read_only() {
        return Ok(None);
    }
    let _m = log.lock_maintenance();
    log.check_open()?;
    let mut segs = log.segments();
    // `min.compaction.lag.ms`: a segment with a record newer than the lag, and
    // every one after it, stays out of reach, as the active one does (Kafka's
    // first uncleanable offset).
    if config.min_compaction_lag_ms > 0 {
        let young = now_ms.saturating_sub(config.min_compaction_lag_ms);
        if let Some(i) = segs.iter().position(|s| s.max_timestamp() > young) {
            segs.truncate(i + 1);
        }
    }
    let Some((active, inactive)) = segs.split_last() else { return Ok(None) };
    let first_dirty = first_dirty.max(log.log_start_offset());
    // Tombstones whose delete horizon has passed make a log cleanable even
    // when nothing is dirty (Kafka, KIP-534).
    let horizon_due = log.tombstone_horizon() <= now_ms;
    let nothing_dirty = first_dirty >= active.base_offset;
    if inactive.is_empty() || (nothing_dirty && !horizon_due) {
        return Ok(None);
    }
    // `max.compaction.lag.ms`: a dirty record older than the lag is cleaned
    // whatever the dirty ratio (Kafka's `maxCompactionDelay`).
    let first_dirty_segment = dirty_segments(&segs, first_dirty).next();
    let overdue = !nothing_dirty
        && first_dirty_segment.is_some_and(|s| {
            s.first_batch_timestamp()
                .ok()
                .flatten()
                .is_some_and(|ts| ts >= 0 && now_ms.saturating_sub(ts) > config.max_compaction_lag_ms)
        });
    if !force
        && !horizon_due
        && !overdue
        && dirty_ratio(&segs, first_dirty) < config.min_cleanable_dirty_ratio
    {
        return Ok(None);
    }

    // 1. Map each key of the dirty segments to its latest offset, segment by
    //    segment, while the buffer allows.
    let limit = (buffer_bytes / ENTRY_BYTES).max(1);
    let mut map: HashMap<u128, i64> = HashMap::new();
    let mut map_end = first_dirty;
    let ends: Vec<i64> = segs.iter().skip(1).map(|s| s.base_offset).collect();
    for (seg, &seg_end) in inactive.iter().zip(&ends) {
        if seg_end <= first_dirty || nothing_dirty {
            continue;
        }
        let before = map.len();
        let mut batches = BatchReader::new(seg, io_half);
        while let Some((b, _)) = batches.next_batch()? {
            if b.is_control() || b.last_offset() < first_dirty {
                continue;
            }
            let payload = b.records_payload()?;
            for r in b.records(&payload)? {
                if let Some(k) = r.key {
                    map.insert(key_hash(k), b.base_offset() + i64::from(r.offset_delta));
                }
            }
        }
        if map.len() > limit && before > 0 {
            // This segment did not fit: entries for it stay (they point at
            // records that are kept), but cleaning stops before it.
            break;
        }
        map_end = seg_end;
        if map.len() >= limit {
            break;
        }
    }
    if nothing_dirty {
        map_end = active.base_offset.min(first_dirty);
    } else if map_end <= first_dirty {
        return Err(Error::InvalidConfig(format!(
            "log.cleaner.dedupe.buffer.size ({buffer_bytes} bytes) cannot hold the keys of one segment \
             of {}-{}",
            log.topic(),
            log.partition()
        )));
    }

    // 2. Rewrite every inactive segment below `map_end`, in groups.
    let cleanable: Vec<Arc<Segment>> =
        inactive.iter().zip(&ends).filter(|(_, &end)| end <= map_end).map(|(s, _)| s.clone()).collect();
    let mut result = CleanResult { cleaned_to: map_end, min_horizon: i64::MAX, ..CleanResult::default() };
    let horizon = now_ms.saturating_add(config.delete_retention_ms);
    let producers = log.producer_last_offsets();
    let keep = Keep { map: &map, producers: &producers, now_ms, horizon };
    for group in group_by_size(&cleanable, config.segment_bytes) {
        clean_group(log, &group, &keep, io_half, &mut result)?;
    }
    log.set_tombstone_horizon(result.min_horizon);
    Ok(Some(result))
}

/// What decides which records a pass keeps.
struct Keep<'a> {
    /// Each key's latest offset.
    map: &'a HashMap<u128, i64>,
    /// Each producer's last data offset: its batch is kept.
    producers: &'a HashMap<i64, i64>,
    now_ms: i64,
    /// The delete horizon given to tombstones kept for the first time.
    horizon: i64,
}

fn clean_group(
    log: &PartitionLog,
    group: &[Arc<Segment>],
    keep: &Keep<'_>,
    io_bytes: usize,
    result: &mut CleanResult,
) -> Result<()> {
    let base = group[0].base_offset;
    let log_path = log.dir().join(file_name(base, files::LOG));
    let cleaned_path = with_suffix(&log_path, files::CLEANED);
    let file = File::create(&cleaned_path).map_err(Error::at(&cleaned_path))?;
    let mut out = BufWriter::with_capacity(io_bytes.max(1), file);
    let mut written = 0u64;
    for (i, seg) in group.iter().enumerate() {
        result.bytes_in += seg.size();
        result.segments_in += 1;
        let mut batches = BatchReader::new(seg, io_bytes);
        while let Some((b, last)) = batches.next_batch()? {
            // The group's last batch is kept (if only as an empty batch) so
            // that the cleaned segment still ends where the group did.
            let keep_shell = i + 1 == group.len() && last;
            if let Some(bytes) = filter_batch(&b, keep, keep_shell, result)? {
                out.write_all(&bytes).map_err(Error::at(&cleaned_path))?;
                written += bytes.len() as u64;
            }
        }
    }
    let out = out.into_inner().map_err(|e| Error::at(&cleaned_path)(e.into_error()))?;
    out.sync_all().map_err(Error::at(&cleaned_path))?;
    drop(out);
    result.bytes_out += written;
    result.segments_out += 1;
    let swap_path = with_suffix(&log_path, files::SWAP);
    fs::rename(&cleaned_path, &swap_path).map_err(Error::at(&cleaned_path))?;
    sync_dir(log.dir())?;
    log.replace_segments(group, &swap_path)
}

/// Consecutive segments whose sizes add up to at most `max_bytes` (one segment
/// alone may be larger), as Kafka's cleaner groups them.
fn group_by_size(segs: &[Arc<Segment>], max_bytes: u64) -> Vec<Vec<Arc<Segment>>> {
    let mut groups: Vec<Vec<Arc<Segment>>> = Vec::new();
    let mut size = 0u64;
    for s in segs {
        match groups.last_mut() {
            Some(g) if size + s.size() <= max_bytes => {
                g.push(s.clone());
                size += s.size();
            }
            _ => {
                groups.push(vec![s.clone()]);
                size = s.size();
            }
        }
    }
    groups
}

/// The batch with only the records to keep: None if nothing is kept (and no
/// shell is needed), the original bytes if everything is.
fn filter_batch<'b>(
    b: &RecordBatch<'b>,
    rules: &Keep<'_>,
    keep_shell: bool,
    result: &mut CleanResult,
) -> Result<Option<Cow<'b, [u8]>>> {
    let (map, now_ms, horizon) = (rules.map, rules.now_ms, rules.horizon);
    // A producer's last batch keeps its sequence in the log (Kafka's
    // `retainLastBatchSequence`), even with no record left.
    let keep_shell = keep_shell
        || (b.producer_id() >= 0 && rules.producers.get(&b.producer_id()) == Some(&b.last_offset()));
    if b.is_control() {
        return Ok(Some(Cow::Borrowed(b.as_bytes())));
    }
    let payload = b.records_payload()?;
    let records = b.records(&payload)?;
    result.records_in += records.len() as u64;
    let existing_horizon = b.has_delete_horizon().then(|| b.base_timestamp());
    let mut keep = Vec::with_capacity(records.len());
    let mut tombstones = false;
    for r in &records {
        let offset = b.base_offset() + i64::from(r.offset_delta);
        let Some(key) = r.key else { continue }; // keyless records have no place here
        if map.get(&key_hash(key)).is_some_and(|&latest| latest > offset) {
            continue;
        }
        if r.value.is_none() {
            if existing_horizon.is_some_and(|h| now_ms > h) {
                continue; // a tombstone past its delete horizon
            }
            tombstones = true;
        }
        keep.push(r);
    }
    result.records_out += keep.len() as u64;
    let new_horizon = if tombstones { existing_horizon.or(Some(horizon)) } else { existing_horizon };
    if tombstones {
        result.min_horizon = result.min_horizon.min(new_horizon.unwrap_or(horizon));
    }
    if keep.len() == records.len() && new_horizon == existing_horizon {
        return Ok(Some(Cow::Borrowed(b.as_bytes())));
    }
    if keep.is_empty() && !keep_shell {
        return Ok(None);
    }
    let mut builder = BatchBuilder::rewrite_of(b, new_horizon)?;
    for r in keep {
        builder.append_original(b.base_timestamp(), r);
    }
    Ok(Some(Cow::Owned(builder.build()?)))
}

#[cfg(test)]
#[path = "cleaner_test.rs"]
mod tests;
