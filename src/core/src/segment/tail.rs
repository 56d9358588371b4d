//! A read-only opener catching up with the tail of a segment another process
//! is appending to: it takes in whole, CRC-valid batches only, and tells a
//! batch being written from a damaged one.

use std::mem::MaybeUninit;
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
            let last = match self.checked_batch_at(pos, size)? {
                Some(last) => last,
                // Torn (the writer is still writing it) or damaged? The writer
                // appends one batch at a time, so if a whole, valid batch follows,
                // this one was finished first: read it again to tell.
                None if !self.valid_batch_at(pos + size as u64, file_size)? => break,
                None => match self.checked_batch_at(pos, size)? {
                    Some(last) => last,
                    None => {
                        self.damaged_at.store(pos, Ordering::Release);
                        break;
                    }
                },
            };
            next = Some(last + 1);
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
        Ok(self.checked_batch_at(pos, size)?.is_some())
    }

    /// The last offset of the `size`-byte batch at `pos` if it is whole and its
    /// CRC-32C holds. It is read through a buffer on the stack, piece by piece:
    /// a heap buffer of a batch's size was a fresh process's first, and landed
    /// on a fresh 2 MiB huge page (~150-250 µs to zero here) in the catch-up
    /// before a cold lookup.
    fn checked_batch_at(&self, pos: u64, size: usize) -> Result<Option<i64>> {
        let mut buf = [MaybeUninit::<u8>::uninit(); TAIL_PIECE];
        let first = self.read_exact_at_uninit(&mut buf[..size.min(TAIL_PIECE)], pos)?;
        let Ok(head) = RecordBatch::header_only(first) else { return Ok(None) };
        if head.size() != size {
            return Ok(None);
        }
        let last = head.last_offset();
        let mut crc = head.piecewise_crc();
        crc.update(&first[HEADER_LEN..]);
        let mut at = first.len();
        while at < size {
            let piece =
                self.read_exact_at_uninit(&mut buf[..(size - at).min(TAIL_PIECE)], pos + at as u64)?;
            crc.update(piece);
            at += piece.len();
        }
        Ok(crc.matches().then_some(last))
    }
}

/// The piece `checked_batch_at` reads at a time: a batch of up to 32 KiB
/// (twice Kafka's default `batch.size`) in one read, as a lookup's slice.
pub(super) const TAIL_PIECE: usize = 32 * 1024;
