//! The records inside a batch's (decompressed) payload: zig-zag varint
//! lengths, attributes, timestamp and offset deltas, key, value, headers.

use super::varint::Reader;
use crate::error::CorruptBatch;

/// Records between two of a batch's record marks (see `record_marks`).
pub const MARK_STRIDE: usize = 8;

/// As `parse_records`, but the first `skip` records are passed over by their
/// length prefixes alone (a lookup into a batch whose offsets are contiguous).
pub fn parse_records_from(
    payload: &[u8],
    count: i32,
    last_delta: i32,
    skip: i32,
) -> Result<Vec<Record<'_>>, CorruptBatch> {
    if skip <= 0 || count < 0 {
        return parse_records(payload, count, last_delta);
    }
    let skip = skip.min(count);
    let mut r = Reader::new(payload);
    skip_records(&mut r, skip)?;
    parse_records(&payload[r.position()..], count - skip, last_delta)
}

/// As `parse_records_from`, but stops after `take` records (a lookup wants one,
/// not the rest of its batch). Records after those are not looked at: the
/// batch's CRC, checked before, covers them, and a whole batch parse is what
/// checks their layout.
pub fn parse_records_range(
    payload: &[u8],
    count: i32,
    last_delta: i32,
    skip: i32,
    take: usize,
) -> Result<Vec<Record<'_>>, CorruptBatch> {
    let skip = skip.clamp(0, count.max(0));
    if take >= (count - skip).max(0) as usize {
        return parse_records_from(payload, count, last_delta, skip);
    }
    let mut r = Reader::new(payload);
    skip_records(&mut r, skip)?;
    let mut out = Vec::with_capacity(take);
    for _ in 0..take {
        out.push(read_record(&mut r, last_delta)?);
    }
    Ok(out)
}

/// The part of `payload` that holds its records with an offset delta of at
/// least `min_delta`, at most `take` of them: the byte range and the count. In
/// a contiguous batch (`count == last_delta + 1`) the records before are passed
/// over by their length prefixes alone; otherwise (a compacted batch) each is
/// read for its offset delta. The records in the range are passed over by their
/// lengths only (the batch's CRC covers them; whoever parses the range checks
/// their layout), and when all the rest are wanted the range is the rest.
pub fn records_span(
    payload: &[u8],
    count: i32,
    last_delta: i32,
    min_delta: i64,
    take: usize,
) -> Result<(std::ops::Range<usize>, i32), CorruptBatch> {
    records_span_marked(payload, count, last_delta, min_delta, take, None)
}

/// As `records_span`, in a contiguous batch starting its walk at the nearest
/// of `marks` (from `record_marks` of the same payload) before the first
/// record wanted. Marks that do not fit the payload are not used.
pub fn records_span_marked(
    payload: &[u8],
    count: i32,
    last_delta: i32,
    min_delta: i64,
    take: usize,
    marks: Option<&[u32]>,
) -> Result<(std::ops::Range<usize>, i32), CorruptBatch> {
    if count < 0 {
        return Err(CorruptBatch::BadRecord(format!("negative recordsCount {count}")));
    }
    let mut r = Reader::new(payload);
    let mut left = count;
    if i64::from(count) == i64::from(last_delta) + 1 {
        let mut skip = min_delta.clamp(0, i64::from(count)) as i32;
        let mark = (skip as usize / MARK_STRIDE).min(marks.map_or(0, |m| m.len().saturating_sub(1)));
        if let Some(&at) =
            marks.and_then(|m| m.get(mark)).filter(|&&at| mark > 0 && (at as usize) < payload.len())
        {
            r.bytes(at as usize)?;
            let passed = (mark * MARK_STRIDE) as i32;
            skip -= passed;
            left -= passed;
        }
        skip_records(&mut r, skip)?;
        left -= skip;
    } else {
        // Offset deltas only grow inside a batch: find the first one wanted.
        while left > 0 {
            let at = r.position();
            if i64::from(read_record(&mut r, last_delta)?.offset_delta) >= min_delta {
                r = Reader::new(payload);
                r.bytes(at)?;
                break;
            }
            left -= 1;
        }
    }
    let start = r.position();
    if left as usize <= take {
        return Ok((start..payload.len(), left));
    }
    let take = take as i32;
    skip_records(&mut r, take)?;
    Ok((start..r.position(), take))
}

/// Where every `MARK_STRIDE`th record of a contiguous batch's payload starts
/// (see `records_span_marked`), found by their length prefixes alone.
pub fn record_marks(payload: &[u8], count: i32) -> Result<Vec<u32>, CorruptBatch> {
    let mut r = Reader::new(payload);
    let n = usize::try_from(count).unwrap_or(0);
    // Every record takes at least 7 bytes, which bounds the allocation.
    let mut marks = Vec::with_capacity(n.min(payload.len() / 7 + 1).div_ceil(MARK_STRIDE));
    for i in 0..n {
        if i.is_multiple_of(MARK_STRIDE) {
            let Ok(at) = u32::try_from(r.position()) else { break };
            marks.push(at);
        }
        skip_records(&mut r, 1)?;
    }
    Ok(marks)
}

/// Passes over `n` records by their length prefixes alone.
fn skip_records(r: &mut Reader<'_>, n: i32) -> Result<(), CorruptBatch> {
    for _ in 0..n {
        let len = r.varint()?;
        if len < 0 {
            return Err(CorruptBatch::BadRecord(format!("negative record length {len}")));
        }
        r.bytes(len as usize)?;
    }
    Ok(())
}

/// The next record, its offset delta checked against `last_delta`.
fn read_record<'p>(r: &mut Reader<'p>, last_delta: i32) -> Result<Record<'p>, CorruptBatch> {
    let rec = Record::read(r)?;
    if rec.offset_delta < 0 || rec.offset_delta > last_delta {
        return Err(CorruptBatch::BadRecord(format!(
            "offsetDelta {} outside 0..={last_delta}",
            rec.offset_delta
        )));
    }
    Ok(rec)
}

/// Decodes `count` records from a (decompressed) payload, checking the offset
/// deltas against `last_delta` and that nothing is left over.
pub fn parse_records(payload: &[u8], count: i32, last_delta: i32) -> Result<Vec<Record<'_>>, CorruptBatch> {
    // Every record takes at least 7 bytes, which bounds the allocation.
    let mut out = Vec::with_capacity((count.max(0) as usize).min(payload.len() / 7 + 1));
    for_each_record(payload, count, last_delta, |r| {
        out.push(r);
        true
    })?;
    Ok(out)
}

/// As `parse_records`, handing each record to `f` instead of collecting them
/// (what decodes straight into columns). `f` returns false to stop: the
/// records after are then not looked at (the batch's CRC, checked before,
/// covers them).
pub fn for_each_record<'p>(
    payload: &'p [u8],
    count: i32,
    last_delta: i32,
    mut f: impl FnMut(Record<'p>) -> bool,
) -> Result<(), CorruptBatch> {
    if count < 0 {
        return Err(CorruptBatch::BadRecord(format!("negative recordsCount {count}")));
    }
    let mut r = Reader::new(payload);
    for _ in 0..count {
        if !f(read_record(&mut r, last_delta)?) {
            return Ok(());
        }
    }
    if r.remaining() != 0 {
        return Err(CorruptBatch::BadRecord(format!("{} bytes left after {count} records", r.remaining())));
    }
    Ok(())
}

/// One record, borrowing its key, value and headers from the batch payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'p> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'p [u8]>,
    pub value: Option<&'p [u8]>,
    pub headers: Vec<(&'p [u8], Option<&'p [u8]>)>,
}

impl<'p> Record<'p> {
    fn read(r: &mut Reader<'p>) -> Result<Self, CorruptBatch> {
        let len = r.varint()?;
        if len < 0 || len as usize > r.remaining() {
            return Err(CorruptBatch::BadRecord(format!("record length {len} past the end")));
        }
        let start = r.position();
        let attributes = r.i8()?;
        let timestamp_delta = r.varlong()?;
        let offset_delta = r.varint()?;
        let key = r.nullable_bytes()?;
        let value = r.nullable_bytes()?;
        let n_headers = r.varint()?;
        if n_headers < 0 {
            return Err(CorruptBatch::BadRecord(format!("negative header count {n_headers}")));
        }
        let mut headers = Vec::with_capacity((n_headers as usize).min(r.remaining() / 2));
        for _ in 0..n_headers {
            let k = r.nullable_bytes()?.ok_or_else(|| CorruptBatch::BadRecord("null header key".into()))?;
            if std::str::from_utf8(k).is_err() {
                return Err(CorruptBatch::BadRecord("header key is not UTF-8".into()));
            }
            headers.push((k, r.nullable_bytes()?));
        }
        if r.position() - start != len as usize {
            return Err(CorruptBatch::BadRecord(format!(
                "record declares {len} bytes but holds {}",
                r.position() - start
            )));
        }
        Ok(Record { attributes, timestamp_delta, offset_delta, key, value, headers })
    }
}
