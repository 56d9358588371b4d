//! Building RecordBatch v2: records are encoded straight into the final buffer
//! as they arrive; `build` compresses, fills the header and computes the CRC.

use super::batch::*;
use super::compression::Compression;
use std::mem::MaybeUninit;

use super::varint::{size_of_varlong, zigzag64};
use crate::error::{CorruptBatch, Error};

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

/// Writes into the spare capacity of a Vec reserved up front (see `write_into`):
/// one capacity check for a whole record instead of one per byte pushed (the
/// record encoder's hot loop). It holds the spare room as a plain slice, so
/// that the Vec's length and pointer need not be reloaded after each byte.
struct Room<'v> {
    spare: &'v mut [MaybeUninit<u8>],
    at: usize,
}

impl Room<'_> {
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        // Indexing panics rather than writing out of bounds if the reservation
        // was short (a bug): never past the allocation.
        self.spare[self.at].write(b);
        self.at += 1;
    }

    #[inline(always)]
    fn varlong(&mut self, v: i64) {
        let mut u = zigzag64(v);
        while u >= 0x80 {
            self.byte((u as u8) | 0x80);
            u >>= 7;
        }
        self.byte(u as u8);
    }

    #[inline(always)]
    fn bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.varlong(-1),
            Some(b) => {
                self.varlong(b.len() as i64);
                let to = &mut self.spare[self.at..self.at + b.len()];
                // SAFETY: `to` is a bounds-checked span of exactly `b.len()`
                // bytes (MaybeUninit<u8> has u8's layout); `b` is a shared
                // borrow taken while the Vec is borrowed mutably, so the two
                // cannot overlap.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), to.as_mut_ptr().cast::<u8>(), b.len()) };
                self.at += b.len();
            }
        }
    }
}

/// Reserves `room` bytes at the end of `buf`, lets `f` write at most that many
/// there, and keeps what it wrote.
#[inline(always)]
fn write_into(buf: &mut Vec<u8>, room: usize, f: impl FnOnce(&mut Room<'_>)) {
    buf.reserve(room);
    let len = buf.len();
    let mut w = Room { spare: &mut buf.spare_capacity_mut()[..room], at: 0 };
    f(&mut w);
    let written = w.at;
    // SAFETY: `f` wrote the first `written` bytes of the spare capacity (each
    // write went through a bounds-checked index into it).
    unsafe { buf.set_len(len + written) };
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

    /// Appends a record of `rewrite_of`'s original as it was: its offset
    /// delta, and its timestamp (`base_timestamp`, the original's, plus its
    /// delta), key, value and headers.
    pub fn append_original(&mut self, base_timestamp: i64, r: &super::records::Record<'_>) {
        let rec = NewRecord {
            timestamp: base_timestamp.saturating_add(r.timestamp_delta),
            key: r.key,
            value: r.value,
            headers: &r.headers,
        };
        self.append_at(r.offset_delta, &rec);
    }

    pub fn base_offset(mut self, offset: i64) -> Self {
        self.base_offset = offset;
        self
    }
    /// The codec `build` compresses the records with.
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
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

    /// Appends records with one timestamp and no headers (`values[i]` keyed by
    /// `keys[i]`; all keyless without `keys`) at the next offset deltas, the
    /// same bytes as `append` one by one, for as long as they fit: a record is
    /// taken while the batch is empty or, counted as its key and value lengths
    /// plus `overhead`, keeps it within `limit` bytes. Returns how many it took.
    /// What `append` works out per record is worked out once for the run.
    pub fn append_run(
        &mut self,
        timestamp: i64,
        keys: Option<&[Option<&[u8]>]>,
        values: &[Option<&[u8]>],
        limit: usize,
        overhead: usize,
    ) -> usize {
        let len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
        let key = |i: usize| keys.and_then(|k| k.get(i).copied().flatten());
        let fits = |b: &Self, i: usize| {
            b.count == 0 || b.buf.len() + len(key(i)) + len(values[i]) + overhead <= limit
        };
        if self.rewrite.is_some() {
            // A rewrite keeps its own base timestamp: the general path.
            let mut i = 0;
            while i < values.len() && fits(self, i) {
                self.append(&NewRecord { timestamp, key: key(i), value: values[i], headers: &[] });
                i += 1;
            }
            return i;
        }
        if values.is_empty() || !fits(self, 0) {
            return 0;
        }
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let ts_delta = timestamp.wrapping_sub(self.base_timestamp);
        // Attributes byte, timestamp delta and (no) headers count.
        let fixed = 1 + size_of_varlong(ts_delta) + 1;
        let mut taken = 0;
        for (i, &value) in values.iter().enumerate() {
            let key = key(i);
            if taken > 0 && !fits(self, i) {
                break;
            }
            let offset_delta = i64::from(self.count);
            let body = fixed + size_of_varlong(offset_delta) + size_of_bytes(key) + size_of_bytes(value);
            write_into(&mut self.buf, body + 5, |w| {
                w.varlong(body as i64);
                w.byte(0);
                w.varlong(ts_delta);
                w.varlong(offset_delta);
                w.bytes(key);
                w.bytes(value);
                w.byte(0);
            });
            self.count += 1;
            taken += 1;
        }
        taken
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
        // The whole record is written into room made once (a varint of the body
        // length takes at most 5 bytes): no capacity check per field.
        write_into(&mut self.buf, body + 5, |w| {
            w.varlong(body as i64);
            w.byte(0); // record attributes: unused, always 0
            w.varlong(ts_delta);
            w.varlong(offset_delta);
            w.bytes(rec.key);
            w.bytes(rec.value);
            w.varlong(rec.headers.len() as i64);
            for (k, v) in rec.headers {
                w.bytes(Some(k));
                w.bytes(*v);
            }
        });
        self.count += 1;
    }

    /// The finished batch; fails only if its codec does.
    pub fn build(mut self) -> Result<Vec<u8>, Error> {
        if self.compression != Compression::None {
            let packed = self.compression.compress(&self.buf[HEADER_LEN..])?;
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
        Ok(self.buf)
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
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut builder: Option<BatchBuilder> = None;
    for rec in records {
        let size = rec.key.map_or(0, <[u8]>::len)
            + rec.value.map_or(0, <[u8]>::len)
            + rec.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len)).sum::<usize>()
            + 32;
        if let Some(b) = &builder {
            if !b.is_empty() && b.size_in_bytes() + size > max_batch_bytes {
                if let Some(full) = builder.take() {
                    out.extend_from_slice(&full.build()?);
                }
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
        out.extend_from_slice(&b.build()?);
    }
    Ok(out)
}
