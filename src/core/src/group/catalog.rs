//! Every group `__consumer_offsets` knows of, as an admin tool lists and
//! describes them (committed offsets with their commit times, the last
//! metadata record), and deleting a group the way Kafka's coordinator does:
//! tombstones for its offsets and its metadata.

use std::collections::BTreeMap;

use super::{
    append_records, offsets_partition, read_records, CoordinatorRecord, GroupMetadataKey, GroupMetadataValue,
    OffsetCommitKey, OffsetCommitValue, OFFSETS_TOPIC,
};
use crate::error::Result;
use crate::store::Store;

/// What the log says of one group now: its live offset commits and its last
/// metadata record (None if it never had one, or it was deleted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupRecords {
    pub offsets: BTreeMap<(String, i32), OffsetCommitValue>,
    pub metadata: Option<GroupMetadataValue>,
}

impl GroupRecords {
    /// A group with neither offsets nor metadata does not exist (any more).
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty() && self.metadata.is_none()
    }
}

/// Every group with offsets or a metadata record, by id (only `group`, read
/// from its partition alone, when given), and how many records could not be
/// parsed (skipped). A store without `__consumer_offsets` has no groups.
pub fn load_groups(store: &Store, group: Option<&str>) -> Result<(BTreeMap<String, GroupRecords>, usize)> {
    let mut groups: BTreeMap<String, GroupRecords> = BTreeMap::new();
    let Ok(topic) = store.topic(OFFSETS_TOPIC) else { return Ok((groups, 0)) };
    let count = topic.partitions.len() as i32;
    let partitions: Vec<i32> = match group {
        Some(g) => vec![offsets_partition(g, count)],
        None => (0..count).collect(),
    };
    let mut skipped = 0;
    for p in partitions {
        let log = topic.partition(p)?.clone();
        // A read-only store sees what a writer appended since it opened.
        log.catch_up()?;
        let (_, bad) = read_records(&log, log.log_start_offset(), |_, record| {
            if group.is_some_and(|g| g != record.group()) {
                return;
            }
            match record {
                CoordinatorRecord::Offset { key, value } => {
                    let entry = groups.entry(key.group).or_default();
                    match value {
                        Some(v) => {
                            entry.offsets.insert((key.topic, key.partition), v);
                        }
                        None => {
                            entry.offsets.remove(&(key.topic, key.partition));
                        }
                    }
                }
                CoordinatorRecord::Group { key, value } => {
                    groups.entry(key.group).or_default().metadata = value;
                }
            }
        })?;
        skipped += bad;
    }
    groups.retain(|_, g| !g.is_empty());
    Ok((groups, skipped))
}

/// Deletes `group` as Kafka's coordinator does: a tombstone for each of its
/// offsets and for its metadata record, appended (fsynced) as the
/// coordinator to the group's partition. How many tombstones were written:
/// 0 for a group the log does not know.
pub fn delete_group(store: &Store, group: &str) -> Result<usize> {
    let (mut groups, _) = load_groups(store, Some(group))?;
    let Some(found) = groups.remove(group) else { return Ok(0) };
    let mut tombstones: Vec<CoordinatorRecord> = found
        .offsets
        .into_keys()
        .map(|(topic, partition)| CoordinatorRecord::Offset {
            key: OffsetCommitKey { group: group.to_string(), topic, partition },
            value: None,
        })
        .collect();
    if found.metadata.is_some() {
        tombstones.push(CoordinatorRecord::Group {
            key: GroupMetadataKey { group: group.to_string() },
            value: None,
        });
    }
    let topic = store.topic(OFFSETS_TOPIC)?;
    let log = topic.partition(offsets_partition(group, topic.partitions.len() as i32))?.clone();
    append_records(&log, &tombstones)?;
    Ok(tombstones.len())
}
