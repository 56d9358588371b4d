//! Walking the batches laid back to back in a buffer.

use super::batch::RecordBatch;
use crate::error::CorruptBatch;

/// Iterates the batches laid back to back in `buf` (a segment or a read result),
/// stopping cleanly at a trailing partial batch.
pub struct BatchIter<'a> {
    buf: &'a [u8],
    pos: usize,
    verify_crc: bool,
}

impl<'a> BatchIter<'a> {
    pub fn new(buf: &'a [u8], verify_crc: bool) -> Self {
        BatchIter { buf, pos: 0, verify_crc }
    }
    /// Byte position of the next batch.
    pub fn position(&self) -> usize {
        self.pos
    }
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<RecordBatch<'a>, CorruptBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let parsed = if self.verify_crc { RecordBatch::parse(rest) } else { RecordBatch::parse_header(rest) };
        match parsed {
            Ok(b) => {
                self.pos += b.size();
                Some(Ok(b))
            }
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e))
            }
        }
    }
}
