//! Kafka's record formats for committed offsets: OffsetCommitKey (versions 0
//! and 1; written as 1) and OffsetCommitValue (versions 0 to 3; written as 3).
//! Decoding never trusts its input: anything malformed is an error, not a panic.

use crate::error::{CorruptBatch, Error, Result};

/// The key of an offset commit: which group's position in which partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// The value of an offset commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommitValue {
    pub offset: i64,
    /// -1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

fn put_string(out: &mut Vec<u8>, s: &str) -> Result<()> {
    let len = i16::try_from(s.len())
        .map_err(|_| Error::InvalidArgument(format!("{} bytes is too long for a Kafka string", s.len())))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// A bounds-checked reader over a key or value.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or_else(|| {
            Error::from(CorruptBatch::BadRecord(format!(
                "{} ends early ({} bytes)",
                self.what,
                self.buf.len()
            )))
        })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn i16(&mut self) -> Result<i16> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap_or_default()))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }
    fn string(&mut self) -> Result<String> {
        let len = self.i16()?;
        let len = usize::try_from(len).map_err(|_| {
            Error::from(CorruptBatch::BadRecord(format!("{} has a string of length {len}", self.what)))
        })?;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            Error::from(CorruptBatch::BadRecord(format!("{} has a string that is not UTF-8", self.what)))
        })
    }
}

impl OffsetCommitKey {
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(10 + self.group.len() + self.topic.len());
        out.extend_from_slice(&1i16.to_be_bytes());
        put_string(&mut out, &self.group)?;
        put_string(&mut out, &self.topic)?;
        out.extend_from_slice(&self.partition.to_be_bytes());
        Ok(out)
    }

    /// The key, or None for a key of another kind (group metadata, version 2).
    pub fn decode(key: &[u8]) -> Result<Option<Self>> {
        let mut c = Cursor { buf: key, pos: 0, what: "an offset commit key" };
        if !matches!(c.i16()?, 0 | 1) {
            return Ok(None);
        }
        Ok(Some(OffsetCommitKey { group: c.string()?, topic: c.string()?, partition: c.i32()? }))
    }
}

impl OffsetCommitValue {
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(26 + self.metadata.len());
        out.extend_from_slice(&3i16.to_be_bytes());
        out.extend_from_slice(&self.offset.to_be_bytes());
        out.extend_from_slice(&self.leader_epoch.to_be_bytes());
        put_string(&mut out, &self.metadata)?;
        out.extend_from_slice(&self.commit_timestamp.to_be_bytes());
        Ok(out)
    }

    pub fn decode(value: &[u8]) -> Result<Self> {
        let mut c = Cursor { buf: value, pos: 0, what: "an offset commit value" };
        let version = c.i16()?;
        if !(0..=3).contains(&version) {
            return Err(CorruptBatch::BadRecord(format!("offset commit value version {version}")).into());
        }
        let offset = c.i64()?;
        let leader_epoch = if version >= 3 { c.i32()? } else { -1 };
        let metadata = c.string()?;
        let commit_timestamp = c.i64()?;
        Ok(OffsetCommitValue { offset, leader_epoch, metadata, commit_timestamp })
    }
}
