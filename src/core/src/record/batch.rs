//! RecordBatch v2 ("magic 2"): the one binary format shared by producer, disk and
//! consumer. This is the view of one batch's header (and the in-place patches a
//! leader makes); parsing borrows from the input, so reading an uncompressed
//! batch copies nothing.

use std::borrow::Cow;

use super::compression::Compression;
use super::records::{parse_records, Record};
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
pub(super) const BASE_OFFSET: usize = 0;
pub(super) const LENGTH: usize = 8;
pub(super) const LEADER_EPOCH: usize = 12;
pub(super) const MAGIC_AT: usize = 16;
pub(super) const CRC: usize = 17;
pub(super) const ATTRIBUTES: usize = 21;
pub(super) const LAST_OFFSET_DELTA: usize = 23;
pub(super) const BASE_TIMESTAMP: usize = 27;
pub(super) const MAX_TIMESTAMP: usize = 35;
pub(super) const PRODUCER_ID: usize = 43;
pub(super) const PRODUCER_EPOCH: usize = 51;
pub(super) const BASE_SEQUENCE: usize = 53;
pub(super) const RECORDS_COUNT: usize = 57;

pub(super) const COMPRESSION_MASK: i16 = 0x07;
pub(super) const TIMESTAMP_TYPE_BIT: i16 = 0x08;
pub(super) const TRANSACTIONAL_BIT: i16 = 0x10;
pub(super) const CONTROL_BIT: i16 = 0x20;
pub(super) const DELETE_HORIZON_BIT: i16 = 0x40;

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
pub(super) fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
pub(super) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
pub(super) fn be_i64(b: &[u8], at: usize) -> i64 {
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

/// The length of the whole batches at the start of `buf` (by their size
/// fields alone, not validated): a fetch response may end inside a batch.
pub fn whole_batches_len(buf: &[u8]) -> usize {
    let mut pos = 0;
    while let Some((_, size)) = buf.get(pos..).and_then(peek_offset_and_size) {
        if pos + size > buf.len() {
            break;
        }
        pos += size;
    }
    pos
}

/// A batch's CRC-32C computed over pieces read one after another (through a
/// small buffer rather than one of the batch's size): see `RecordBatch::piecewise_crc`.
pub struct PiecewiseCrc {
    stored: u32,
    computed: u32,
}

impl PiecewiseCrc {
    pub fn update(&mut self, bytes: &[u8]) {
        self.computed = crc32c::crc32c_append(self.computed, bytes);
    }

    /// Whether the bytes fed so far match the CRC stored in the header.
    pub fn matches(&self) -> bool {
        self.computed == self.stored
    }
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

/// Marks the batch CreateTime with `max_timestamp` as its maxTimestamp, as Kafka
/// does to a client's batch for a CreateTime topic (whatever the client set),
/// and recomputes the CRC if anything changed.
pub fn set_create_time(buf: &mut [u8], max_timestamp: i64) {
    let attrs = be_i16(buf, ATTRIBUTES) & !TIMESTAMP_TYPE_BIT;
    if attrs == be_i16(buf, ATTRIBUTES) && be_i64(buf, MAX_TIMESTAMP) == max_timestamp {
        return;
    }
    buf[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    buf[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&buf[ATTRIBUTES..]);
    buf[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Stamps an idempotent producer's id, epoch and first sequence into a built
/// batch, as Kafka's producer does when it drains the batch for sending, and
/// recomputes the CRC (all three are covered by it).
pub fn set_producer(buf: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    buf[PRODUCER_ID..PRODUCER_ID + 8].copy_from_slice(&producer_id.to_be_bytes());
    buf[PRODUCER_EPOCH..PRODUCER_EPOCH + 2].copy_from_slice(&epoch.to_be_bytes());
    buf[BASE_SEQUENCE..BASE_SEQUENCE + 4].copy_from_slice(&base_sequence.to_be_bytes());
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

    /// Starts a CRC-32C check of this batch read in pieces, from a `header_only`
    /// view: feed it the bytes after the header, in order.
    pub fn piecewise_crc(&self) -> PiecewiseCrc {
        PiecewiseCrc { stored: self.crc(), computed: crc32c::crc32c(&self.buf[ATTRIBUTES..HEADER_LEN]) }
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
        // Saturating: baseOffset is outside the CRC, a damaged one may be huge.
        self.base_offset().saturating_add(i64::from(self.last_offset_delta()))
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

#[cfg(test)]
#[path = "batch_test.rs"]
mod tests;
