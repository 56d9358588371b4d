//! Recovery of a segment after an unclean stop: every batch is checked, the
//! indexes are rebuilt, and the file is cut at the first bad or torn batch.

use std::sync::atomic::Ordering;

use super::{BatchInfo, Segment, READ_CHUNK};
use crate::error::{Error, Result};
use crate::record::batch::{peek_offset_and_size, RecordBatch, HEADER_LEN, LOG_OVERHEAD};

/// What recovery found in a segment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recovered {
    pub valid_bytes: u64,
    pub truncated_bytes: u64,
    /// One past the last offset of the last valid batch, if there was one.
    pub next_offset: Option<i64>,
    pub batches: u64,
}

impl Segment {
    /// Scans the whole segment, CRC-checking every batch and rebuilding both
    /// indexes; truncates the file at the first invalid or torn batch.
    ///
    /// baseOffset lies outside the CRC, so offsets are checked against their
    /// neighbours: a batch must start where the previous one ended, or (with
    /// `allow_gaps`, for compacted logs, whose cleaner removes whole batches)
    /// at least not before it.
    pub fn recover(&self, index_interval: u64, max_batch_bytes: u64, allow_gaps: bool) -> Result<Recovered> {
        self.rebuild(index_interval, max_batch_bytes, allow_gaps, true)
    }

    /// As `recover`; with `cut` false the file keeps what follows the last valid
    /// batch (a sealed segment's damage stays for reads to report), and only the
    /// indexes and the committed size stop there.
    pub fn rebuild(
        &self,
        index_interval: u64,
        max_batch_bytes: u64,
        allow_gaps: bool,
        cut: bool,
    ) -> Result<Recovered> {
        let file_size = self.log.metadata().map_err(Error::at(&self.log_path))?.len();
        let mut ix = self.indexes.lock();
        ix.offsets.reset();
        ix.times.reset();
        ix.bytes_since_last_entry = 0;
        ix.max_timestamp_so_far = -1;
        ix.offset_of_max_timestamp = self.base_offset;
        ix.first_batch_timestamp = None;
        let mut out = Recovered::default();
        let mut pos = 0u64;
        let mut expected_next = self.base_offset;
        let mut chunk: Vec<u8> = Vec::new();
        let mut chunk_pos = 0u64;
        loop {
            if pos + LOG_OVERHEAD as u64 > file_size {
                break;
            }
            // Make sure the whole batch at `pos` is in `chunk`.
            let rel = (pos - chunk_pos) as usize;
            if chunk.len() < rel + LOG_OVERHEAD {
                let n = ((file_size - pos) as usize).min(READ_CHUNK.max(LOG_OVERHEAD));
                chunk = self.read_bytes(pos, n)?;
                chunk_pos = pos;
                continue;
            }
            // A length that is negative or overflows is a damaged batch: cut here.
            let Some((_, size)) = peek_offset_and_size(&chunk[rel..]) else { break };
            let size = size as u64;
            if size < HEADER_LEN as u64 || size > max_batch_bytes || pos + size > file_size {
                break;
            }
            if rel as u64 + size > chunk.len() as u64 {
                let n = ((file_size - pos) as usize).min(READ_CHUNK.max(size as usize));
                chunk = self.read_bytes(pos, n)?;
                chunk_pos = pos;
                continue;
            }
            let bytes = &chunk[rel..rel + size as usize];
            let Ok(batch) = RecordBatch::parse(bytes) else { break };
            let misplaced = if allow_gaps {
                batch.base_offset() < expected_next
            } else {
                batch.base_offset() != expected_next
            };
            if misplaced
                || batch.last_offset() < batch.base_offset()
                || batch.last_offset() - self.base_offset > i64::from(i32::MAX)
            {
                break;
            }
            let info = BatchInfo::from_batch(pos, &batch);
            if ix.first_batch_timestamp.is_none() {
                ix.first_batch_timestamp = Some(info.max_timestamp);
            }
            if info.max_timestamp > ix.max_timestamp_so_far {
                ix.max_timestamp_so_far = info.max_timestamp;
                ix.offset_of_max_timestamp = info.last_offset;
            }
            // An index that fills (a smaller `segment.index.bytes` than the one the
            // segment was written with) stops taking entries: lookups then scan
            // further. A full index says nothing about the batch, so never cut here.
            if ix.bytes_since_last_entry > index_interval && !ix.offsets.is_full() {
                if let Ok(position) = u32::try_from(pos) {
                    ix.offsets.append(info.last_offset, position)?;
                    let (ts, off) = (ix.max_timestamp_so_far, ix.offset_of_max_timestamp);
                    ix.times.maybe_append(ts, off, false)?;
                    ix.bytes_since_last_entry = 0;
                }
            }
            ix.bytes_since_last_entry += size;
            expected_next = info.last_offset + 1;
            out.next_offset = Some(expected_next);
            out.batches += 1;
            pos += size;
        }
        out.valid_bytes = pos;
        out.truncated_bytes = file_size - pos;
        if !cut {
            out.truncated_bytes = 0;
        }
        let shortening = self.map.shorten();
        if out.truncated_bytes > 0 && self.writable {
            self.set_file_len(pos).map_err(Error::at(&self.log_path))?;
            self.log.sync_all().map_err(Error::at(&self.log_path))?;
        }
        self.size.store(pos, Ordering::Release);
        drop(shortening);
        self.verified.truncate(pos);
        Ok(out)
    }
}
