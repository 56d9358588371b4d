//! Appending as a follower: the leader's batches written as they are, their
//! offsets, leader epochs and timestamps kept (Kafka's `appendAsFollower`).

use super::{AppendInfo, PartitionLog, MAX_OFFSET};
use crate::error::{Error, Result};
use crate::producer_state::ProducerBatch;
use crate::record::RecordBatch;
use crate::segment::BatchInfo;

impl PartitionLog {
    /// Appends the leader's batches in `buf` (back to back) unchanged. Every
    /// batch must pass its CRC and the size limit; the first must start at
    /// the log end and each next one after the last (a compacted topic's
    /// batches may skip offsets the cleaner removed), else the whole append is
    /// refused. The leader epoch cache takes each batch's epoch, the producer
    /// state its producer fields (unchecked: the leader checked them). The
    /// high watermark does not move: the leader says where it is
    /// (`set_high_watermark`).
    pub fn append_as_follower(&self, buf: Vec<u8>) -> Result<AppendInfo> {
        if self.read_only {
            return Err(Error::ReadOnly("append"));
        }
        let config = self.config();
        let rules = self.rules(&config);
        let mut w = self.writer.lock();
        self.check_open()?;
        let first = self.log_end_offset();
        // Each batch's bytes, header facts, leader epoch and producer fields.
        let (mut parts, mut infos, mut epochs, mut producers) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut expected = first;
        let mut pos = 0;
        while pos < buf.len() {
            let b = RecordBatch::parse(&buf[pos..]).map_err(|e| {
                Error::InvalidArgument(format!(
                    "follower append to {}-{}: the batch at byte {pos} is bad: {e}",
                    self.topic, self.partition
                ))
            })?;
            rules.check_size(&b)?;
            let gap_ok = config.cleanup_policy.compact && !infos.is_empty();
            if b.base_offset() < expected || (b.base_offset() > expected && !gap_ok) {
                let want = if infos.is_empty() { "the log end" } else { "the end of the batch before it" };
                return Err(Error::InvalidArgument(format!(
                    "follower append to {}-{}: the batch at byte {pos} starts at offset {}, expected {expected} \
                     ({want})",
                    self.topic,
                    self.partition,
                    b.base_offset()
                )));
            }
            if b.last_offset() < b.base_offset() || b.last_offset() > MAX_OFFSET {
                return Err(Error::InvalidArgument(format!(
                    "follower append to {}-{}: the batch at byte {pos} has offsets {}..={}, expected them rising \
                     and at most {MAX_OFFSET}",
                    self.topic,
                    self.partition,
                    b.base_offset(),
                    b.last_offset()
                )));
            }
            parts.push(b.as_bytes());
            infos.push(BatchInfo {
                position: 0,
                size: b.size() as u64,
                base_offset: b.base_offset(),
                last_offset: b.last_offset(),
                max_timestamp: b.max_timestamp(),
                records: b.records_count(),
            });
            epochs.push(b.partition_leader_epoch());
            producers.push(ProducerBatch::of(&b, b.base_offset(), b.max_timestamp()));
            expected = b.last_offset() + 1;
            pos += b.size();
        }
        if infos.is_empty() {
            return Err(Error::InvalidArgument("nothing to append: no record batch given".into()));
        }
        // Written as a leader's are: runs of batches, one write each (a write per
        // batch runs at half the speed of the same bytes written in runs).
        let (next, records) =
            match self.write_in_runs(&config, &parts, &infos, |i| epochs[i], &producers, &mut w) {
                Ok(reached) => reached,
                Err((next, e)) => return Err(self.give_up_append(first, next, e, &mut w)),
            };
        // A follower's high watermark comes from its leader, not its appends.
        self.publish_append(w, &config, next, records, false)?;
        Ok(AppendInfo {
            base_offset: first,
            last_offset: next - 1,
            log_append_time: -1,
            records,
            duplicate: false,
        })
    }
}

#[cfg(test)]
#[path = "follower_test.rs"]
mod tests;
