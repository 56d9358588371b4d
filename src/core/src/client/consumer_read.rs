//! The consumer's reads: batches from an offset on, CRC-checked, stepping over
//! batches that a cleaning emptied, decoded for record-by-record use or
//! straight into Arrow columns.

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::ops::{Deref, Range};
use std::sync::Arc;

use super::columns::Columns;
use crate::error::Result;
use crate::log::PartitionLog;
use crate::log::ReadSlice;
use crate::record::parse_records;
use crate::record::records::{record_marks, records_span_marked, MARK_STRIDE};
use crate::record::{BatchIter, RecordBatch, TimestampType};
use crate::segment::{CrcTicket, RecordMarks};
use crate::store::Store;

/// One batch of a read, its records still encoded (decompressed).
pub struct DecodedBatch {
    pub base_offset: i64,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub log_append_time: bool,
    pub payload: Payload,
    pub records: i32,
    pub last_offset_delta: i32,
    pub control: bool,
    /// `records` and `payload` are only the records at or after the read's
    /// offset (what a read from a segment's map copies out), not the batch's all.
    pub trimmed: bool,
}

impl DecodedBatch {
    pub fn next_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta) + 1
    }

    /// Every offset of the batch holds a record (not so after compaction).
    pub fn contiguous(&self) -> bool {
        i64::from(self.records) == i64::from(self.last_offset_delta) + 1
    }

    /// Whether a record at `offset` (the read's offset) or later is in the batch.
    pub fn has_records_from(&self, offset: i64) -> bool {
        if self.control || self.records == 0 || self.next_offset() <= offset {
            return false;
        }
        if self.trimmed || self.contiguous() {
            return true;
        }
        parse_records(&self.payload, self.records, self.last_offset_delta)
            .map(|rs| rs.iter().any(|r| self.base_offset + i64::from(r.offset_delta) >= offset))
            .unwrap_or(true)
    }
}

/// A batch's records, still encoded: a range of the bytes a read returned
/// (shared by the batches of that read, so an uncompressed batch is not
/// copied again), or what decompression made.
#[derive(Clone)]
pub struct Payload {
    bytes: Arc<Vec<u8>>,
    range: Range<usize>,
}

impl Payload {
    pub fn owned(bytes: Vec<u8>) -> Self {
        let range = 0..bytes.len();
        Payload { bytes: Arc::new(bytes), range }
    }
}

impl Deref for Payload {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[self.range.clone()]
    }
}

/// Decodes the batches laid back to back in `bytes`.
pub fn decode(bytes: &[u8], verify_crc: bool) -> Result<Vec<DecodedBatch>> {
    decode_shared(Arc::new(bytes.to_vec()), verify_crc)
}

/// As `decode`, the uncompressed batches' payloads left in `bytes`.
pub fn decode_shared(bytes: Arc<Vec<u8>>, verify_crc: bool) -> Result<Vec<DecodedBatch>> {
    let mut out = Vec::new();
    let base = bytes.as_ptr() as usize;
    for b in BatchIter::new(&bytes, verify_crc) {
        let b: RecordBatch<'_> = b?;
        let payload = match b.records_payload()? {
            Cow::Borrowed(raw) => {
                let start = raw.as_ptr() as usize - base;
                Payload { bytes: bytes.clone(), range: start..start + raw.len() }
            }
            Cow::Owned(v) => Payload::owned(v),
        };
        out.push(DecodedBatch {
            base_offset: b.base_offset(),
            base_timestamp: b.base_timestamp(),
            max_timestamp: b.max_timestamp(),
            log_append_time: b.timestamp_type() == TimestampType::LogAppendTime,
            payload,
            records: b.records_count(),
            last_offset_delta: b.last_offset_delta(),
            control: b.is_control(),
            trimmed: false,
        });
    }
    Ok(out)
}

/// Reads of at most this many records are lookups: a batch they go into the
/// middle of gets record marks.
const LOOKUP_RECORDS: usize = 16;

/// A lookup in a segment that is not mapped (a reader process's) reads a slice
/// up to this long into a buffer on the stack and copies out only the records it
/// returns, as from a map: no heap buffer per lookup. A fresh process's first
/// heap buffer of a batch's size lands on a fresh 2 MiB huge page, which takes
/// ~250 µs to zero on a 2-core VM: most of a cold open-and-lookup.
const SMALL_READ: usize = 32 * 1024;

/// As `decode`, from bytes borrowed (a segment's map) rather than read: only
/// the records at or after `offset`, at most `limit` of them, are copied out,
/// each batch's `payload` and `records` being those (a control batch keeps
/// all of its own). It stops after the batch that reaches `limit`; returned
/// too is whether it went through every batch (each CRC-checked if asked).
/// A read into the middle of a batch starts from the record marks `slice`'s
/// segment keeps for it; a lookup leaves them there for the next one if it had
/// none (the bytes were read under `ticket`).
fn decode_wanted(
    bytes: &[u8],
    verify_crc: bool,
    offset: i64,
    limit: usize,
    slice: &ReadSlice,
    ticket: CrcTicket,
) -> Result<(Vec<DecodedBatch>, bool)> {
    let mut out = Vec::new();
    let mut taken = 0usize;
    let mut iter = BatchIter::new(bytes, verify_crc);
    while taken < limit {
        let at = iter.position();
        let Some(b) = iter.next() else { break };
        let b: RecordBatch<'_> = b?;
        let all = b.records_payload()?;
        let (payload, records, trimmed) = if b.is_control() {
            (all.to_vec(), b.records_count(), false)
        } else {
            let min_delta = offset.saturating_sub(b.base_offset());
            let (count, last) = (b.records_count(), b.last_offset_delta());
            let marks = if min_delta >= MARK_STRIDE as i64 && i64::from(count) == i64::from(last) + 1 {
                // Made only for a lookup: a bulk read that starts inside a batch
                // walks to its first record once and goes on from there.
                slice.record_marks(at).or_else(|| {
                    if limit > LOOKUP_RECORDS {
                        return None;
                    }
                    let marks: RecordMarks = record_marks(&all, count).ok()?.into();
                    slice.keep_record_marks(ticket, at, marks.clone());
                    Some(marks)
                })
            } else {
                None
            };
            let (range, n) =
                records_span_marked(&all, count, last, min_delta, limit - taken, marks.as_deref())?;
            taken += n as usize;
            (all[range].to_vec(), n, true)
        };
        out.push(DecodedBatch {
            base_offset: b.base_offset(),
            base_timestamp: b.base_timestamp(),
            max_timestamp: b.max_timestamp(),
            log_append_time: b.timestamp_type() == TimestampType::LogAppendTime,
            payload: Payload::owned(payload),
            records,
            last_offset_delta: b.last_offset_delta(),
            control: b.is_control(),
            trimmed,
        });
    }
    Ok((out, iter.position() == bytes.len()))
}

/// `decode_wanted` of a slice of at most `SMALL_READ` bytes read into an
/// unzeroed buffer on the stack. In a frame of its own, not its caller's: the
/// caller's read has just run the catch-up with its own stack buffer below, so
/// this one lands on stack pages already touched (a fresh process pays a page
/// fault for each new one, several microseconds on a VM).
#[inline(never)]
fn decode_small(
    slice: &ReadSlice,
    verify: bool,
    offset: i64,
    limit: usize,
    ticket: CrcTicket,
) -> Result<(Vec<DecodedBatch>, bool)> {
    let mut buf = [MaybeUninit::<u8>::uninit(); SMALL_READ];
    let bytes = slice.read_into(&mut buf[..slice.byte_len()])?;
    decode_wanted(bytes, verify, offset, limit, slice, ticket)
}

/// Batches from `offset` on, at most about `max_bytes` of them, the first one
/// holding a record at `offset` or later: batches a cleaning emptied (or that
/// hold only records before `offset`) are stepped over, so that an empty result
/// means the end of the log. Where the segment is mapped, only the records at
/// or after `offset`, at most `limit`, are copied out of it (a lookup copies
/// one record, not its 16 KiB batch): a batch's `records` and `payload` are
/// then those alone.
pub fn read_batches(
    log: &PartitionLog,
    offset: i64,
    max_bytes: u64,
    limit: usize,
) -> Result<Vec<DecodedBatch>> {
    log.read_through_cuts(|| read_batches_once(log, offset, max_bytes, limit))
}

fn read_batches_once(
    log: &PartitionLog,
    offset: i64,
    max_bytes: u64,
    limit: usize,
) -> Result<Vec<DecodedBatch>> {
    let mut pos = offset;
    loop {
        let slice = log.read(pos, max_bytes)?;
        let ticket = slice.crc_ticket();
        // Every batch a reader gets is CRC-checked (once per process): nothing
        // corrupt reaches it.
        let verify = !ticket.verified;
        let (batches, whole) =
            match slice.with_mapped(|bytes| decode_wanted(bytes, verify, offset, limit, &slice, ticket)) {
                Some(decoded) => decoded,
                None if limit <= LOOKUP_RECORDS && slice.byte_len() <= SMALL_READ => {
                    decode_small(&slice, verify, offset, limit, ticket)
                }
                None => decode_shared(Arc::new(slice.bytes()?), verify).map(|b| (b, true)),
            }
            .map_err(|e| slice.locate(e))?;
        if whole {
            slice.crc_passed(ticket);
        }
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
        let mut sized = false;
        while cols.rows < max_records {
            if !sized && cols.rows > 0 {
                // The rows still to come here, shaped like those read so far.
                let left = usize::try_from(log.log_end_offset().saturating_sub(pos)).unwrap_or(0);
                cols.reserve_rows(left.min(max_records - cols.rows));
                sized = true;
            }
            let cuts = log.cuts();
            let slice = log.read_through_cuts(|| log.read(pos, max_bytes))?;
            if slice.range.is_none() {
                break;
            }
            let ticket = slice.crc_ticket();
            let verify = !ticket.verified;
            // Straight from the segment's map where there is one: no copy. The
            // map's lock holds off a cut while the bytes are read; one that ran
            // since the range was found sends the read back to find it again.
            let mapped = slice.with_mapped(|b| {
                (log.cuts() == cuts && cuts.is_multiple_of(2))
                    .then(|| cols.extend(topic, *p, b, pos, max_records, verify))
            });
            let read = match mapped {
                Some(Some(read)) => read,
                // Cut since: find the range again.
                Some(None) => {
                    std::thread::yield_now();
                    continue;
                }
                None if log.cuts() != cuts => continue,
                None => cols.extend(topic, *p, &slice.bytes()?, pos, max_records, verify),
            };
            let read = read.map_err(|e| slice.locate(e))?;
            if cols.rows < max_records {
                // Short of the limit, extend went through (and checked) every batch.
                slice.crc_passed(ticket);
            }
            match read {
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
