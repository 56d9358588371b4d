//! A read-only opener catching up with the tail of a segment another process
//! is appending to: it takes in whole, CRC-valid batches only, and tells a
//! batch being written from a damaged one.

use std::sync::atomic::Ordering;

use super::Segment;
use crate::error::{Error, Result};
use crate::record::batch::{peek_offset_and_size, RecordBatch, HEADER_LEN, LOG_OVERHEAD};

impl Segment {
    /// For a reader in another process: takes in the whole, CRC-valid batches the
    /// writer appended since the last call, and the index entries it added with
    /// them. Returns the next offset if it moved.
    pub fn catch_up_tail(&self) -> Result<Option<i64>> {
        self.catch_up_tail_then(true)
    }

    /// As `catch_up_tail`, for a segment just opened (its index read a moment
    /// ago): the index is not read again, as an entry the writer added since
    /// only spares a lookup a short walk and the next catch-up that finds new
    /// bytes reads it. Saves a first read five system calls.
    pub fn catch_up_opened_tail(&self) -> Result<Option<i64>> {
        self.catch_up_tail_then(false)
    }

    fn catch_up_tail_then(&self, reload_index: bool) -> Result<Option<i64>> {
        let file_size = self.log.metadata().map_err(Error::at(&self.log_path))?.len();
        let mut pos = self.size();
        let mut next = None;
        while pos + HEADER_LEN as u64 <= file_size {
            let mut head = [0u8; LOG_OVERHEAD];
            self.read_exact_at(&mut head, pos)?;
            let Some((_, size)) = peek_offset_and_size(&head) else { break };
            if size < HEADER_LEN || pos + size as u64 > file_size {
                break;
            }
            let mut bytes = self.read_bytes(pos, size)?;
            if RecordBatch::parse(&bytes).is_err() {
                // Torn (the writer is still writing it) or damaged? The writer
                // appends one batch at a time, so if a whole, valid batch follows,
                // this one was finished first: read it again to tell.
                if !self.valid_batch_at(pos + size as u64, file_size)? {
                    break;
                }
                bytes = self.read_bytes(pos, size)?;
                if RecordBatch::parse(&bytes).is_err() {
                    self.damaged_at.store(pos, Ordering::Release);
                    break;
                }
            }
            let Ok(batch) = RecordBatch::parse(&bytes) else { break };
            next = Some(batch.last_offset() + 1);
            pos += size as u64;
        }
        if next.is_some() {
            self.size.store(pos, Ordering::Release);
            if reload_index {
                self.indexes.lock().offsets.reload()?;
            }
        }
        Ok(next)
    }

    fn valid_batch_at(&self, pos: u64, file_size: u64) -> Result<bool> {
        if pos + HEADER_LEN as u64 > file_size {
            return Ok(false);
        }
        let mut head = [0u8; LOG_OVERHEAD];
        self.read_exact_at(&mut head, pos)?;
        let Some((_, size)) = peek_offset_and_size(&head) else { return Ok(false) };
        if size < HEADER_LEN || pos + size as u64 > file_size {
            return Ok(false);
        }
        Ok(RecordBatch::parse(&self.read_bytes(pos, size)?).is_ok())
    }
}
