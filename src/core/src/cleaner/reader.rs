//! The cleaner's view of a segment: its batches in order, read through one
//! buffer of a bounded size (Kafka's cleaner I/O buffer), grown only to hold a
//! single batch larger than it, so cleaning a 1 GiB segment does not take 1 GiB.

use crate::error::{CorruptBatch, Result};
use crate::record::batch::{peek_offset_and_size, HEADER_LEN};
use crate::record::RecordBatch;
use crate::segment::Segment;

pub(super) struct BatchReader<'s> {
    seg: &'s Segment,
    /// Where the segment's whole batches end.
    end: u64,
    /// The file position of `buf[0]`.
    buf_pos: u64,
    buf: Vec<u8>,
    /// `buf[start..len]` is read but not yet handed out.
    start: usize,
    len: usize,
}

impl<'s> BatchReader<'s> {
    pub(super) fn new(seg: &'s Segment, buffer_bytes: usize) -> Self {
        let end = seg.size();
        let cap =
            buffer_bytes.max(HEADER_LEN).min(usize::try_from(end).unwrap_or(usize::MAX).max(HEADER_LEN));
        BatchReader { seg, end, buf_pos: 0, buf: vec![0; cap], start: 0, len: 0 }
    }

    /// The memory the reader holds: the buffer size, or the largest batch.
    #[cfg(test)]
    pub(super) fn buffer_len(&self) -> usize {
        self.buf.len()
    }

    /// Makes `want` bytes from `start` available, reading what follows in the
    /// file; false if the segment ends first.
    fn fill(&mut self, want: usize) -> Result<bool> {
        if self.len - self.start >= want {
            return Ok(true);
        }
        let next = self.buf_pos + self.len as u64;
        if self.buf_pos + (self.start + want) as u64 > self.end {
            return Ok(false);
        }
        self.buf.copy_within(self.start..self.len, 0);
        self.len -= self.start;
        self.buf_pos += self.start as u64;
        self.start = 0;
        if want > self.buf.len() {
            self.buf.resize(want, 0);
        }
        let n = (self.buf.len() - self.len).min((self.end - next) as usize);
        self.seg.read_exact_at(&mut self.buf[self.len..self.len + n], next)?;
        // Copied out: the pages the copy mapped in need not stay resident, or
        // cleaning a segment would hold all of it in the process's memory.
        self.seg.release_mapped(next, n as u64);
        self.len += n;
        Ok(true)
    }

    /// The next batch, CRC-checked, and whether it is the segment's last; None
    /// at the end of the segment.
    pub(super) fn next_batch(&mut self) -> Result<Option<(RecordBatch<'_>, bool)>> {
        if self.buf_pos + self.start as u64 >= self.end {
            return Ok(None);
        }
        let available = (self.end - self.buf_pos - self.start as u64) as usize;
        if !self.fill(HEADER_LEN.min(available))? {
            return Ok(None);
        }
        let size = match peek_offset_and_size(&self.buf[self.start..self.len]) {
            Some((_, size)) if size >= HEADER_LEN && size <= available => size,
            Some((_, size)) if size >= HEADER_LEN => {
                return Err(CorruptBatch::LengthPastEnd { declared: size, available }.into())
            }
            _ => {
                return Err(
                    CorruptBatch::TooShort { have: available.min(HEADER_LEN), need: HEADER_LEN }.into()
                )
            }
        };
        self.fill(size)?;
        let at = self.start;
        self.start += size;
        let last = self.buf_pos + self.start as u64 >= self.end;
        Ok(Some((RecordBatch::parse(&self.buf[at..at + size])?, last)))
    }
}
