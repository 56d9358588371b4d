//! Records decoded straight into Arrow column buffers (little-endian offsets,
//! validity bitmaps, values), which the Python side wraps with
//! `pyarrow.Array.from_buffers` (or any Arrow reader) — no object per record.

use crate::error::Result;
use crate::record::TimestampType;
use crate::record::{for_each_record, BatchIter};

/// Asks for the unused capacity of `v` to be backed by transparent huge pages
/// (where the kernel has them on `madvise`): a large read's columns are fresh
/// memory, and faulting them in 4 KiB at a time was a third of a first
/// `poll_arrow` pass over 1,000,000 rows (each fault is costly in a VM); 2 MiB
/// pages need 1/512 of the faults. A hint only: nothing changes if refused.
fn prefer_huge_pages(v: &mut Vec<u8>) {
    const HUGE: usize = 2 << 20;
    let spare = v.spare_capacity_mut();
    let (start, end) = (spare.as_ptr() as usize, spare.as_ptr() as usize + spare.len());
    let (from, to) = (start.div_ceil(HUGE) * HUGE, end / HUGE * HUGE);
    if to > from {
        // SAFETY: the range lies inside `v`'s allocation, which stays alive for
        // the call; MADV_HUGEPAGE changes how its pages are backed, never their
        // contents, and the spare capacity holds no initialised data anyway.
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
}

/// A nullable binary (or string) column being built.
#[derive(Default)]
pub struct BinaryColumn {
    pub validity: Vec<u8>,
    pub offsets: Vec<u8>,
    pub data: Vec<u8>,
    pub nulls: usize,
    len: usize,
}

impl BinaryColumn {
    pub fn reserve(&mut self, rows: usize, bytes: usize) {
        self.offsets.reserve(rows * 4 + 4);
        self.validity.reserve(rows / 8 + 1);
        self.data.reserve(bytes);
    }

    /// Room for `rows` more rows of the size seen so far (`seen` rows).
    fn reserve_like(&mut self, seen: usize, rows: usize) {
        if let Some(per_row) = self.data.len().checked_div(seen) {
            self.reserve(rows, per_row * rows + rows);
        }
    }

    /// `v` (not null) `n` times.
    pub fn push_repeated(&mut self, v: &[u8], n: usize) {
        self.start();
        self.data.reserve(v.len() * n);
        self.offsets.reserve(4 * n);
        self.validity.reserve(n / 8 + 1);
        for _ in 0..n {
            if self.len.is_multiple_of(8) {
                self.validity.push(0);
            }
            if let Some(last) = self.validity.last_mut() {
                *last |= 1 << (self.len % 8);
            }
            self.data.extend_from_slice(v);
            self.offsets.extend_from_slice(&(self.data.len() as i32).to_le_bytes());
            self.len += 1;
        }
    }

    fn start(&mut self) {
        if self.offsets.is_empty() {
            self.offsets.extend_from_slice(&0i32.to_le_bytes());
        }
    }

    pub fn push(&mut self, v: Option<&[u8]>) {
        self.start();
        if self.len.is_multiple_of(8) {
            self.validity.push(0);
        }
        if let Some(v) = v {
            self.data.extend_from_slice(v);
            if let Some(last) = self.validity.last_mut() {
                *last |= 1 << (self.len % 8);
            }
        } else {
            self.nulls += 1;
        }
        self.offsets.extend_from_slice(&(self.data.len() as i32).to_le_bytes());
        self.len += 1;
    }
}

/// Every column of Spark's Kafka source schema, for a run of records.
#[derive(Default)]
pub struct Columns {
    pub key: BinaryColumn,
    pub value: BinaryColumn,
    pub topic: BinaryColumn,
    pub partition: Vec<u8>,
    pub offset: Vec<u8>,
    /// Microseconds since the epoch (Spark's timestamp unit).
    pub timestamp: Vec<u8>,
    pub timestamp_type: Vec<u8>,
    /// list<struct<key: string, value: binary>>: list offsets, then the children.
    pub header_offsets: Vec<u8>,
    pub header_key: BinaryColumn,
    pub header_value: BinaryColumn,
    pub rows: usize,
    headers: usize,
}

impl Columns {
    /// Room for `rows` more rows shaped like those so far: called once a first
    /// read shows how large rows are, so that the columns of a large read are
    /// allocated once instead of doubling (and copied) a dozen times.
    pub fn reserve_rows(&mut self, rows: usize) {
        let seen = self.rows;
        if seen == 0 {
            return;
        }
        self.key.reserve_like(seen, rows);
        self.value.reserve_like(seen, rows);
        self.topic.reserve_like(seen, rows);
        self.header_key.reserve_like(self.headers.max(1), self.headers * rows / seen);
        self.header_value.reserve_like(self.headers.max(1), self.headers * rows / seen);
        for col in [&mut self.partition, &mut self.timestamp_type, &mut self.header_offsets] {
            col.reserve(rows * 4);
        }
        for col in [&mut self.offset, &mut self.timestamp] {
            col.reserve(rows * 8);
        }
        for col in [
            &mut self.key.data,
            &mut self.key.offsets,
            &mut self.value.data,
            &mut self.value.offsets,
            &mut self.topic.data,
            &mut self.topic.offsets,
            &mut self.offset,
            &mut self.timestamp,
            &mut self.partition,
            &mut self.timestamp_type,
            &mut self.header_offsets,
        ] {
            prefer_huge_pages(col);
        }
    }

    /// Appends the records of `bytes` (whole batches) with offset >= `from`, at
    /// most `limit` of them; returns the offset after the last one taken.
    pub fn extend(
        &mut self,
        topic: &str,
        partition: i32,
        bytes: &[u8],
        from: i64,
        limit: usize,
        verify_crc: bool,
    ) -> Result<Option<i64>> {
        if self.header_offsets.is_empty() {
            self.header_offsets.extend_from_slice(&0i32.to_le_bytes());
        }
        // Each record takes at least 7 bytes of a batch; its key and value at most
        // the batch's size: enough room up front that the columns never regrow.
        let rows = (bytes.len() / 7).min(limit.saturating_sub(self.rows));
        self.key.reserve(rows, bytes.len() / 4);
        self.value.reserve(rows, bytes.len());
        self.topic.reserve(rows, rows * topic.len());
        for col in [&mut self.partition, &mut self.timestamp_type] {
            col.reserve(rows * 4);
        }
        for col in [&mut self.offset, &mut self.timestamp] {
            col.reserve(rows * 8);
        }
        self.header_offsets.reserve(rows * 4);
        let mut next = None;
        for batch in BatchIter::new(bytes, verify_crc) {
            let b = batch?;
            if b.is_control() || b.last_offset() < from {
                continue;
            }
            let payload = b.records_payload()?;
            let log_append = b.timestamp_type() == TimestampType::LogAppendTime;
            let ts_type = b.timestamp_type().id();
            let (mut full, rows_before) = (false, self.rows);
            for_each_record(&payload, b.records_count(), b.last_offset_delta(), |r| {
                let offset = b.base_offset() + i64::from(r.offset_delta);
                if offset < from {
                    return true;
                }
                if self.rows >= limit {
                    full = true;
                    return false;
                }
                let ts = if log_append { b.max_timestamp() } else { b.base_timestamp() + r.timestamp_delta };
                self.key.push(r.key);
                self.value.push(r.value);
                self.offset.extend_from_slice(&offset.to_le_bytes());
                self.timestamp.extend_from_slice(&ts.saturating_mul(1000).to_le_bytes());
                for (k, v) in &r.headers {
                    self.header_key.push(Some(k));
                    self.header_value.push(*v);
                }
                self.headers += r.headers.len();
                self.header_offsets.extend_from_slice(&(self.headers as i32).to_le_bytes());
                self.rows += 1;
                next = Some(offset + 1);
                true
            })?;
            // The columns that are the same for the whole batch, at once.
            let added = self.rows - rows_before;
            self.topic.push_repeated(topic.as_bytes(), added);
            for _ in 0..added {
                self.partition.extend_from_slice(&partition.to_le_bytes());
                self.timestamp_type.extend_from_slice(&ts_type.to_le_bytes());
            }
            if full {
                return Ok(next);
            }
            // A batch ends at its last offset even if its tail was compacted away.
            next = Some(b.last_offset() + 1).max(next);
        }
        Ok(next)
    }
}
