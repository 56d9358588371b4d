//! Reading the log: whole batches from one segment as a file range (what a
//! Fetch sends), and the offset for a timestamp (ListOffsets by time).

use std::mem::MaybeUninit;
use std::ops::Bound;
use std::sync::Arc;

use super::PartitionLog;
use crate::error::{CorruptBatch, Error, Result};
use crate::record::{RecordBatch, TimestampType};
use crate::segment::{CrcTicket, Expect, FileRange, RecordMarks, Segment};

/// A read: whole batches from one segment, as a file range, plus the bounds the
/// reader may want (Kafka's Fetch returns the same).
#[derive(Clone)]
pub struct ReadSlice {
    pub segment: Option<Arc<Segment>>,
    pub range: Option<FileRange>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

impl ReadSlice {
    pub fn bytes(&self) -> Result<Vec<u8>> {
        match (&self.segment, &self.range) {
            (Some(seg), Some(r)) => seg.read_bytes(r.position, r.length as usize),
            _ => Ok(Vec::new()),
        }
    }

    /// The slice's length in bytes.
    pub fn byte_len(&self) -> usize {
        self.range.as_ref().map_or(0, |r| r.length as usize)
    }

    /// Reads the slice's bytes into `buf`, which is `byte_len()` long and
    /// need not be initialised, and returns them.
    pub fn read_into<'b>(&self, buf: &'b mut [MaybeUninit<u8>]) -> Result<&'b [u8]> {
        match (&self.segment, &self.range) {
            (Some(seg), Some(r)) => seg.read_exact_at_uninit(buf, r.position),
            _ => Ok(&[]),
        }
    }

    /// `f` on the slice's bytes borrowed from the segment's map; None if the
    /// segment is not mapped (a reader process) or the slice is empty.
    pub fn with_mapped<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        match (&self.segment, &self.range) {
            (Some(seg), Some(r)) => seg.with_mapped(r.position, r.length as usize, f),
            _ => None,
        }
    }

    /// Whether this slice's batches passed their CRC in this process already
    /// (take it before reading the bytes; see `crc_passed`).
    pub fn crc_ticket(&self) -> CrcTicket {
        match (&self.segment, &self.range) {
            (Some(seg), Some(r)) => seg.crc_ticket(r.position, r.length),
            _ => CrcTicket::UNCHECKED,
        }
    }

    /// Records that the bytes read under `ticket` passed their CRC, so that a
    /// later read of them in this process need not check it again.
    pub fn crc_passed(&self, ticket: CrcTicket) {
        if let (Some(seg), Some(r)) = (&self.segment, &self.range) {
            seg.crc_passed(ticket, r.position, r.length);
        }
    }

    /// The record marks of the batch `at` bytes into this slice, if a lookup
    /// into it left them.
    pub fn record_marks(&self, at: usize) -> Option<RecordMarks> {
        match (&self.segment, &self.range) {
            (Some(seg), Some(r)) => seg.record_marks(r.position + at as u64),
            _ => None,
        }
    }

    /// Keeps the record marks of the batch `at` bytes into this slice, read
    /// under `ticket`.
    pub fn keep_record_marks(&self, ticket: CrcTicket, at: usize, marks: RecordMarks) {
        if let (Some(seg), Some(r)) = (&self.segment, &self.range) {
            seg.keep_record_marks(ticket, r.position + at as u64, marks);
        }
    }

    /// A corrupt batch found in this slice's bytes, as an error naming the
    /// segment file and where the slice starts in it.
    pub fn locate(&self, e: Error) -> Error {
        match (e, &self.segment, &self.range) {
            (Error::Corrupt(c), Some(seg), Some(r)) if !matches!(c, CorruptBatch::InSegment { .. }) => {
                seg.corrupt(r.position, format!("in the batches read from here: {c}"))
            }
            (e, ..) => e,
        }
    }
}

impl PartitionLog {
    /// Whole batches starting with the one that holds `offset`, at most
    /// `max_bytes` (but always one batch, however large), from one segment.
    /// `read_upto` bounded by the log end.
    pub fn read(&self, offset: i64, max_bytes: u64) -> Result<ReadSlice> {
        self.read_upto(offset, max_bytes, i64::MAX)
    }

    /// As `read`, but only batches whose base offset is below `max_offset`
    /// (what a Fetch bounds a consumer's read by: the high watermark). An
    /// `offset` from `max_offset` up to the log end gives an empty slice, one
    /// past the log end is out of range, as Kafka answers.
    pub fn read_upto(&self, offset: i64, max_bytes: u64, max_offset: i64) -> Result<ReadSlice> {
        self.check_open()?;
        if self.read_only && offset >= self.log_end_offset() {
            self.catch_up_until(offset.saturating_add(1))?;
            if offset >= self.log_end_offset() {
                // Caught up to a damaged batch: say so, rather than look like the end.
                let active = self.segments.read().values().next_back().cloned();
                if let Some((seg, pos)) = active.and_then(|s| s.damaged_at().map(|p| (s, p))) {
                    return Err(CorruptBatch::BadRecord(format!(
                        "the batch at position {pos} of {} is damaged (a valid batch follows it); \
                         the writer's next recovery cuts the log there",
                        seg.log_path().display()
                    ))
                    .into());
                }
            }
        }
        let end = self.log_end_offset();
        let start = self.log_start_offset();
        let empty =
            |seg| ReadSlice { segment: seg, range: None, log_start_offset: start, log_end_offset: end };
        let max_offset = max_offset.min(end);
        if offset == end || (offset >= max_offset && offset >= start && offset <= end) {
            return Ok(empty(None));
        }
        if offset < start || offset > end {
            return Err(Error::OffsetOutOfRange {
                topic: self.topic.clone(),
                partition: self.partition,
                offset,
                start,
                end,
            });
        }
        let allow_gaps = self.config().cleanup_policy.compact;
        let mut after = None;
        while let Some((seg, next_base)) = self.read_candidate(offset, after) {
            after = Some(seg.base_offset);
            let expect = Expect { next_base, allow_gaps };
            if seg.base_offset >= max_offset {
                break;
            }
            if let Some(range) = seg.range_upto(offset, max_bytes, seg.size(), expect, max_offset)? {
                return Ok(ReadSlice {
                    segment: Some(seg),
                    range: Some(range),
                    log_start_offset: start,
                    log_end_offset: end,
                });
            }
            // Where offsets run on without gaps, one a sealed segment should
            // hold but does not is damage (a cut or zeroed file), not the end.
            if !allow_gaps && next_base != i64::MAX && offset < next_base && offset >= seg.base_offset {
                return Err(seg.corrupt(
                    seg.size(),
                    format!(
                        "offset {offset} is missing: the segment's batches end before it, but the next \
                         segment starts at offset {next_base}"
                    ),
                ));
            }
        }
        Ok(empty(None))
    }

    /// The segment a read of `offset` tries first (the one holding it, else
    /// the first), or the one after the segment based at `after`; with the base
    /// of the segment after it (its offsets stop there).
    fn read_candidate(&self, offset: i64, after: Option<i64>) -> Option<(Arc<Segment>, i64)> {
        let map = self.segments.read();
        let (&base, seg) = match after {
            None => map.range(..=offset).next_back().or_else(|| map.iter().next())?,
            Some(prev) => map.range((Bound::Excluded(prev), Bound::Unbounded)).next()?,
        };
        let next_base =
            map.range((Bound::Excluded(base), Bound::Unbounded)).next().map_or(i64::MAX, |(&b, _)| b);
        Some((Arc::clone(seg), next_base))
    }

    /// The earliest (offset, timestamp) of a record with timestamp >= `timestamp`,
    /// or None if every record is older (Kafka's ListOffsets by time); -1 and -2
    /// ask for the latest and earliest offsets (with timestamp -1), and -3 for
    /// the first record with the largest timestamp, as in Kafka.
    pub fn offset_for_time(&self, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.check_open()?;
        self.catch_up()?;
        // Kafka's ListOffsets: -1 is the latest offset (the log end), -2 the earliest.
        const LATEST_TIMESTAMP: i64 = -1;
        const EARLIEST_TIMESTAMP: i64 = -2;
        const MAX_TIMESTAMP: i64 = -3;
        const NO_TIMESTAMP: i64 = crate::record::batch::NO_TIMESTAMP;
        let timestamp = match timestamp {
            LATEST_TIMESTAMP => return Ok(Some((self.log_end_offset(), NO_TIMESTAMP))),
            EARLIEST_TIMESTAMP => return Ok(Some((self.log_start_offset(), NO_TIMESTAMP))),
            // The first record at the largest timestamp is the first at or after it.
            MAX_TIMESTAMP => match self.segments().iter().map(|s| s.max_timestamp()).max() {
                Some(t) if t >= 0 => t,
                _ => return Ok(None),
            },
            t if t < 0 => {
                return Err(Error::InvalidArgument(format!(
                    "timestamp {t}: expected a time in ms >= 0, -1 (latest), -2 (earliest) or -3 (largest)"
                )))
            }
            t => t,
        };
        let start = self.log_start_offset();
        let segs = self.segments();
        let n = segs.len();
        let allow_gaps = self.config().cleanup_policy.compact;
        let next_bases: Vec<i64> = segs.iter().skip(1).map(|s| s.base_offset).collect();
        for (i, seg) in segs.into_iter().enumerate() {
            // Passing a segment says its records are all older: not known of one
            // whose end is damaged.
            let passable = |seg: &Segment| match seg.damaged_at() {
                Some(pos) => Err(seg.corrupt(
                    pos,
                    format!(
                        "the segment is damaged here, and records at or after timestamp {timestamp} may be \
                         among those lost"
                    ),
                )),
                None => Ok(()),
            };
            if i + 1 < n && seg.max_timestamp() < timestamp {
                passable(&seg)?;
                continue;
            }
            let mut after = None;
            let size = seg.size();
            let expect = Expect { next_base: next_bases.get(i).copied().unwrap_or(i64::MAX), allow_gaps };
            while let Some(b) = seg.find_by_timestamp_from(timestamp, after.as_ref(), size, expect)? {
                let bytes = seg.read_bytes(b.position, b.size as usize)?;
                let batch = RecordBatch::parse(&bytes).map_err(|e| seg.corrupt(b.position, e.to_string()))?;
                let base_ts = batch.base_timestamp();
                let log_append = batch.timestamp_type() == TimestampType::LogAppendTime;
                let payload = batch.records_payload()?;
                for r in batch.records(&payload)? {
                    let ts = if log_append { batch.max_timestamp() } else { base_ts + r.timestamp_delta };
                    let off = batch.base_offset() + i64::from(r.offset_delta);
                    if ts >= timestamp && off >= start {
                        return Ok(Some((off, ts)));
                    }
                }
                after = Some(b);
            }
            if i + 1 < n {
                passable(&seg)?;
            }
        }
        Ok(None)
    }
}
