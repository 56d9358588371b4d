//! The log's side of producer state: rebuilding it from snapshots and the
//! log's batches (on open and after a truncation), snapshots at rolls and at
//! close, and the expiry of idle producers.

use std::collections::HashMap;

use super::PartitionLog;
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::producer_state::{snapshot, ProducerBatch, ProducerStateEntry, ProducerStateManager};

impl PartitionLog {
    /// Kafka's `rebuildProducerState`: the state as of `last_offset`, from the
    /// latest sound snapshot at or below it (damaged ones are deleted) plus
    /// the batches after it. After a clean shutdown a log without any snapshot
    /// had no idempotent producers worth a scan (Kafka's upgrade rule): it gets
    /// empty snapshots instead. Snapshots are also taken at the bases of the
    /// last two segments, so that a later recovery scans at most those.
    pub(super) fn rebuild_producer_state(
        &self,
        state: &mut ProducerStateManager,
        last_offset: i64,
        clean_shutdown: bool,
    ) -> Result<Vec<Error>> {
        let bases = self.segment_bases();
        // Ascending: a snapshot is taken only past the latest one.
        let mut snapshot_at: Vec<i64> = bases[bases.len().saturating_sub(2)..].to_vec();
        snapshot_at.push(last_offset);
        let log_start = self.log_start_offset();
        let config = self.config();
        let mut damaged = Vec::new();
        if state.latest_snapshot().is_none() && clean_shutdown {
            for &o in &snapshot_at {
                state.set_map_end(o);
                state.take_snapshot(false)?;
            }
        } else {
            let empty_before = state.is_empty() && state.map_end() >= last_offset;
            damaged = state.truncate_and_reload(
                log_start,
                last_offset,
                now_ms(),
                config.producer_id_expiration_ms,
            )?;
            if last_offset > state.map_end() && !empty_before {
                let from = state.map_end();
                let segs: Vec<_> = self
                    .segments()
                    .into_iter()
                    .zip(bases.iter().skip(1).copied().chain(std::iter::once(i64::MAX)))
                    .filter(|(s, next)| *next > from && s.base_offset < last_offset)
                    .map(|(s, _)| s)
                    .collect();
                for seg in segs {
                    let start = seg.base_offset.max(state.map_end()).max(log_start);
                    state.set_map_end(start);
                    if snapshot_at.contains(&seg.base_offset) {
                        state.take_snapshot(false)?;
                    }
                    let mut batches = Vec::new();
                    // A damaged stretch (reads report it) ends what can be
                    // learnt from this segment; the rest still counts.
                    let _ = seg.for_each_header(start, last_offset, |info, b| {
                        if let Some(pb) = ProducerBatch::of(b, info.base_offset, info.max_timestamp) {
                            batches.push(pb);
                        }
                    });
                    for b in &batches {
                        state.apply(b);
                    }
                }
            }
            state.set_map_end(last_offset);
            state.take_snapshot(false)?;
        }
        self.note_unsynced_snapshots(state);
        Ok(damaged)
    }

    /// Snapshots written without an fsync are synced by the next flush.
    pub(super) fn note_unsynced_snapshots(&self, state: &mut ProducerStateManager) {
        let unsynced = state.take_unsynced();
        if !unsynced.is_empty() {
            self.unsynced_snapshots.lock().extend(unsynced);
            self.dir_dirty.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// fsyncs the snapshots written since the last flush.
    pub(super) fn sync_snapshots(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.unsynced_snapshots.lock());
        for (i, p) in pending.iter().enumerate() {
            if let Err(e) = snapshot::sync(p) {
                self.unsynced_snapshots.lock().extend(pending[i..].iter().cloned());
                return Err(e);
            }
        }
        Ok(())
    }

    /// A snapshot at a new segment's base, as Kafka takes at every roll: a
    /// later recovery starts from it rather than from the log's start. Best
    /// effort: a snapshot only saves a scan, so failing to write one (a full
    /// disk) does not fail the append that rolled.
    pub(super) fn snapshot_at_roll(&self, state: &mut ProducerStateManager, base: i64) {
        state.set_map_end(base);
        let _ = state.take_snapshot(false);
        self.note_unsynced_snapshots(state);
    }

    /// Forgets producers idle for `producer.id.expiration.ms` (Kafka's
    /// periodic `removeExpiredProducers`). Returns how many went.
    pub fn remove_expired_producers(&self, now_ms: i64) -> usize {
        if self.read_only {
            return 0;
        }
        let expiration = self.config().producer_id_expiration_ms;
        self.writer.lock().producers.remove_expired(now_ms, expiration)
    }

    /// The log's state for `producer_id`, if it knows the producer. A
    /// read-only opener knows none: it never builds producer state.
    pub fn producer_state(&self, producer_id: i64) -> Option<ProducerStateEntry> {
        self.writer.lock().producers.entry(producer_id).cloned()
    }

    /// How many producer ids the log knows.
    pub fn producer_count(&self) -> usize {
        self.writer.lock().producers.producer_count()
    }

    /// The offsets of the log's producer state snapshot files, oldest first.
    pub fn producer_snapshot_offsets(&self) -> Vec<i64> {
        self.writer.lock().producers.snapshot_offsets()
    }

    /// Each known producer's last data offset (what the cleaner must keep).
    pub fn producer_last_offsets(&self) -> HashMap<i64, i64> {
        self.writer.lock().producers.last_data_offsets()
    }
}

#[cfg(test)]
#[path = "producers_test.rs"]
mod tests;
