//! Kafka's `compact` cleanup policy: keep, for each key, only its latest record.
//!
//! A pass maps each key of the dirty part of the log (from the cleaner
//! checkpoint to the active segment) to its latest offset, in a map bounded by
//! the dedupe buffer (a huge topic is cleaned in several passes); then rewrites
//! the inactive segments, in groups of at most `segment.bytes`, keeping a record
//! only if no later record has its key. Offsets never change (gaps are fine);
//! each batch keeps its base offset and last offset delta. Tombstones are kept
//! until their batch's delete horizon (set, as Kafka does, to now +
//! `delete.retention.ms` when a cleaning first keeps them) has passed.
//!
//! A cleaned group is written as `<base>.log.cleaned`, fsynced, renamed to
//! `.swap`; the old segments are renamed `.deleted`; the swap becomes the
//! segment. A crash at any point leaves files that `recover_swaps` completes.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checkpoint::sync_dir;
use crate::error::{Error, Result};
use crate::log::PartitionLog;
use crate::maintenance::rename_deleted;
use crate::record::batch::BatchIter;
use crate::record::{BatchBuilder, NewRecord, RecordBatch};
use crate::segment::{file_name, parse_file_name, Segment, SegmentMode};

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

/// The dirty ratio of a log: bytes past the cleaner checkpoint over all bytes of
/// its inactive segments.
pub fn dirty_ratio(log: &PartitionLog, first_dirty: i64) -> f64 {
    let segs: Vec<Arc<Segment>> = log.segments.read().values().cloned().collect();
    let Some((_, inactive)) = segs.split_last() else { return 0.0 };
    let total: u64 = inactive.iter().map(|s| s.size()).sum();
    if total == 0 {
        return 0.0;
    }
    let next_bases: Vec<i64> = segs.iter().skip(1).map(|s| s.base_offset).collect();
    let dirty: u64 =
        inactive.iter().zip(next_bases).filter(|(_, next)| *next > first_dirty).map(|(s, _)| s.size()).sum();
    dirty as f64 / total as f64
}

/// Completes or discards what an interrupted cleaning left in `dir` (Kafka's
/// rules): `.cleaned` files are dropped; a `.swap` log is whole (it was fsynced
/// before the rename), so the segments it covers give way to it.
pub fn recover_swaps(dir: &Path) -> Result<()> {
    let mut swaps = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let path = entry.map_err(Error::at(dir))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        if name.ends_with(".cleaned") {
            fs::remove_file(&path).map_err(Error::at(&path))?;
        } else if let Some(stem) = name.strip_suffix(".swap") {
            match parse_file_name(stem, ".log") {
                Some(base) => swaps.push((base, path)),
                // Index swaps are rebuilt from the log instead.
                None => fs::remove_file(&path).map_err(Error::at(&path))?,
            }
        }
    }
    for (base, swap) in swaps {
        let data = fs::read(&swap).map_err(Error::at(&swap))?;
        let mut next = base;
        for b in BatchIter::new(&data, true) {
            match b {
                Ok(b) => next = b.last_offset() + 1,
                Err(_) => break,
            }
        }
        for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
            let path = entry.map_err(Error::at(dir))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let covered = [".log", ".index", ".timeindex"]
                .iter()
                .any(|sfx| parse_file_name(name, sfx).is_some_and(|b| b >= base && b < next));
            if covered {
                fs::remove_file(&path).map_err(Error::at(&path))?;
            }
        }
        fs::rename(&swap, dir.join(file_name(base, ".log"))).map_err(Error::at(&swap))?;
    }
    sync_dir(dir)
}

impl PartitionLog {
    /// One cleaning pass. `first_dirty` is the cleaner checkpoint; with `force`
    /// the dirty ratio is not checked. Returns None when there was nothing to do.
    pub fn clean(
        &self,
        first_dirty: i64,
        now_ms: i64,
        buffer_bytes: usize,
        force: bool,
    ) -> Result<Option<CleanResult>> {
        let config = self.config();
        if !config.cleanup_policy.compact || self.is_read_only() {
            return Ok(None);
        }
        let _m = self.maintenance.lock();
        self.check_open()?;
        let segs: Vec<Arc<Segment>> = self.segments.read().values().cloned().collect();
        let Some((active, inactive)) = segs.split_last() else { return Ok(None) };
        let first_dirty = first_dirty.max(self.log_start_offset());
        // Tombstones whose delete horizon has passed make a log cleanable even
        // when nothing is dirty (Kafka, KIP-534).
        let horizon_due = self.tombstone_horizon.load(Ordering::Acquire) <= now_ms;
        let nothing_dirty = first_dirty >= active.base_offset;
        if inactive.is_empty() || (nothing_dirty && !horizon_due) {
            return Ok(None);
        }
        if !force && !horizon_due && dirty_ratio(self, first_dirty) < config.min_cleanable_dirty_ratio {
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
            let data = seg.read_bytes(0, seg.size() as usize)?;
            let before = map.len();
            for batch in BatchIter::new(&data, true) {
                let b = batch?;
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
                self.topic, self.partition
            )));
        }

        // 2. Rewrite every inactive segment below `map_end`, in groups.
        let cleanable: Vec<Arc<Segment>> =
            inactive.iter().zip(&ends).filter(|(_, &end)| end <= map_end).map(|(s, _)| s.clone()).collect();
        let mut result = CleanResult { cleaned_to: map_end, min_horizon: i64::MAX, ..CleanResult::default() };
        let horizon = now_ms.saturating_add(config.delete_retention_ms);
        for group in group_by_size(&cleanable, config.segment_bytes) {
            self.clean_group(&group, &map, now_ms, horizon, &mut result)?;
        }
        self.tombstone_horizon.store(result.min_horizon, Ordering::Release);
        Ok(Some(result))
    }

    fn clean_group(
        &self,
        group: &[Arc<Segment>],
        map: &HashMap<u128, i64>,
        now_ms: i64,
        horizon: i64,
        result: &mut CleanResult,
    ) -> Result<()> {
        let base = group[0].base_offset;
        let cleaned_path = self.dir.join(format!("{}.cleaned", file_name(base, ".log")));
        let mut out = File::create(&cleaned_path).map_err(Error::at(&cleaned_path))?;
        let mut written = 0u64;
        for (i, seg) in group.iter().enumerate() {
            let data = seg.read_bytes(0, seg.size() as usize)?;
            result.bytes_in += data.len() as u64;
            result.segments_in += 1;
            let batches: Vec<RecordBatch<'_>> = BatchIter::new(&data, true).collect::<Result<_, _>>()?;
            let last_index = batches.len().saturating_sub(1);
            for (j, b) in batches.iter().enumerate() {
                // The group's last batch is kept (if only as an empty batch) so
                // that the cleaned segment still ends where the group did.
                let keep_shell = i + 1 == group.len() && j == last_index;
                let bytes = filter_batch(b, map, now_ms, horizon, keep_shell, result)?;
                if let Some(bytes) = bytes {
                    out.write_all(&bytes).map_err(Error::at(&cleaned_path))?;
                    written += bytes.len() as u64;
                }
            }
        }
        out.sync_all().map_err(Error::at(&cleaned_path))?;
        drop(out);
        result.bytes_out += written;
        result.segments_out += 1;

        // Swap it in: .cleaned -> .swap, old segments -> .deleted, .swap -> .log.
        let swap_path = self.dir.join(format!("{}.swap", file_name(base, ".log")));
        fs::rename(&cleaned_path, &swap_path).map_err(Error::at(&cleaned_path))?;
        sync_dir(&self.dir)?;
        let config = self.config();
        let _w = self.writer.lock();
        if let Err(e) = self.check_open() {
            // Closed meanwhile: leave the log as it was; recovery drops the swap.
            let _ = fs::remove_file(&swap_path);
            return Err(e);
        }
        let mut deleted = Vec::new();
        for seg in group {
            deleted.extend(rename_deleted(&self.dir, seg.base_offset)?);
        }
        // The old segments must be gone, durably, before the swap takes their place.
        sync_dir(&self.dir)?;
        fs::rename(&swap_path, self.dir.join(file_name(base, ".log"))).map_err(Error::at(&swap_path))?;
        sync_dir(&self.dir)?;
        let new = Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Active)?;
        new.recover(config.index_interval_bytes, u64::MAX, true)?;
        new.seal()?;
        drop(new);
        let sealed =
            Arc::new(Segment::open(&self.dir, base, config.segment_index_bytes, SegmentMode::Sealed)?);
        let mut segs = self.segments.write();
        for seg in group {
            segs.remove(&seg.base_offset);
        }
        segs.insert(base, sealed);
        drop(segs);
        let due = Instant::now() + Duration::from_millis(config.file_delete_delay_ms.max(0) as u64);
        self.pending_deletes.lock().extend(deleted.into_iter().map(|p| (due, p)));
        Ok(())
    }
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
fn filter_batch(
    b: &RecordBatch<'_>,
    map: &HashMap<u128, i64>,
    now_ms: i64,
    horizon: i64,
    keep_shell: bool,
    result: &mut CleanResult,
) -> Result<Option<Vec<u8>>> {
    if b.is_control() {
        return Ok(Some(b.as_bytes().to_vec()));
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
        return Ok(Some(b.as_bytes().to_vec()));
    }
    if keep.is_empty() && !keep_shell {
        return Ok(None);
    }
    let mut builder = BatchBuilder::rewrite_of(b, new_horizon)?;
    let base_ts = b.base_timestamp();
    for r in keep {
        let ts = base_ts + r.timestamp_delta;
        builder.append_at(
            r.offset_delta,
            &NewRecord { timestamp: ts, key: r.key, value: r.value, headers: &r.headers },
        );
    }
    Ok(Some(builder.build()))
}

#[cfg(test)]
#[path = "cleaner_test.rs"]
mod tests;
