//! What a batch from outside (a client, a file) must satisfy before it is
//! appended: Kafka's `LogValidator` rules, checked in one streaming pass over
//! the records. An uncompressed batch is validated in place without
//! allocating; a compressed one is decoded as it is read, through a small
//! fixed buffer and within a bound on its decompressed size. Batches seglog
//! builds itself skip it (only their size and timestamps are checked).

use std::io::Read;

use super::batch::{RecordBatch, TimestampType, NO_PRODUCER_ID, NO_TIMESTAMP};
use super::compression::{Compression, MAX_UNCOMPRESSED_BATCH_BYTES};
use crate::error::{CorruptBatch, Error, Result};

/// Why a client's batch was refused: one variant per Kafka error code, which
/// is what a broker answers with (`kafka_code`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidBatch {
    /// CORRUPT_MESSAGE (2): the bytes are damaged (sizes, CRC, a compressed
    /// payload that does not decode).
    #[error("corrupt record batch: {0}")]
    Corrupt(CorruptBatch),
    /// MESSAGE_TOO_LARGE (10): the batch is larger than `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes = {max}")]
    MessageTooLarge { size: usize, max: usize },
    /// RECORD_LIST_TOO_LARGE (18): larger than `segment.bytes`, or its records
    /// expand past the decompression bound.
    #[error("record batch too large: {0}")]
    RecordListTooLarge(String),
    /// INVALID_TIMESTAMP (32): a CreateTime timestamp outside
    /// `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms`, or negative.
    #[error("invalid timestamp: {0}")]
    InvalidTimestamp(String),
    /// UNSUPPORTED_COMPRESSION_TYPE (76): a codec id Kafka does not define.
    #[error("unsupported compression: {}", codec_message(*.0))]
    UnsupportedCompression(u8),
    /// INVALID_RECORD (87): well formed bytes that break a rule (counts, offset
    /// deltas, a control batch, ...).
    #[error("invalid record: {0}")]
    InvalidRecord(String),
    /// Records that break a rule of their own (Kafka's KIP-467 record errors):
    /// a keyless record on a compacted topic, a timestamp out of bounds. Each
    /// is named by its index in the batch, with why; the whole batch is
    /// refused, with INVALID_TIMESTAMP if any timestamp was, else INVALID_RECORD.
    #[error("{}", record_errors_message(*.timestamp, .errors))]
    Records { timestamp: bool, errors: Vec<(i32, String)> },
}

/// Kafka's message for a batch refused for its records' errors (the first
/// three shown).
pub fn record_errors_message(timestamp: bool, errors: &[(i32, String)]) -> String {
    if timestamp {
        return "One or more records have been rejected due to invalid timestamp".to_string();
    }
    let shown: Vec<String> =
        errors.iter().take(3).map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')")).collect();
    format!(
        "One or more records have been rejected due to {} record errors in total, and only showing the \
         first three errors at most: [{}]",
        errors.len(),
        shown.join(", ")
    )
}

impl InvalidBatch {
    /// Kafka's error code (`org.apache.kafka.common.protocol.Errors`).
    pub fn kafka_code(&self) -> i16 {
        use crate::error::kafka_codes::*;
        match self {
            InvalidBatch::Corrupt(_) => CORRUPT_MESSAGE,
            InvalidBatch::MessageTooLarge { .. } => MESSAGE_TOO_LARGE,
            InvalidBatch::RecordListTooLarge(_) => RECORD_LIST_TOO_LARGE,
            InvalidBatch::InvalidTimestamp(_) => INVALID_TIMESTAMP,
            InvalidBatch::UnsupportedCompression(_) => UNSUPPORTED_COMPRESSION_TYPE,
            InvalidBatch::InvalidRecord(_) => INVALID_RECORD,
            InvalidBatch::Records { timestamp: true, .. } => INVALID_TIMESTAMP,
            InvalidBatch::Records { timestamp: false, .. } => INVALID_RECORD,
        }
    }
}

impl From<InvalidBatch> for Error {
    fn from(e: InvalidBatch) -> Error {
        match e {
            InvalidBatch::Corrupt(c) => Error::Corrupt(c),
            InvalidBatch::MessageTooLarge { size, max } => Error::RecordTooLarge { size, max },
            InvalidBatch::RecordListTooLarge(m) => Error::RecordBatchTooLarge(m),
            InvalidBatch::InvalidTimestamp(m) => Error::InvalidTimestamp(m),
            InvalidBatch::UnsupportedCompression(id) => Error::UnsupportedCompression(codec_message(id)),
            InvalidBatch::InvalidRecord(m) => Error::InvalidRecord(m),
            InvalidBatch::Records { timestamp, errors } => Error::RecordErrors { timestamp, errors },
        }
    }
}

fn codec_message(id: u8) -> String {
    format!("codec id {id} (Kafka's are 0-4: none, gzip, snappy, lz4, zstd)")
}

fn invalid(msg: impl Into<String>) -> InvalidBatch {
    InvalidBatch::InvalidRecord(msg.into())
}

/// The topic's rules a batch is checked against.
#[derive(Debug, Clone, Copy)]
pub struct BatchRules<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub max_batch_bytes: usize,
    pub segment_bytes: u64,
    /// A compacted topic needs a key on every record.
    pub compacted: bool,
    /// The topic's `message.timestamp.type`: timestamps are checked for CreateTime only.
    pub timestamp_type: TimestampType,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    /// The most a batch's records may take once decompressed.
    pub max_uncompressed_bytes: usize,
}

/// What validating a client batch found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidBatch {
    pub records: i32,
    /// The largest record timestamp (-1 if none has one): what the header's
    /// maxTimestamp must say for a CreateTime topic.
    pub max_timestamp: i64,
}

impl BatchRules<'_> {
    /// Checks the batch at the start of `buf` (more may follow) as Kafka's
    /// `LogValidator` checks a client's: size, CRC, codec, attributes, that
    /// `recordsCount` records with offset deltas 0, 1, 2, ... fill it exactly,
    /// keys on a compacted topic, and timestamps (against `now`).
    pub fn validate_client_batch<'b>(
        &self,
        buf: &'b [u8],
        now: i64,
    ) -> Result<(RecordBatch<'b>, ValidBatch), InvalidBatch> {
        let b = RecordBatch::parse_header(buf).map_err(|e| match e {
            CorruptBatch::BadMagic(m) => {
                invalid(format!("magic byte {m}: only RecordBatch v2 (magic 2) is accepted"))
            }
            other => InvalidBatch::Corrupt(other),
        })?;
        self.size_rule(&b)?;
        self.segment_rule(&b)?;
        b.check_crc().map_err(InvalidBatch::Corrupt)?;
        let attrs = b.attributes();
        let codec = Compression::from_id((attrs & 0x07) as u8)
            .map_err(|_| InvalidBatch::UnsupportedCompression((attrs & 0x07) as u8))?;
        if b.is_control() {
            return Err(invalid("clients may not write control batches"));
        }
        if b.has_delete_horizon() {
            return Err(invalid("the delete-horizon attribute is the log cleaner's to set"));
        }
        let (count, last_delta) = (b.records_count(), b.last_offset_delta());
        if count <= 0 {
            return Err(invalid(format!("recordsCount {count}: a batch must hold at least one record")));
        }
        if i64::from(last_delta) + 1 != i64::from(count) {
            return Err(invalid(format!(
                "lastOffsetDelta {last_delta} does not match recordsCount {count} (it must be recordsCount - 1)"
            )));
        }
        if b.producer_id() != NO_PRODUCER_ID && b.base_sequence() < 0 {
            return Err(invalid(format!(
                "baseSequence {} with producerId {}: an idempotent batch needs a sequence",
                b.base_sequence(),
                b.producer_id()
            )));
        }
        let raw = &b.as_bytes()[super::batch::HEADER_LEN..];
        let max_timestamp = if codec == Compression::None {
            self.check_records(&mut SliceSource { buf: raw, pos: 0 }, &b, now)?
        } else {
            let reader = codec.reader(raw, self.max_uncompressed_bytes).map_err(InvalidBatch::Corrupt)?;
            self.check_records(&mut StreamSource::new(reader, codec), &b, now)?
        };
        Ok((b, ValidBatch { records: count, max_timestamp }))
    }

    /// The one streaming pass over the records.
    fn check_records(
        &self,
        src: &mut impl Source,
        b: &RecordBatch<'_>,
        now: i64,
    ) -> Result<i64, InvalidBatch> {
        let count = b.records_count();
        let base_ts = b.base_timestamp();
        let mut max_ts = NO_TIMESTAMP;
        // Per-record refusals, gathered over the whole batch (KIP-467).
        let mut errors: Vec<(i32, String)> = Vec::new();
        let mut bad_timestamp = false;
        for i in 0..count {
            let len = varint(src)?;
            if len < 0 {
                return Err(invalid(format!("record {i} has a negative length {len}")));
            }
            let start = src.consumed();
            let end = start + len as u64;
            let _attributes = byte(src)?;
            let ts_delta = varlong(src)?;
            let offset_delta = varint(src)?;
            if offset_delta != i {
                return Err(invalid(format!(
                    "record {i} has offsetDelta {offset_delta}: a client's records must have offset deltas \
                     0, 1, 2, ... in order"
                )));
            }
            let key = field(src, end, "key")?;
            let keyless = key.is_none() && self.compacted;
            field(src, end, "value")?;
            let headers = varint(src)?;
            if headers < 0 {
                return Err(invalid(format!("record {i} has a negative header count {headers}")));
            }
            for _ in 0..headers {
                let k = varint(src)?;
                if k < 0 {
                    return Err(invalid(format!(
                        "record {i} has a header with a null or negative key length"
                    )));
                }
                bounded_skip(src, k as usize, end, true, "header key")?;
                field(src, end, "header value")?;
            }
            if src.consumed() != end {
                return Err(invalid(format!(
                    "record {i} declares {len} bytes but holds {}",
                    src.consumed() - start
                )));
            }
            let ts = base_ts.checked_add(ts_delta).ok_or_else(|| {
                invalid(format!("record {i}: baseTimestamp {base_ts} + timestampDelta {ts_delta} overflows"))
            })?;
            // As Kafka checks a record: its key first, then its timestamp.
            if keyless {
                errors.push((i, self.keyless_message()));
            } else if self.timestamp_type == TimestampType::CreateTime {
                if let Err(InvalidBatch::InvalidTimestamp(m)) = self.check_timestamp(ts, now) {
                    bad_timestamp = true;
                    errors.push((i, m));
                }
            }
            max_ts = max_ts.max(ts);
        }
        if src.next()?.is_some() {
            return Err(invalid(format!("bytes left in the batch after its {count} records")));
        }
        if !errors.is_empty() {
            return Err(InvalidBatch::Records { timestamp: bad_timestamp, errors });
        }
        Ok(max_ts)
    }

    /// Kafka's CreateTime rules for a record's timestamp: -1 (none) or a time
    /// within `message.timestamp.before.max.ms` before and
    /// `message.timestamp.after.max.ms` after `now`.
    pub fn check_timestamp(&self, ts: i64, now: i64) -> Result<(), InvalidBatch> {
        if ts == NO_TIMESTAMP {
            return Ok(());
        }
        if ts < 0 {
            return Err(InvalidBatch::InvalidTimestamp(format!(
                "timestamp {ts} is negative (only -1, meaning none, is allowed)"
            )));
        }
        if now.saturating_sub(ts) > self.timestamp_before_max_ms {
            return Err(InvalidBatch::InvalidTimestamp(format!(
                "timestamp {ts} is {} ms before the append time {now}, more than \
                 message.timestamp.before.max.ms = {} of topic {}",
                now.saturating_sub(ts),
                self.timestamp_before_max_ms,
                self.topic
            )));
        }
        if ts.saturating_sub(now) > self.timestamp_after_max_ms {
            return Err(InvalidBatch::InvalidTimestamp(format!(
                "timestamp {ts} is {} ms after the append time {now}, more than \
                 message.timestamp.after.max.ms = {} of topic {}",
                ts.saturating_sub(now),
                self.timestamp_after_max_ms,
                self.topic
            )));
        }
        Ok(())
    }

    fn size_rule(&self, b: &RecordBatch<'_>) -> Result<(), InvalidBatch> {
        if b.size() > self.max_batch_bytes {
            return Err(InvalidBatch::MessageTooLarge { size: b.size(), max: self.max_batch_bytes });
        }
        Ok(())
    }

    /// Kafka refuses a client's batch that cannot fit a segment. (seglog's own
    /// appends give such a batch a segment of its own instead.)
    fn segment_rule(&self, b: &RecordBatch<'_>) -> Result<(), InvalidBatch> {
        if b.size() as u64 > self.segment_bytes {
            return Err(InvalidBatch::RecordListTooLarge(format!(
                "a batch of {} bytes cannot fit a segment of segment.bytes = {}",
                b.size(),
                self.segment_bytes
            )));
        }
        Ok(())
    }

    /// The size bound every batch is held to, whoever built it.
    pub fn check_size(&self, b: &RecordBatch<'_>) -> Result<()> {
        Ok(self.size_rule(b)?)
    }

    /// Refuses a keyless record for a compacted topic (Kafka's rule).
    pub fn check_key(&self, key: Option<&[u8]>) -> Result<()> {
        if key.is_none() && self.compacted {
            return Err(self.keyless().into());
        }
        Ok(())
    }

    fn keyless(&self) -> InvalidBatch {
        invalid(self.keyless_message())
    }

    fn keyless_message(&self) -> String {
        format!(
            "Compacted topic cannot accept message without key in topic partition {}-{}",
            self.topic, self.partition
        )
    }
}

impl Default for BatchRules<'_> {
    /// Kafka's defaults, for a topic with no name.
    fn default() -> Self {
        BatchRules {
            topic: "",
            partition: 0,
            max_batch_bytes: 1_048_588,
            segment_bytes: 1 << 30,
            compacted: false,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            max_uncompressed_bytes: MAX_UNCOMPRESSED_BATCH_BYTES,
        }
    }
}

/// The records area, a byte at a time or skipped over, wherever it comes from.
trait Source {
    fn next(&mut self) -> Result<Option<u8>, InvalidBatch>;
    /// Skips `n` bytes, checking that they are UTF-8 if `utf8`.
    fn skip(&mut self, n: usize, utf8: bool) -> Result<(), InvalidBatch>;
    /// Bytes read so far.
    fn consumed(&self) -> u64;
}

fn past_end() -> InvalidBatch {
    invalid("a record runs past the end of the batch")
}

fn not_utf8() -> InvalidBatch {
    invalid("a header key is not UTF-8")
}

/// An uncompressed batch's records, in place.
struct SliceSource<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Source for SliceSource<'_> {
    fn next(&mut self) -> Result<Option<u8>, InvalidBatch> {
        let b = self.buf.get(self.pos).copied();
        self.pos += usize::from(b.is_some());
        Ok(b)
    }
    fn skip(&mut self, n: usize, utf8: bool) -> Result<(), InvalidBatch> {
        let s = self.pos.checked_add(n).and_then(|e| self.buf.get(self.pos..e)).ok_or_else(past_end)?;
        if utf8 && std::str::from_utf8(s).is_err() {
            return Err(not_utf8());
        }
        self.pos += n;
        Ok(())
    }
    fn consumed(&self) -> u64 {
        self.pos as u64
    }
}

const STREAM_BUFFER: usize = 8 * 1024;

/// A compressed batch's records, decoded as they are read.
struct StreamSource<R> {
    reader: R,
    codec: Compression,
    buf: [u8; STREAM_BUFFER],
    at: usize,
    len: usize,
    consumed: u64,
}

impl<R: Read> StreamSource<R> {
    fn new(reader: R, codec: Compression) -> Self {
        StreamSource { reader, codec, buf: [0; STREAM_BUFFER], at: 0, len: 0, consumed: 0 }
    }

    /// Refills the buffer; false at the end of the payload.
    fn fill(&mut self) -> Result<bool, InvalidBatch> {
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    (self.at, self.len) = (0, n);
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                    return Err(InvalidBatch::RecordListTooLarge(format!(
                        "{} batch: {e}",
                        self.codec.name()
                    )));
                }
                Err(e) => {
                    return Err(InvalidBatch::Corrupt(CorruptBatch::Decompress(format!(
                        "{}: {e}",
                        self.codec.name()
                    ))))
                }
            }
        }
    }
}

impl<R: Read> Source for StreamSource<R> {
    fn next(&mut self) -> Result<Option<u8>, InvalidBatch> {
        if self.at == self.len && !self.fill()? {
            return Ok(None);
        }
        let b = self.buf[self.at];
        self.at += 1;
        self.consumed += 1;
        Ok(Some(b))
    }

    fn skip(&mut self, mut n: usize, utf8: bool) -> Result<(), InvalidBatch> {
        // A character split across two chunks: its first bytes wait here.
        let mut pending = [0u8; 4];
        let mut have = 0;
        while n > 0 {
            if self.at == self.len && !self.fill()? {
                return Err(past_end());
            }
            let take = n.min(self.len - self.at);
            let mut chunk = &self.buf[self.at..self.at + take];
            (self.at, self.consumed, n) = (self.at + take, self.consumed + take as u64, n - take);
            if !utf8 {
                continue;
            }
            if have > 0 {
                let width = utf8_width(pending[0]).ok_or_else(not_utf8)?;
                let more = (width - have).min(chunk.len());
                pending[have..have + more].copy_from_slice(&chunk[..more]);
                (have, chunk) = (have + more, &chunk[more..]);
                if have < width {
                    continue;
                }
                std::str::from_utf8(&pending[..width]).map_err(|_| not_utf8())?;
                have = 0;
            }
            if let Err(e) = std::str::from_utf8(chunk) {
                let tail = &chunk[e.valid_up_to()..];
                if e.error_len().is_some() || tail.len() > 3 {
                    return Err(not_utf8());
                }
                pending[..tail.len()].copy_from_slice(tail);
                have = tail.len();
            }
        }
        if have > 0 {
            return Err(not_utf8());
        }
        Ok(())
    }

    fn consumed(&self) -> u64 {
        self.consumed
    }
}

/// The length of the UTF-8 sequence a leading byte starts, if it can start one.
fn utf8_width(lead: u8) -> Option<usize> {
    match lead {
        0x00..=0x7f => Some(1),
        0xc2..=0xdf => Some(2),
        0xe0..=0xef => Some(3),
        0xf0..=0xf4 => Some(4),
        _ => None,
    }
}

fn byte(src: &mut impl Source) -> Result<u8, InvalidBatch> {
    src.next()?.ok_or_else(past_end)
}

fn varlong(src: &mut impl Source) -> Result<i64, InvalidBatch> {
    let mut result: u64 = 0;
    for i in 0..10 {
        let b = byte(src)?;
        result |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(super::varint::unzigzag64(result));
        }
    }
    Err(invalid("a varint is longer than 10 bytes"))
}

fn varint(src: &mut impl Source) -> Result<i32, InvalidBatch> {
    let v = varlong(src)?;
    i32::try_from(v).map_err(|_| invalid(format!("varint {v} overflows int32")))
}

/// Skips `n` bytes that must end within the record (at `end`).
fn bounded_skip(
    src: &mut impl Source,
    n: usize,
    end: u64,
    utf8: bool,
    what: &str,
) -> Result<(), InvalidBatch> {
    if src.consumed().saturating_add(n as u64) > end {
        return Err(invalid(format!("a {what} of {n} bytes runs past the end of its record")));
    }
    src.skip(n, utf8)
}

/// A nullable length-prefixed field (key, value, header value), skipped over;
/// `None` if it is null.
fn field(src: &mut impl Source, end: u64, what: &str) -> Result<Option<()>, InvalidBatch> {
    match varint(src)? {
        -1 => Ok(None),
        n if n < 0 => Err(invalid(format!("a {what} has a negative length {n}"))),
        n => bounded_skip(src, n as usize, end, false, what).map(Some),
    }
}

#[cfg(test)]
#[path = "validator_test.rs"]
mod tests;
