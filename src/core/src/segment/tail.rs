//! A read-only opener catching up with the tail of a segment another process
//! is appending to: it takes in whole, CRC-valid batches only, and tells a
//! batch being written from a damaged one.

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;

use super::Segment;
use crate::error::{Error, Result};
use crate::record::batch::{peek_offset_and_size, RecordBatch, HEADER_LEN};

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
        loop {
            let (last, size) = match self.tail_batch_at(pos, file_size)? {
                TailBatch::Valid { last, size } => (last, size),
                TailBatch::Partial => break,
                // Torn (the writer is still writing it) or damaged? The writer
                // appends one batch at a time, so if a whole, valid batch follows,
                // this one was finished first: read it again to tell.
                TailBatch::Invalid { size } => {
                    if !matches!(self.tail_batch_at(pos + size as u64, file_size)?, TailBatch::Valid { .. }) {
                        break;
                    }
                    match self.tail_batch_at(pos, file_size)? {
                        TailBatch::Valid { last, size } => (last, size),
                        _ => {
                            self.damaged_at.store(pos, Ordering::Release);
                            break;
                        }
                    }
                }
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

    /// The batch at `pos` in a file of `file_size` bytes, read through a buffer
    /// on the stack, piece by piece, its CRC-32C taken as it goes; its first
    /// piece gives its length too, so each batch is one read when it fits one.
    /// (A heap buffer of a batch's size would be a fresh process's first, and
    /// land on a fresh 2 MiB huge page, ~150-250 µs to zero on a VM, in the
    /// catch-up before a cold lookup.)
    fn tail_batch_at(&self, pos: u64, file_size: u64) -> Result<TailBatch> {
        let Some(left) = file_size.checked_sub(pos).filter(|&l| l >= HEADER_LEN as u64) else {
            return Ok(TailBatch::Partial);
        };
        let mut buf = [MaybeUninit::<u8>::uninit(); TAIL_PIECE];
        let first_len = left.min(TAIL_PIECE as u64) as usize;
        let first = self.read_exact_at_uninit(&mut buf[..first_len], pos)?;
        let Some((_, size)) = peek_offset_and_size(first) else { return Ok(TailBatch::Partial) };
        if size < HEADER_LEN || size as u64 > left {
            return Ok(TailBatch::Partial);
        }
        let Ok(head) = RecordBatch::header_only(first) else { return Ok(TailBatch::Invalid { size }) };
        let last = head.last_offset();
        let mut crc = head.piecewise_crc();
        let first = &first[..size.min(first_len)];
        crc.update(&first[HEADER_LEN..]);
        let mut at = first.len();
        while at < size {
            let piece =
                self.read_exact_at_uninit(&mut buf[..(size - at).min(TAIL_PIECE)], pos + at as u64)?;
            crc.update(piece);
            at += piece.len();
        }
        Ok(if crc.matches() { TailBatch::Valid { last, size } } else { TailBatch::Invalid { size } })
    }
}

/// What `tail_batch_at` found.
enum TailBatch {
    /// Whole and CRC-valid: its last offset and its size.
    Valid { last: i64, size: usize },
    /// Not all there (yet): the file ends inside it, or its length is no length.
    Partial,
    /// All its bytes are there but it does not check out: torn or damaged.
    Invalid { size: usize },
}

/// The piece `tail_batch_at` reads at a time: a batch of up to 32 KiB
/// (twice Kafka's default `batch.size`) in one read, as a lookup's slice.
pub(super) const TAIL_PIECE: usize = 32 * 1024;
