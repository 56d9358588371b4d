//! Kafka's producer state snapshot files, `<20-digit offset>.snapshot`: the
//! state of every producer as of that offset (everything below it applied).
//!
//! The format is Kafka's `ProducerSnapshot` message, version 1, big-endian:
//! int16 version (1), uint32 CRC-32C of everything after the CRC, int32 entry
//! count, then per producer 46 bytes: int64 producerId, int16 epoch, int32
//! lastSequence, int64 lastOffset, int32 offsetDelta (lastOffset minus the
//! last batch's first offset), int64 timestamp, int32 coordinatorEpoch, int64
//! currentTxnFirstOffset (-1: none). A producer without a batch has lastOffset
//! -1. Only the last batch of each producer is kept, as in Kafka.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::entry::{decrement_sequence, BatchMetadata, ProducerStateEntry};
use crate::error::{Error, Result};
use crate::segment::files::{file_name, parse_file_name};

pub const SUFFIX: &str = ".snapshot";
pub const VERSION: i16 = 1;
const CRC_OFFSET: usize = 2;
const ENTRIES_OFFSET: usize = CRC_OFFSET + 4;
const HEADER_LEN: usize = ENTRIES_OFFSET + 4;
pub const ENTRY_LEN: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// The snapshot file for `offset` in `dir`.
pub fn path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(file_name(offset, SUFFIX))
}

/// The offsets of the snapshot files in `dir`, in order.
pub fn list(dir: &Path) -> Result<Vec<i64>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let entry = entry.map_err(Error::at(dir))?;
        if let Some(offset) = entry.file_name().to_str().and_then(|n| parse_file_name(n, SUFFIX)) {
            out.push(offset);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Encodes `entries` (in the order given) as a version 1 snapshot.
pub fn encode<'a>(entries: impl ExactSizeIterator<Item = &'a ProducerStateEntry>) -> Vec<u8> {
    let count = entries.len();
    let mut buf = Vec::with_capacity(HEADER_LEN + count * ENTRY_LEN);
    buf.extend_from_slice(&VERSION.to_be_bytes());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&(count as i32).to_be_bytes());
    for e in entries {
        let last = e.last_batch();
        buf.extend_from_slice(&e.producer_id.to_be_bytes());
        buf.extend_from_slice(&e.epoch.to_be_bytes());
        buf.extend_from_slice(&e.last_seq().to_be_bytes());
        buf.extend_from_slice(&e.last_data_offset().to_be_bytes());
        let delta = last.map_or(0, |b| (b.last_offset - b.first_offset) as i32);
        buf.extend_from_slice(&delta.to_be_bytes());
        buf.extend_from_slice(&e.last_timestamp.to_be_bytes());
        buf.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        buf.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
    }
    let crc = crc32c::crc32c(&buf[ENTRIES_OFFSET..]);
    buf[CRC_OFFSET..ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    buf
}

/// Decodes a snapshot, refusing anything but a whole, CRC-valid version 1 file.
pub fn decode(buf: &[u8]) -> Result<Vec<ProducerStateEntry>, String> {
    if buf.len() < HEADER_LEN {
        return Err(format!("{} bytes, shorter than the {HEADER_LEN}-byte header", buf.len()));
    }
    let i16_at = |p: usize| i16::from_be_bytes([buf[p], buf[p + 1]]);
    let i32_at = |p: usize| i32::from_be_bytes([buf[p], buf[p + 1], buf[p + 2], buf[p + 3]]);
    let i64_at = |p: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&buf[p..p + 8]);
        i64::from_be_bytes(b)
    };
    let version = i16_at(0);
    if version != VERSION {
        return Err(format!("unknown snapshot version {version} (expected {VERSION})"));
    }
    let stored = i32_at(CRC_OFFSET) as u32;
    let computed = crc32c::crc32c(&buf[ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(format!("CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"));
    }
    let count = i32_at(ENTRIES_OFFSET);
    let expected = usize::try_from(count).ok().and_then(|n| n.checked_mul(ENTRY_LEN));
    if expected != Some(buf.len() - HEADER_LEN) {
        return Err(format!(
            "{count} entries do not fill the {} bytes after the header ({ENTRY_LEN} bytes each)",
            buf.len() - HEADER_LEN
        ));
    }
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let p = HEADER_LEN + i * ENTRY_LEN;
        let producer_id = i64_at(p);
        let epoch = i16_at(p + 8);
        let last_seq = i32_at(p + 10);
        let last_offset = i64_at(p + 14);
        let offset_delta = i32_at(p + 22);
        let timestamp = i64_at(p + 26);
        let coordinator_epoch = i32_at(p + 34);
        let txn_first = i64_at(p + 38);
        if producer_id < 0 || offset_delta < 0 || (last_offset >= 0 && last_offset < i64::from(offset_delta))
        {
            return Err(format!(
                "entry {i}: producer id {producer_id}, last offset {last_offset}, offset delta {offset_delta} \
                 are not a producer's state"
            ));
        }
        let last = (last_offset >= 0).then(|| BatchMetadata {
            first_seq: decrement_sequence(last_seq, offset_delta),
            last_seq,
            first_offset: last_offset - i64::from(offset_delta),
            last_offset,
            timestamp,
        });
        out.push(ProducerStateEntry::with_last_batch(
            producer_id,
            epoch,
            coordinator_epoch,
            timestamp,
            (txn_first >= 0).then_some(txn_first),
            last,
        ));
    }
    Ok(out)
}

/// Reads the snapshot at `path`; damage is a `CorruptFile` error.
pub fn read(path: &Path) -> Result<Vec<ProducerStateEntry>> {
    let buf = fs::read(path).map_err(Error::at(path))?;
    decode(&buf).map_err(|reason| Error::CorruptFile { path: path.to_owned(), reason })
}

/// Writes `bytes` as the snapshot at `path` (replacing any), fsynced with
/// `sync`. A torn write is no danger: its CRC fails and the loader rebuilds
/// from the log instead, so the roll path may leave the fsync for later.
pub fn write(path: &Path, bytes: &[u8], sync: bool) -> Result<()> {
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            if sync {
                f.sync_all()?;
            }
            Ok(())
        })
        .map_err(Error::at(path));
    if written.is_err() {
        let _ = fs::remove_file(path);
    }
    written
}

/// fsyncs a snapshot written without it; one already gone is no error.
pub fn sync(path: &Path) -> Result<()> {
    match File::open(path) {
        Ok(f) => f.sync_all().map_err(Error::at(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::at(path)(e)),
    }
}

/// Removes the snapshot at `path`; one already gone is no error.
pub fn remove(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::at(path)(e)),
    }
}

#[cfg(test)]
#[path = "snapshot_test.rs"]
mod tests;
