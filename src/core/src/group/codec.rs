//! Kafka's record formats for `__consumer_offsets`: OffsetCommitKey (versions 0
//! and 1; written as 1), OffsetCommitValue (versions 0 to 3; written as 3),
//! GroupMetadataKey (version 2) and GroupMetadataValue (versions 0 to 4, 4 being
//! flexible; written as 3, as Kafka's classic coordinator does). Decoding never
//! trusts its input: anything malformed is an error, not a panic.

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
    fn bad(&self, why: &str) -> Error {
        Error::from(CorruptBatch::BadRecord(format!("{} {why}", self.what)))
    }
    fn utf8(&self, bytes: &[u8]) -> Result<String> {
        String::from_utf8(bytes.to_vec()).map_err(|_| self.bad("has a string that is not UTF-8"))
    }
    fn unsigned_varint(&mut self) -> Result<u32> {
        let mut v: u32 = 0;
        for i in 0..5 {
            let b = self.take(1)?[0];
            v |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.bad("has a varint longer than 5 bytes"))
    }
    /// A length (or -1 for null) of a string or bytes field: int16/int32 in
    /// classic versions, an unsigned varint of length + 1 in flexible ones.
    fn length(&mut self, compact: bool, wide: bool) -> Result<Option<usize>> {
        let len: i64 = if compact {
            i64::from(self.unsigned_varint()?) - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        match len {
            -1 => Ok(None),
            n if n < -1 => Err(self.bad(&format!("has a field of length {n}"))),
            n => Ok(Some(n as usize)),
        }
    }
    fn nullable_string_of(&mut self, compact: bool) -> Result<Option<String>> {
        match self.length(compact, false)? {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n)?;
                self.utf8(bytes).map(Some)
            }
        }
    }
    fn string_of(&mut self, compact: bool) -> Result<String> {
        self.nullable_string_of(compact)?.ok_or_else(|| self.bad("has a null string where one is required"))
    }
    fn bytes_of(&mut self, compact: bool) -> Result<Vec<u8>> {
        match self.length(compact, true)? {
            None => Err(self.bad("has null bytes where they are required")),
            Some(n) => Ok(self.take(n)?.to_vec()),
        }
    }
    fn array_len(&mut self, compact: bool) -> Result<usize> {
        match self.length(compact, true)? {
            None => Err(self.bad("has a null array where one is required")),
            // Each element takes at least one byte: a count beyond the bytes
            // left is damage, and must not size an allocation.
            Some(n) if n > self.buf.len() - self.pos => Err(self.bad(&format!("claims {n} elements"))),
            Some(n) => Ok(n),
        }
    }
    /// Skips a flexible version's tagged fields (this codec knows none).
    fn skip_tagged_fields(&mut self) -> Result<()> {
        let n = self.unsigned_varint()?;
        for _ in 0..n {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.take(size)?;
        }
        Ok(())
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

fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) -> Result<()> {
    match s {
        Some(s) => put_string(out, s),
        None => {
            out.extend_from_slice(&(-1i16).to_be_bytes());
            Ok(())
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<()> {
    let len = i32::try_from(b.len())
        .map_err(|_| Error::InvalidArgument(format!("{} bytes is too long for Kafka bytes", b.len())))?;
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(b);
    Ok(())
}

/// The key of a group's metadata record (Kafka's GroupMetadataKey, key version 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataKey {
    pub group: String,
}

impl GroupMetadataKey {
    pub const VERSION: i16 = 2;

    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(4 + self.group.len());
        out.extend_from_slice(&Self::VERSION.to_be_bytes());
        put_string(&mut out, &self.group)?;
        Ok(out)
    }

    /// The key, or None for a key of another kind (an offset commit's, or a
    /// record type of Kafka's newer coordinator).
    pub fn decode(key: &[u8]) -> Result<Option<Self>> {
        let mut c = Cursor { buf: key, pos: 0, what: "a group metadata key" };
        if c.i16()? != Self::VERSION {
            return Ok(None);
        }
        Ok(Some(GroupMetadataKey { group: c.string()? }))
    }
}

/// One member of a group as its metadata record keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadata {
    pub member_id: String,
    /// Static membership's `group.instance.id` (value version 3+).
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Value version 1+; the session timeout stands in for it in version 0.
    pub rebalance_timeout: i32,
    pub session_timeout: i32,
    /// The member's metadata for the group's protocol (opaque to the broker).
    pub subscription: Vec<u8>,
    /// What the leader assigned it (opaque to the broker).
    pub assignment: Vec<u8>,
}

/// A group's state after a rebalance (Kafka's GroupMetadataValue); a null
/// value (tombstone) under the group's key means the group was deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    /// When the group entered its current state (version 2+; -1 unknown).
    pub current_state_timestamp: i64,
    pub members: Vec<MemberMetadata>,
}

impl GroupMetadataValue {
    /// The version written: Kafka's classic coordinator writes 3.
    pub const VERSION: i16 = 3;

    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(
            64 + self.members.iter().map(|m| 64 + m.subscription.len() + m.assignment.len()).sum::<usize>(),
        );
        out.extend_from_slice(&Self::VERSION.to_be_bytes());
        put_string(&mut out, &self.protocol_type)?;
        out.extend_from_slice(&self.generation.to_be_bytes());
        put_nullable_string(&mut out, self.protocol.as_deref())?;
        put_nullable_string(&mut out, self.leader.as_deref())?;
        out.extend_from_slice(&self.current_state_timestamp.to_be_bytes());
        let count = i32::try_from(self.members.len())
            .map_err(|_| Error::InvalidArgument(format!("{} members", self.members.len())))?;
        out.extend_from_slice(&count.to_be_bytes());
        for m in &self.members {
            put_string(&mut out, &m.member_id)?;
            put_nullable_string(&mut out, m.group_instance_id.as_deref())?;
            put_string(&mut out, &m.client_id)?;
            put_string(&mut out, &m.client_host)?;
            out.extend_from_slice(&m.rebalance_timeout.to_be_bytes());
            out.extend_from_slice(&m.session_timeout.to_be_bytes());
            put_bytes(&mut out, &m.subscription)?;
            put_bytes(&mut out, &m.assignment)?;
        }
        Ok(out)
    }

    pub fn decode(value: &[u8]) -> Result<Self> {
        let mut c = Cursor { buf: value, pos: 0, what: "a group metadata value" };
        let version = c.i16()?;
        if !(0..=4).contains(&version) {
            return Err(c.bad(&format!("has version {version} (expected 0 to 4)")));
        }
        let flex = version >= 4;
        let protocol_type = c.string_of(flex)?;
        let generation = c.i32()?;
        let protocol = c.nullable_string_of(flex)?;
        let leader = c.nullable_string_of(flex)?;
        let current_state_timestamp = if version >= 2 { c.i64()? } else { -1 };
        let count = c.array_len(flex)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            let member_id = c.string_of(flex)?;
            let group_instance_id = if version >= 3 { c.nullable_string_of(flex)? } else { None };
            let client_id = c.string_of(flex)?;
            let client_host = c.string_of(flex)?;
            let rebalance_timeout = if version >= 1 { Some(c.i32()?) } else { None };
            let session_timeout = c.i32()?;
            let subscription = c.bytes_of(flex)?;
            let assignment = c.bytes_of(flex)?;
            if flex {
                c.skip_tagged_fields()?;
            }
            members.push(MemberMetadata {
                member_id,
                group_instance_id,
                client_id,
                client_host,
                rebalance_timeout: rebalance_timeout.unwrap_or(session_timeout),
                session_timeout,
                subscription,
                assignment,
            });
        }
        if flex {
            c.skip_tagged_fields()?;
        }
        if c.pos != value.len() {
            return Err(c.bad(&format!("has {} bytes after its last field", value.len() - c.pos)));
        }
        Ok(GroupMetadataValue {
            protocol_type,
            generation,
            protocol,
            leader,
            current_state_timestamp,
            members,
        })
    }
}

/// The partitions of a consumer's assignment (Kafka's ConsumerProtocolAssignment,
/// any version: later versions only add fields after these), as a classic
/// consumer group's leader hands them out; the user data is not kept.
pub fn decode_consumer_assignment(bytes: &[u8]) -> Result<Vec<(String, Vec<i32>)>> {
    let mut c = Cursor { buf: bytes, pos: 0, what: "a consumer assignment" };
    if c.i16()? < 0 {
        return Err(c.bad("has a negative version"));
    }
    let topics = c.array_len(false)?;
    let mut out = Vec::with_capacity(topics);
    for _ in 0..topics {
        let topic = c.string()?;
        let count = c.array_len(false)?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(c.i32()?);
        }
        out.push((topic, partitions));
    }
    Ok(out)
}
