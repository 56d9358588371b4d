//! The consumer's reads: batches from an offset on, CRC-checked, stepping over
//! batches that a cleaning emptied, decoded for record-by-record use or
//! straight into Arrow columns.

use std::sync::Arc;

use super::columns::Columns;
use crate::error::Result;
use crate::log::PartitionLog;
use crate::record::parse_records;
use crate::record::{BatchIter, RecordBatch, TimestampType};
use crate::store::Store;

/// One batch of a read, its records still encoded (decompressed).
pub struct DecodedBatch {
    pub base_offset: i64,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub log_append_time: bool,
    pub payload: Vec<u8>,
    pub records: i32,
    pub last_offset_delta: i32,
    pub control: bool,
}

impl DecodedBatch {
    pub fn next_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta) + 1
    }

    /// Every offset of the batch holds a record (not so after compaction).
    pub fn contiguous(&self) -> bool {
        i64::from(self.records) == i64::from(self.last_offset_delta) + 1
    }

    /// Whether a record at `offset` or later is in the batch.
    pub fn has_records_from(&self, offset: i64) -> bool {
        if self.control || self.records == 0 || self.next_offset() <= offset {
            return false;
        }
        if self.contiguous() {
            return true;
        }
        parse_records(&self.payload, self.records, self.last_offset_delta)
            .map(|rs| rs.iter().any(|r| self.base_offset + i64::from(r.offset_delta) >= offset))
            .unwrap_or(true)
    }
}

/// Decodes the batches laid back to back in `bytes`.
pub fn decode(bytes: &[u8], verify_crc: bool) -> Result<Vec<DecodedBatch>> {
    let mut out = Vec::new();
    for b in BatchIter::new(bytes, verify_crc) {
        let b: RecordBatch<'_> = b?;
        out.push(DecodedBatch {
            base_offset: b.base_offset(),
            base_timestamp: b.base_timestamp(),
            max_timestamp: b.max_timestamp(),
            log_append_time: b.timestamp_type() == TimestampType::LogAppendTime,
            payload: b.records_payload()?.into_owned(),
            records: b.records_count(),
            last_offset_delta: b.last_offset_delta(),
            control: b.is_control(),
        });
    }
    Ok(out)
}

/// Batches from `offset` on, at most about `max_bytes` of them, the first one
/// holding a record at `offset` or later: batches a cleaning emptied (or that
/// hold only records before `offset`) are stepped over, so that an empty result
/// means the end of the log.
pub fn read_batches(log: &PartitionLog, offset: i64, max_bytes: u64) -> Result<Vec<DecodedBatch>> {
    let mut pos = offset;
    loop {
        let slice = log.read(pos, max_bytes)?;
        let bytes = slice.bytes()?;
        // Every batch a reader gets is CRC-checked: nothing corrupt reaches it.
        let batches = decode(&bytes, true).map_err(|e| slice.locate(e))?;
        let Some(last) = batches.last() else { return Ok(batches) };
        if batches.iter().any(|b| b.has_records_from(offset)) {
            return Ok(batches);
        }
        let next = last.next_offset();
        if next <= pos || next >= log.log_end_offset() {
            return Ok(batches);
        }
        pos = next;
    }
}

/// Records of several partitions, each from its offset on, as Arrow columns:
/// at most `max_records` in all, reading `max_bytes` of log at a time. Returns
/// the columns and, per request, the offset to read next (None if nothing was
/// read from it).
pub fn read_columns(
    store: &Store,
    requests: &[(String, i32, i64)],
    max_records: usize,
    max_bytes: u64,
) -> Result<(Columns, Vec<Option<i64>>)> {
    let mut cols = Columns::default();
    let mut nexts = Vec::with_capacity(requests.len());
    for (topic, p, offset) in requests {
        let log: Arc<PartitionLog> = store.partition(topic, *p)?;
        let mut pos = *offset;
        let mut next = None;
        while cols.rows < max_records {
            let slice = log.read(pos, max_bytes)?;
            if slice.range.is_none() {
                break;
            }
            let bytes = slice.bytes()?;
            match cols.extend(topic, *p, &bytes, pos, max_records, true).map_err(|e| slice.locate(e))? {
                Some(n) if n > pos => {
                    pos = n;
                    next = Some(n);
                }
                _ => break,
            }
        }
        nexts.push(next);
    }
    Ok((cols, nexts))
}
