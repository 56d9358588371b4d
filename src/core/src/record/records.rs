//! The records inside a batch's (decompressed) payload: zig-zag varint
//! lengths, attributes, timestamp and offset deltas, key, value, headers.

use super::varint::Reader;
use crate::error::CorruptBatch;

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
    for _ in 0..skip {
        let len = r.varint()?;
        if len < 0 {
            return Err(CorruptBatch::BadRecord(format!("negative record length {len}")));
        }
        r.bytes(len as usize)?;
    }
    parse_records(&payload[r.position()..], count - skip, last_delta)
}

/// Decodes `count` records from a (decompressed) payload, checking the offset
/// deltas against `last_delta` and that nothing is left over.
pub fn parse_records(payload: &[u8], count: i32, last_delta: i32) -> Result<Vec<Record<'_>>, CorruptBatch> {
    {
        if count < 0 {
            return Err(CorruptBatch::BadRecord(format!("negative recordsCount {count}")));
        }
        // Every record takes at least 7 bytes, which bounds the allocation.
        let mut out = Vec::with_capacity((count as usize).min(payload.len() / 7 + 1));
        let mut r = Reader::new(payload);
        for _ in 0..count {
            let rec = Record::read(&mut r)?;
            if rec.offset_delta < 0 || rec.offset_delta > last_delta {
                return Err(CorruptBatch::BadRecord(format!(
                    "offsetDelta {} outside 0..={last_delta}",
                    rec.offset_delta
                )));
            }
            out.push(rec);
        }
        if r.remaining() != 0 {
            return Err(CorruptBatch::BadRecord(format!(
                "{} bytes left after {count} records",
                r.remaining()
            )));
        }
        Ok(out)
    }
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
