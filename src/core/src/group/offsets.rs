//! Reading and writing `__consumer_offsets`: the records of one partition read
//! in log order from any offset (what a coordinator loads at start and what it
//! reads of the tail later), and records appended durably as the coordinator.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{
    offsets_partition, GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue,
    OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG,
};
use crate::client::consumer_read::read_batches;
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::log::{AppendInfo, AppendOrigin, PartitionLog};
use crate::record::batch::NO_TIMESTAMP;
use crate::record::parse_records;
use crate::record::{Compression, NewRecord};
use crate::store::{Store, Topic};

/// (offset, metadata) per (topic, partition).
pub type CommittedOffsets = BTreeMap<(String, i32), (i64, String)>;

/// One record of `__consumer_offsets`; a `None` value is a tombstone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorRecord {
    Offset { key: OffsetCommitKey, value: Option<OffsetCommitValue> },
    Group { key: GroupMetadataKey, value: Option<GroupMetadataValue> },
}

impl CoordinatorRecord {
    /// The group the record is about.
    pub fn group(&self) -> &str {
        match self {
            CoordinatorRecord::Offset { key, .. } => &key.group,
            CoordinatorRecord::Group { key, .. } => &key.group,
        }
    }

    /// The record's key and value bytes, as written to the log.
    pub fn encode(&self) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
        Ok(match self {
            CoordinatorRecord::Offset { key, value } => {
                (key.encode()?, value.as_ref().map(OffsetCommitValue::encode).transpose()?)
            }
            CoordinatorRecord::Group { key, value } => {
                (key.encode()?, value.as_ref().map(GroupMetadataValue::encode).transpose()?)
            }
        })
    }

    /// A record from its key and value bytes: None for a key of a kind not
    /// known here (Kafka's newer coordinator's records), an error if damaged.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Option<Self>> {
        if let Some(key) = OffsetCommitKey::decode(key)? {
            let value = value.map(OffsetCommitValue::decode).transpose()?;
            return Ok(Some(CoordinatorRecord::Offset { key, value }));
        }
        if let Some(key) = GroupMetadataKey::decode(key)? {
            let value = value.map(GroupMetadataValue::decode).transpose()?;
            return Ok(Some(CoordinatorRecord::Group { key, value }));
        }
        Ok(None)
    }
}

/// Reads the records of `log` from `from` to its end, in order, handing each
/// (with its offset) to `visit`. Returns the offset to read from next time and
/// how many records could not be parsed (skipped).
pub fn read_records(
    log: &PartitionLog,
    from: i64,
    mut visit: impl FnMut(i64, CoordinatorRecord),
) -> Result<(i64, usize)> {
    let mut skipped = 0;
    let mut offset = from.max(log.log_start_offset());
    let end = log.log_end_offset();
    while offset < end {
        let batches = read_batches(log, offset, 1 << 20, usize::MAX)?;
        let Some(last) = batches.last() else { break };
        for b in &batches {
            if b.control {
                continue;
            }
            for r in parse_records(&b.payload, b.records, b.last_offset_delta)? {
                let at = b.base_offset + i64::from(r.offset_delta);
                if at < offset {
                    continue;
                }
                match r.key.map(|k| CoordinatorRecord::decode(k, r.value)) {
                    Some(Ok(Some(record))) => visit(at, record),
                    Some(Ok(None)) => {}
                    None | Some(Err(_)) => skipped += 1,
                }
            }
        }
        offset = last.next_offset().max(offset + 1);
    }
    Ok((offset.max(from), skipped))
}

/// The latest committed offset of each partition of `group`. Records this
/// cannot parse are skipped and counted in the second value.
pub fn load_committed(store: &Store, group: &str) -> Result<(CommittedOffsets, usize)> {
    let mut out = CommittedOffsets::new();
    let Ok(topic) = store.topic(OFFSETS_TOPIC) else { return Ok((out, 0)) };
    let log = topic.partition(offsets_partition(group, topic.partitions.len() as i32))?.clone();
    log.catch_up()?;
    let (_, skipped) = read_records(&log, log.log_start_offset(), |_, record| {
        if let CoordinatorRecord::Offset { key, value } = record {
            if key.group != group {
                return;
            }
            let tp = (key.topic, key.partition);
            match value {
                None => {
                    out.remove(&tp);
                }
                Some(v) => {
                    out.insert(tp, (v.offset, v.metadata));
                }
            }
        }
    })?;
    Ok((out, skipped))
}

/// `__consumer_offsets`, created with its settings and `partitions`
/// partitions if the store does not have it yet (a store that has it keeps
/// its partition count: the group-to-partition map depends on it).
pub fn offsets_topic(store: &Store, partitions: i32) -> Result<Arc<Topic>> {
    match store.topic(OFFSETS_TOPIC) {
        Err(Error::UnknownTopic(_)) => {
            let config = OFFSETS_TOPIC_CONFIG.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            match store.create_topic(OFFSETS_TOPIC, partitions, &config) {
                Ok(_) | Err(Error::TopicExists(_)) => {}
                Err(e) => return Err(e),
            }
            store.topic(OFFSETS_TOPIC)
        }
        other => other,
    }
}

/// Appends coordinator records to `log` (a partition of `__consumer_offsets`)
/// as the coordinator, returning once they are fsynced.
pub fn append_records(log: &PartitionLog, records: &[CoordinatorRecord]) -> Result<AppendInfo> {
    let encoded = records.iter().map(CoordinatorRecord::encode).collect::<Result<Vec<_>>>()?;
    let records: Vec<NewRecord<'_>> = encoded
        .iter()
        .map(|(k, v)| NewRecord { timestamp: NO_TIMESTAMP, key: Some(k), value: v.as_deref(), headers: &[] })
        .collect();
    log.append_records(&records, Compression::None, true, AppendOrigin::Coordinator)
}

/// Appends the commits durably: acknowledged only once fsynced. A store
/// without `__consumer_offsets` gets it with one partition (an embedded
/// store's groups are few; a broker's coordinator creates it with Kafka's 50).
pub fn commit(store: &Store, group: &str, offsets: &CommittedOffsets) -> Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    let topic = offsets_topic(store, 1)?;
    let log = topic.partition(offsets_partition(group, topic.partitions.len() as i32))?.clone();
    let now = now_ms();
    let records: Vec<CoordinatorRecord> = offsets
        .iter()
        .map(|((t, p), (offset, metadata))| CoordinatorRecord::Offset {
            key: OffsetCommitKey { group: group.to_string(), topic: t.clone(), partition: *p },
            value: Some(OffsetCommitValue {
                offset: *offset,
                leader_epoch: -1,
                metadata: metadata.clone(),
                commit_timestamp: now,
            }),
        })
        .collect();
    append_records(&log, &records)?;
    Ok(())
}
