//! RecordBatch v2 ("magic 2"): the one binary format shared by producer, disk and
//! consumer. Building writes records straight into the final buffer; parsing
//! borrows from the input, so reading an uncompressed batch copies nothing.

use std::borrow::Cow;

use super::compression::Compression;
use super::varint::{put_varlong, size_of_varlong, Reader};
use crate::error::CorruptBatch;

pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
pub const MAGIC: i8 = 2;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;

// Field offsets inside the header.
const BASE_OFFSET: usize = 0;
const LENGTH: usize = 8;
const LEADER_EPOCH: usize = 12;
const MAGIC_AT: usize = 16;
const CRC: usize = 17;
const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
const RECORDS_COUNT: usize = 57;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
const DELETE_HORIZON_BIT: i16 = 0x40;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's id: 0 = CreateTime, 1 = LogAppendTime.
    pub fn id(self) -> i32 {
        match self {
            TimestampType::CreateTime => 0,
            TimestampType::LogAppendTime => 1,
        }
    }
}

#[inline]
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// Reads (baseOffset, total size on disk) from the first 12 bytes, without validating.
pub fn peek_offset_and_size(buf: &[u8]) -> Option<(i64, usize)> {
    if buf.len() < LOG_OVERHEAD {
        return None;
    }
    let len = be_i32(buf, LENGTH);
    let size = usize::try_from(len).ok()?.checked_add(LOG_OVERHEAD)?;
    Some((be_i64(buf, BASE_OFFSET), size))
}

/// Overwrites baseOffset in place. It lies outside the CRC, so nothing else changes.
pub fn set_base_offset(buf: &mut [u8], offset: i64) {
    buf[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&offset.to_be_bytes());
}

/// Overwrites partitionLeaderEpoch in place (also outside the CRC).
pub fn set_partition_leader_epoch(buf: &mut [u8], epoch: i32) {
    buf[LEADER_EPOCH..LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Marks the batch LogAppendTime with the given time as its maxTimestamp, as a
/// broker does, and recomputes the CRC (both fields are covered by it).
pub fn set_log_append_time(buf: &mut [u8], now_ms: i64) {
    let attrs = be_i16(buf, ATTRIBUTES) | TIMESTAMP_TYPE_BIT;
    buf[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    buf[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c(&buf[ATTRIBUTES..]);
    buf[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A validated view of exactly one batch.
#[derive(Clone, Copy)]
pub struct RecordBatch<'a> {
    buf: &'a [u8],
}

impl<'a> RecordBatch<'a> {
    /// Checks size, magic and length against `buf`, which must start at a batch;
    /// the batch may be followed by more bytes. Does not check the CRC.
    pub fn parse_header(buf: &'a [u8]) -> Result<Self, CorruptBatch> {
        if buf.len() < HEADER_LEN {
            return Err(CorruptBatch::TooShort { have: buf.len(), need: HEADER_LEN });
        }
        let declared = be_i32(buf, LENGTH);
        let size = usize::try_from(declared).unwrap_or(0).saturating_add(LOG_OVERHEAD);
        if size < HEADER_LEN {
            return Err(CorruptBatch::TooShort { have: size, need: HEADER_LEN });
        }
        let magic = buf[MAGIC_AT] as i8;
        if magic != MAGIC {
            return Err(CorruptBatch::BadMagic(magic));
        }
        if size > buf.len() {
            return Err(CorruptBatch::LengthPastEnd { declared: size, available: buf.len() });
        }
        Ok(RecordBatch { buf: &buf[..size] })
    }

    /// A view of just the 61-byte header at the start of `buf` (the rest of the
    /// batch need not be there): for walking a file by headers alone.
    pub fn header_only(buf: &'a [u8]) -> Result<Self, CorruptBatch> {
        if buf.len() < HEADER_LEN {
            return Err(CorruptBatch::TooShort { have: buf.len(), need: HEADER_LEN });
        }
        let b = RecordBatch { buf: &buf[..HEADER_LEN] };
        if b.size() < HEADER_LEN {
            return Err(CorruptBatch::TooShort { have: b.size(), need: HEADER_LEN });
        }
        if b.magic() != MAGIC {
            return Err(CorruptBatch::BadMagic(b.magic()));
        }
        Ok(b)
    }

    /// `parse_header` plus the CRC-32C check: what every untrusted batch goes through.
    pub fn parse(buf: &'a [u8]) -> Result<Self, CorruptBatch> {
        let b = Self::parse_header(buf)?;
        b.check_crc()?;
        Ok(b)
    }

    pub fn check_crc(&self) -> Result<(), CorruptBatch> {
        let stored = self.crc();
        let computed = crc32c::crc32c(&self.buf[ATTRIBUTES..]);
        if stored != computed {
            return Err(CorruptBatch::CrcMismatch { stored, computed });
        }
        Ok(())
    }

    pub fn as_bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// Total size on disk, from the batchLength field.
    pub fn size(&self) -> usize {
        usize::try_from(be_i32(self.buf, LENGTH)).unwrap_or(0).saturating_add(LOG_OVERHEAD)
    }
    pub fn base_offset(&self) -> i64 {
        be_i64(self.buf, BASE_OFFSET)
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.buf, LEADER_EPOCH)
    }
    pub fn magic(&self) -> i8 {
        self.buf[MAGIC_AT] as i8
    }
    pub fn crc(&self) -> u32 {
        be_i32(self.buf, CRC) as u32
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.buf, ATTRIBUTES)
    }
    pub fn compression(&self) -> Result<Compression, CorruptBatch> {
        Compression::from_id((self.attributes() & COMPRESSION_MASK) as u8)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_BIT != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_BIT != 0
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.buf, LAST_OFFSET_DELTA)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.buf, BASE_TIMESTAMP)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.buf, MAX_TIMESTAMP)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.buf, PRODUCER_ID)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.buf, PRODUCER_EPOCH)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.buf, BASE_SEQUENCE)
    }
    pub fn records_count(&self) -> i32 {
        be_i32(self.buf, RECORDS_COUNT)
    }

    /// The records area, decompressed if the batch is compressed.
    pub fn records_payload(&self) -> Result<Cow<'a, [u8]>, CorruptBatch> {
        let raw = &self.buf[HEADER_LEN..];
        match self.compression()? {
            Compression::None => Ok(Cow::Borrowed(raw)),
            c => c.decompress(raw).map(Cow::Owned),
        }
    }

    /// Decodes every record in the payload returned by `records_payload`, checking
    /// that the count and offset deltas agree with the header.
    pub fn records<'p>(&self, payload: &'p [u8]) -> Result<Vec<Record<'p>>, CorruptBatch> {
        parse_records(payload, self.records_count(), self.last_offset_delta())
    }
}

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

/// A record header as it goes into a batch: UTF-8 key bytes, nullable value.
pub type HeaderRef<'a> = (&'a [u8], Option<&'a [u8]>);

/// What goes into a batch, borrowed from the caller.
pub struct NewRecord<'a> {
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [HeaderRef<'a>],
}

fn size_of_bytes(b: Option<&[u8]>) -> usize {
    match b {
        None => 1,
        Some(b) => size_of_varlong(b.len() as i64) + b.len(),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        None => put_varlong(out, -1),
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// Producer-side identity carried in a batch header (idempotence, transactions).
#[derive(Debug, Clone, Copy)]
pub struct ProducerInfo {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
    pub control: bool,
}

impl Default for ProducerInfo {
    fn default() -> Self {
        ProducerInfo {
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            transactional: false,
            control: false,
        }
    }
}

/// Accumulates records into one RecordBatch v2. Records are encoded as they
/// arrive; `build` compresses (if asked), fills the header and computes the CRC.
pub struct BatchBuilder {
    buf: Vec<u8>,
    compression: Compression,
    timestamp_type: TimestampType,
    producer: ProducerInfo,
    base_offset: i64,
    base_timestamp: i64,
    max_timestamp: i64,
    count: i32,
    /// Set when rewriting a batch (the cleaner): offsets, times and epoch kept.
    rewrite: Option<Rewrite>,
}

/// What a rewritten batch keeps of the original (Kafka's cleaner keeps the base
/// offset and last offset delta, so offsets and the log end never move).
#[derive(Clone, Copy)]
struct Rewrite {
    last_offset_delta: i32,
    max_timestamp: i64,
    leader_epoch: i32,
    delete_horizon: Option<i64>,
}

impl BatchBuilder {
    pub fn new(compression: Compression) -> Self {
        Self::with_capacity(compression, 16 * 1024)
    }

    pub fn with_capacity(compression: Compression, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(HEADER_LEN));
        buf.resize(HEADER_LEN, 0);
        BatchBuilder {
            buf,
            compression,
            timestamp_type: TimestampType::CreateTime,
            producer: ProducerInfo::default(),
            base_offset: 0,
            base_timestamp: NO_TIMESTAMP,
            max_timestamp: NO_TIMESTAMP,
            count: 0,
            rewrite: None,
        }
    }

    /// A builder for a filtered copy of `original` (same codec, base offset, last
    /// offset delta, producer fields, timestamp type, leader epoch and max
    /// timestamp); add the kept records with `append_at`. With `delete_horizon`,
    /// the batch carries Kafka's delete-horizon attribute and time in its base
    /// timestamp (record timestamps stay as they were).
    pub fn rewrite_of(original: &RecordBatch<'_>, delete_horizon: Option<i64>) -> Result<Self, CorruptBatch> {
        let horizon = delete_horizon.or(original.has_delete_horizon().then(|| original.base_timestamp()));
        let mut b = BatchBuilder::with_capacity(original.compression()?, original.size())
            .base_offset(original.base_offset())
            .timestamp_type(original.timestamp_type())
            .producer(ProducerInfo {
                producer_id: original.producer_id(),
                producer_epoch: original.producer_epoch(),
                base_sequence: original.base_sequence(),
                transactional: original.is_transactional(),
                control: original.is_control(),
            });
        b.rewrite = Some(Rewrite {
            last_offset_delta: original.last_offset_delta(),
            max_timestamp: original.max_timestamp(),
            leader_epoch: original.partition_leader_epoch(),
            delete_horizon: horizon,
        });
        if let Some(h) = horizon {
            b.base_timestamp = h;
        }
        Ok(b)
    }

    /// Appends a record (from `rewrite_of`'s original) at its original offset delta.
    pub fn append_at(&mut self, offset_delta: i32, rec: &NewRecord<'_>) {
        self.append_inner(i64::from(offset_delta), rec);
    }

    pub fn base_offset(mut self, offset: i64) -> Self {
        self.base_offset = offset;
        self
    }
    pub fn timestamp_type(mut self, t: TimestampType) -> Self {
        self.timestamp_type = t;
        self
    }
    pub fn producer(mut self, p: ProducerInfo) -> Self {
        self.producer = p;
        self
    }

    pub fn len(&self) -> i32 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Bytes written so far, before compression.
    pub fn size_in_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Appends a record with the next offset delta.
    pub fn append(&mut self, rec: &NewRecord<'_>) {
        self.append_inner(i64::from(self.count), rec);
    }

    fn append_inner(&mut self, offset_delta: i64, rec: &NewRecord<'_>) {
        let horizon = self.rewrite.and_then(|r| r.delete_horizon);
        if self.count == 0 && horizon.is_none() {
            self.base_timestamp = rec.timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(rec.timestamp);
        let ts_delta = rec.timestamp.wrapping_sub(self.base_timestamp);
        let headers_size: usize =
            rec.headers.iter().map(|(k, v)| size_of_bytes(Some(k)) + size_of_bytes(*v)).sum();
        let body = 1
            + size_of_varlong(ts_delta)
            + size_of_varlong(offset_delta)
            + size_of_bytes(rec.key)
            + size_of_bytes(rec.value)
            + size_of_varlong(rec.headers.len() as i64)
            + headers_size;
        let out = &mut self.buf;
        out.reserve(body + 5);
        put_varlong(out, body as i64);
        out.push(0); // record attributes: unused, always 0
        put_varlong(out, ts_delta);
        put_varlong(out, offset_delta);
        put_bytes(out, rec.key);
        put_bytes(out, rec.value);
        put_varlong(out, rec.headers.len() as i64);
        for (k, v) in rec.headers {
            put_bytes(out, Some(k));
            put_bytes(out, *v);
        }
        self.count += 1;
    }

    pub fn build(mut self) -> Vec<u8> {
        if self.compression != Compression::None {
            let packed = self.compression.compress(&self.buf[HEADER_LEN..]);
            self.buf.truncate(HEADER_LEN);
            self.buf.extend_from_slice(&packed);
        }
        let mut attrs = i16::from(self.compression.id());
        if self.timestamp_type == TimestampType::LogAppendTime {
            attrs |= TIMESTAMP_TYPE_BIT;
        }
        if self.producer.transactional {
            attrs |= TRANSACTIONAL_BIT;
        }
        if self.producer.control {
            attrs |= CONTROL_BIT;
        }
        let mut leader_epoch = NO_PARTITION_LEADER_EPOCH;
        let mut last_delta = (self.count - 1).max(0);
        if let Some(r) = self.rewrite {
            leader_epoch = r.leader_epoch;
            last_delta = r.last_offset_delta;
            self.max_timestamp = r.max_timestamp;
            if r.delete_horizon.is_some() {
                attrs |= DELETE_HORIZON_BIT;
            } else if self.count == 0 {
                self.base_timestamp = NO_TIMESTAMP;
            }
        }
        let b = &mut self.buf;
        let length = (b.len() - LOG_OVERHEAD) as i32;
        b[BASE_OFFSET..BASE_OFFSET + 8].copy_from_slice(&self.base_offset.to_be_bytes());
        b[LENGTH..LENGTH + 4].copy_from_slice(&length.to_be_bytes());
        b[LEADER_EPOCH..LEADER_EPOCH + 4].copy_from_slice(&leader_epoch.to_be_bytes());
        b[MAGIC_AT] = MAGIC as u8;
        b[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
        b[LAST_OFFSET_DELTA..LAST_OFFSET_DELTA + 4].copy_from_slice(&last_delta.to_be_bytes());
        b[BASE_TIMESTAMP..BASE_TIMESTAMP + 8].copy_from_slice(&self.base_timestamp.to_be_bytes());
        b[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&self.max_timestamp.to_be_bytes());
        b[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&self.producer.producer_id.to_be_bytes());
        b[PRODUCER_EPOCH..PRODUCER_EPOCH + 2].copy_from_slice(&self.producer.producer_epoch.to_be_bytes());
        b[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&self.producer.base_sequence.to_be_bytes());
        b[RECORDS_COUNT..RECORDS_COUNT + 4].copy_from_slice(&self.count.to_be_bytes());
        let crc = crc32c::crc32c(&b[ATTRIBUTES..]);
        b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
        self.buf
    }
}

/// Encodes `records` as consecutive batches of at most about `max_batch_bytes`
/// (uncompressed; a single larger record gets a batch of its own), back to back
/// in one buffer ready for one append.
pub fn build_batches(
    records: &[NewRecord<'_>],
    compression: Compression,
    timestamp_type: TimestampType,
    max_batch_bytes: usize,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut builder: Option<BatchBuilder> = None;
    for rec in records {
        let size = rec.key.map_or(0, <[u8]>::len)
            + rec.value.map_or(0, <[u8]>::len)
            + rec.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len)).sum::<usize>()
            + 32;
        if let Some(b) = &builder {
            if !b.is_empty() && b.size_in_bytes() + size > max_batch_bytes {
                out.extend_from_slice(&builder.take().map(BatchBuilder::build).unwrap_or_default());
            }
        }
        let cap = max_batch_bytes.min(1 << 20).max(size + HEADER_LEN);
        builder
            .get_or_insert_with(|| {
                BatchBuilder::with_capacity(compression, cap).timestamp_type(timestamp_type)
            })
            .append(rec);
    }
    if let Some(b) = builder {
        out.extend_from_slice(&b.build());
    }
    out
}

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

#[cfg(test)]
#[path = "batch_test.rs"]
mod tests;
