//! A segment's files read byte by byte for tools (dump-log, verify): every batch of a
//! `.log` with its raw header and whether it validates, where the walk lost the batch
//! boundaries and why, and what is wrong with a `.index`/`.timeindex`. Nothing here
//! trusts the files: every input gives a result, never a panic.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::{Error, Result};
use crate::index::{IndexContents, IndexKind};
use crate::record::batch::{RecordBatch, HEADER_LEN, LOG_OVERHEAD, MAGIC};
use crate::record::Compression;

/// The smallest batchLength a header can have (it counts the header after it).
pub const MIN_BATCH_LENGTH: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;
const INT32_MAX: i64 = i32::MAX as i64;
const MAGIC_AT: usize = 16;

/// A RecordBatch v2 header as found in the file, field by field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Byte position of the batch in the `.log`.
    pub position: u64,
    /// Bytes on disk: batchLength + 12.
    pub size: u64,
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    fn of(position: u64, b: &RecordBatch<'_>) -> Self {
        BatchHeader {
            position,
            size: b.size() as u64,
            base_offset: b.base_offset(),
            batch_length: i32::try_from(b.size() - LOG_OVERHEAD).unwrap_or(i32::MAX),
            partition_leader_epoch: b.partition_leader_epoch(),
            magic: b.magic(),
            crc: b.crc(),
            attributes: b.attributes(),
            last_offset_delta: b.last_offset_delta(),
            base_timestamp: b.base_timestamp(),
            max_timestamp: b.max_timestamp(),
            producer_id: b.producer_id(),
            producer_epoch: b.producer_epoch(),
            base_sequence: b.base_sequence(),
            records_count: b.records_count(),
        }
    }

    pub fn last_offset(&self) -> i64 {
        self.base_offset.saturating_add(i64::from(self.last_offset_delta))
    }
    /// The codec's name, or `unknown(N)` for an id no codec has.
    pub fn codec(&self) -> String {
        let id = (self.attributes & 0x07) as u8;
        Compression::from_id(id).map_or_else(|_| format!("unknown({id})"), |c| c.name().to_string())
    }
    pub fn log_append_time(&self) -> bool {
        self.attributes & 0x08 != 0
    }
    /// Kafka's name for the timestamp type: `CreateTime` or `LogAppendTime`.
    pub fn timestamp_type(&self) -> &'static str {
        if self.log_append_time() {
            "LogAppendTime"
        } else {
            "CreateTime"
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & 0x10 != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & 0x40 != 0
    }
    /// The sequence of the record at `offset`, wrapping at Int32.MAX as Kafka's
    /// sequences do; -1 for a batch without sequences.
    pub fn sequence_at(&self, offset: i64) -> i64 {
        if self.base_sequence < 0 {
            return -1;
        }
        (i64::from(self.base_sequence) + offset.wrapping_sub(self.base_offset)).rem_euclid(INT32_MAX + 1)
    }
    pub fn last_sequence(&self) -> i64 {
        self.sequence_at(self.last_offset())
    }
}

/// One record of a batch, decoded and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedRecord {
    pub offset: i64,
    /// The record's timestamp, or the batch's maxTimestamp under LogAppendTime.
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A batch found by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedBatch {
    pub header: BatchHeader,
    /// Why the batch is invalid (CRC-32C, codec, record layout, offsets), or None.
    pub error: Option<String>,
    /// Its records when the walk decodes (none for a control batch or an invalid one).
    pub records: Vec<InspectedRecord>,
}

/// Where a walk had to stop because the batch boundaries are lost, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkStop {
    pub position: u64,
    pub reason: String,
    /// The bytes from `position` to the end of the file (as it was when the walk began).
    pub length: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkItem {
    Batch(InspectedBatch),
    /// Always the last item of a walk.
    Stop(WalkStop),
}

/// The batches of a `.log` file from a byte position on, each checked (CRC-32C,
/// codec, records) when decoding, then a `Stop` if the file does not end at a batch
/// boundary (torn tail, zero-filled tail, bad length or magic). The file's size is
/// taken when the walk starts: what a writer appends later is not walked.
pub struct LogWalk {
    file: File,
    position: u64,
    size: u64,
    decode: bool,
    done: bool,
}

/// Starts a walk of `file` at byte `start`; `decode` also checks each batch's CRC
/// and decodes its records (without it, only the headers are read). The walk owns
/// the file: pass a `try_clone` to keep using it.
pub fn walk_log(file: File, start: u64, decode: bool) -> Result<LogWalk> {
    let size = file.metadata()?.len();
    Ok(LogWalk { file, position: start, size, decode, done: false })
}

/// Reads up to `len` bytes at `position`: fewer only at the end of the file.
fn read_at(file: &File, position: u64, len: u64) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; usize::try_from(len).map_err(io::Error::other)?];
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], position + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

fn all_zero(file: &File, mut position: u64, end: u64) -> io::Result<bool> {
    while position < end {
        let chunk = read_at(file, position, (end - position).min(1 << 20))?;
        if chunk.is_empty() {
            break; // the file shrank
        }
        if chunk.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        position += chunk.len() as u64;
    }
    Ok(true)
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// The records of a CRC-checked batch, or why they do not decode.
fn decode_records(b: &RecordBatch<'_>, header: &BatchHeader) -> Result<Vec<InspectedRecord>, String> {
    let payload = b.records_payload().map_err(|e| e.to_string())?;
    // Control batches hold markers, not records a consumer sees.
    if header.is_control() {
        return Ok(Vec::new());
    }
    let records = b.records(&payload).map_err(|e| e.to_string())?;
    Ok(records
        .into_iter()
        .map(|r| InspectedRecord {
            offset: header.base_offset.wrapping_add(i64::from(r.offset_delta)),
            timestamp: if header.log_append_time() {
                header.max_timestamp
            } else {
                header.base_timestamp.wrapping_add(r.timestamp_delta)
            },
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.map(<[u8]>::to_vec),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.map(<[u8]>::to_vec)))
                .collect(),
        })
        .collect())
}

impl LogWalk {
    /// Byte position of the next batch.
    pub fn position(&self) -> u64 {
        self.position
    }

    fn step(&mut self) -> io::Result<Option<WalkItem>> {
        if self.done || self.position >= self.size {
            return Ok(None);
        }
        let position = self.position;
        let left = self.size - position;
        let stop = |reason: String| Some(WalkItem::Stop(WalkStop { position, reason, length: left }));
        let head = read_at(&self.file, position, left.min(HEADER_LEN as u64))?;
        if head.len() < LOG_OVERHEAD {
            return Ok(stop(format!("incomplete batch header: only {left} bytes left in the file")));
        }
        let base_offset = be_i64(&head, 0);
        let batch_length = be_i32(&head, 8);
        if batch_length == 0 && base_offset == 0 && all_zero(&self.file, position, self.size)? {
            return Ok(stop(format!("{left} zero bytes at the end of the file (a torn write?)")));
        }
        if batch_length < MIN_BATCH_LENGTH {
            return Ok(stop(format!(
                "batchLength {batch_length} is below the minimum of {MIN_BATCH_LENGTH} (corrupt header)"
            )));
        }
        let total = i64::from(batch_length) as u64 + LOG_OVERHEAD as u64;
        if total > left {
            return Ok(stop(format!(
                "batch of {total} bytes (batchLength {batch_length}) runs past the end of the file, \
                 {left} bytes left (a torn write, or a corrupt length)"
            )));
        }
        if let Some(&magic) = head.get(MAGIC_AT) {
            if magic as i8 != MAGIC {
                return Ok(stop(format!("magic {magic} where {MAGIC} was expected (corrupt header)")));
            }
        }
        let data = read_at(&self.file, position, total)?;
        let batch = match RecordBatch::parse_header(&data) {
            Ok(b) if data.len() as u64 == total => b,
            // Size and magic were checked above: only a shrinking file gets here.
            _ => {
                let at = position + data.len() as u64;
                return Ok(stop(format!("the file shrank while it was read (at {at})")));
            }
        };
        let header = BatchHeader::of(position, &batch);
        let mut error = None;
        let mut records = Vec::new();
        if self.decode {
            match batch.check_crc().map_err(|e| e.to_string()).and_then(|()| decode_records(&batch, &header))
            {
                Ok(r) => records = r,
                Err(e) => error = Some(e),
            }
        }
        if error.is_none() && header.last_offset_delta < 0 {
            error = Some(format!("lastOffsetDelta {} is negative", header.last_offset_delta));
        }
        self.position = position + total;
        Ok(Some(WalkItem::Batch(InspectedBatch { header, error, records })))
    }
}

impl Iterator for LogWalk {
    type Item = Result<WalkItem>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.step();
        if !matches!(item, Ok(Some(WalkItem::Batch(_)))) {
            self.done = true;
        }
        item.map_err(Error::from).transpose()
    }
}

/// What an index check needs of its log: where batches start and how far the
/// valid ones reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentScan {
    pub base_offset: i64,
    /// Position → (base offset, last offset) of every batch walked.
    pub batch_starts: HashMap<u64, (i64, i64)>,
    /// The greatest last offset of a valid batch.
    pub last_offset: Option<i64>,
    /// The greatest maxTimestamp of a valid batch, or -1.
    pub max_timestamp: i64,
}

impl SegmentScan {
    pub fn new(base_offset: i64) -> Self {
        SegmentScan { base_offset, batch_starts: HashMap::new(), last_offset: None, max_timestamp: -1 }
    }

    pub fn add(&mut self, batch: &InspectedBatch) {
        let h = &batch.header;
        self.batch_starts.insert(h.position, (h.base_offset, h.last_offset()));
        if batch.error.is_none() {
            self.last_offset = Some(self.last_offset.map_or(h.last_offset(), |l| l.max(h.last_offset())));
            self.max_timestamp = self.max_timestamp.max(h.max_timestamp);
        }
    }
}

/// Batch positions and offsets of the `.log` at `path` (headers only, no CRC
/// check), or None if there is no such file.
pub fn scan_log(path: &Path, base_offset: i64) -> Result<Option<SegmentScan>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::at(path)(e)),
    };
    let mut scan = SegmentScan::new(base_offset);
    for item in walk_log(file, 0, false).map_err(|e| with_path(e, path))? {
        if let WalkItem::Batch(b) = item.map_err(|e| with_path(e, path))? {
            scan.add(&b);
        }
    }
    Ok(Some(scan))
}

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Io(source) => Error::at(path)(source),
        e => e,
    }
}

/// What is wrong with an index, one line each, its size first; its entries are
/// also checked against the log when there is one.
pub fn check_index(index: &IndexContents, log: Option<&SegmentScan>, base_offset: i64) -> Vec<String> {
    let mut problems = match index.kind {
        IndexKind::Offset => check_offset_index(&index.entries, log, base_offset),
        IndexKind::Time => check_time_index(&index.entries, log, base_offset),
    };
    if let Some(p) = &index.size_problem {
        problems.insert(0, p.clone());
    }
    problems
}

fn show(offset: Option<i64>) -> String {
    offset.map_or_else(|| "None".to_string(), |o| o.to_string())
}

fn check_offset_index(entries: &[(i64, i64)], log: Option<&SegmentScan>, base: i64) -> Vec<String> {
    let mut problems = Vec::new();
    let mut previous: Option<(i64, i64)> = None;
    for (i, &(relative, position)) in entries.iter().enumerate() {
        let offset = base.saturating_add(relative);
        let at = format!("entry {i} (offset {offset}, position {position})");
        if let Some((prev_rel, prev_pos)) = previous.filter(|&(r, p)| relative <= r || position <= p) {
            problems.push(format!(
                "{at}: not above the previous entry (offset {}, position {prev_pos})",
                base.saturating_add(prev_rel)
            ));
        } else if relative < 0 || position < 0 {
            problems.push(format!("{at}: negative"));
        } else if let Some(log) = log {
            match log.batch_starts.get(&(position as u64)) {
                None => problems.push(format!("{at}: no batch starts at position {position} of the log")),
                Some(&(batch_base, _)) if offset < batch_base => problems.push(format!(
                    "{at}: the batch there starts at offset {batch_base}, after the entry's offset"
                )),
                Some(_) if log.last_offset.is_none_or(|last| offset > last) => {
                    problems.push(format!("{at}: past the log's last offset {}", show(log.last_offset)))
                }
                Some(_) => {}
            }
        }
        previous = Some((relative, position));
    }
    problems
}

fn check_time_index(entries: &[(i64, i64)], log: Option<&SegmentScan>, base: i64) -> Vec<String> {
    let mut problems = Vec::new();
    let mut previous: Option<(i64, i64)> = None;
    for (i, &(timestamp, relative)) in entries.iter().enumerate() {
        let offset = base.saturating_add(relative);
        let at = format!("entry {i} (timestamp {timestamp}, offset {offset})");
        if let Some((prev_ts, prev_rel)) = previous.filter(|&(t, r)| timestamp < t || relative < r) {
            problems.push(format!(
                "{at}: below the previous entry (timestamp {prev_ts}, offset {})",
                base.saturating_add(prev_rel)
            ));
        } else if relative < 0 {
            problems.push(format!("{at}: negative offset"));
        } else if let Some(log) = log {
            if log.last_offset.is_none_or(|last| offset > last) {
                problems.push(format!("{at}: past the log's last offset {}", show(log.last_offset)));
            } else if timestamp > log.max_timestamp {
                problems.push(format!("{at}: above the log's max timestamp {}", log.max_timestamp));
            }
        }
        previous = Some((timestamp, relative));
    }
    problems
}

#[cfg(test)]
#[path = "inspect_test.rs"]
mod tests;
