//! The coordinator's half of `__consumer_offsets`: the groups and offsets
//! loaded from it at start, records appended durably (as the coordinator,
//! fsynced before anyone is answered), and the tail read after every write
//! and before every offset fetch, so that commits an embedded consumer
//! appended to the same store are seen too. The offsets cache is the log
//! applied in order: a commit is in it once it has been read back.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use seglog_core::error::{Error, Result};
use seglog_core::group::{
    offsets_partition, offsets_topic, read_records, CoordinatorRecord, GroupMetadataKey, GroupMetadataValue,
    OffsetCommitKey, OffsetCommitValue, OFFSETS_TOPIC,
};
use seglog_core::log::PartitionLog;

use super::group::{CommittedOffset, Group};
use super::ownership::Replicated;
use super::rebalance::GroupWrite;
use super::{Coordinator, NOT_COORDINATOR};
use crate::logline::log;

/// How far one partition of `__consumer_offsets` has been read, and the last
/// group record written per group (so that a late write never lands after a
/// newer one).
#[derive(Default)]
pub(super) struct Cursor {
    next: i64,
    written: HashMap<String, u64>,
}

/// Applies an offset record to the cache (a tombstone never creates a group).
fn apply_offset(
    groups: &mut HashMap<String, Group>,
    key: OffsetCommitKey,
    value: Option<OffsetCommitValue>,
    now: i64,
) {
    let tp = (key.topic, key.partition);
    match value {
        Some(v) => {
            let g = groups.entry(key.group.clone()).or_insert_with(|| Group::new(&key.group, now));
            g.offsets.insert(
                tp,
                CommittedOffset {
                    offset: v.offset,
                    leader_epoch: v.leader_epoch,
                    metadata: v.metadata,
                    commit_timestamp: v.commit_timestamp,
                },
            );
        }
        None => {
            if let Some(g) = groups.get_mut(&key.group) {
                g.offsets.remove(&tp);
            }
        }
    }
}

/// What loading `__consumer_offsets` found: the groups and each partition's end.
pub(super) struct Loaded {
    pub groups: HashMap<String, Group>,
    pub cursors: HashMap<i32, Arc<Mutex<Cursor>>>,
}

/// Reads every partition of `__consumer_offsets` (if the store has it): the
/// latest metadata record of each group and its committed offsets.
pub(super) fn load(store: &seglog_core::Store, now: i64) -> Result<Loaded> {
    let mut groups = HashMap::new();
    let mut cursors = HashMap::new();
    let topic = match store.topic(OFFSETS_TOPIC) {
        Ok(t) => t,
        Err(Error::UnknownTopic(_)) => return Ok(Loaded { groups, cursors }),
        Err(e) => return Err(e),
    };
    for (p, log) in topic.partitions.iter().enumerate() {
        let (loaded, cursor) = load_partition(log, now)?;
        groups.extend(loaded);
        cursors.insert(p as i32, Arc::new(Mutex::new(cursor)));
    }
    Ok(Loaded { groups, cursors })
}

/// The groups one partition of `__consumer_offsets` holds (the latest
/// metadata record of each and its committed offsets), and a cursor at its end.
pub(super) fn load_partition(partition: &PartitionLog, now: i64) -> Result<(HashMap<String, Group>, Cursor)> {
    let mut groups = HashMap::new();
    let mut metadata: HashMap<String, Option<GroupMetadataValue>> = HashMap::new();
    let start = partition.log_start_offset();
    let (next, skipped) = read_records(partition, start, |_, record| match record {
        CoordinatorRecord::Offset { key, value } => apply_offset(&mut groups, key, value, now),
        CoordinatorRecord::Group { key, value } => {
            metadata.insert(key.group, value);
        }
    })?;
    // A tombstone (deleted group) leaves only offsets committed since, if any.
    for (id, value) in metadata {
        if let Some(v) = value {
            let offsets = groups.remove(&id).map(|g| g.offsets).unwrap_or_default();
            let mut g = Group::restore(&id, v, now);
            g.offsets = offsets;
            groups.insert(id, g);
        }
    }
    // Offsets all deleted, and no record of the group: nothing left of it.
    groups.retain(|_, g| !g.offsets.is_empty() || g.protocol_type.is_some() || g.generation_id > 0);
    if skipped > 0 {
        log(
            "warn",
            "consumer_offsets_unreadable_records",
            &[("partition", &partition.partition()), ("skipped", &skipped)],
        );
    }
    Ok((groups, Cursor { next, written: HashMap::new() }))
}

impl Coordinator {
    fn cursor(&self, partition: i32) -> Arc<Mutex<Cursor>> {
        self.cursors.lock().entry(partition).or_default().clone()
    }

    /// Applies what `log` holds past the cursor: offset commits (ours and an
    /// embedded consumer's). Group records there are ours, already in memory.
    fn catch_up(&self, log: &PartitionLog, cursor: &mut Cursor) -> Result<()> {
        if cursor.next >= log.log_end_offset() {
            return Ok(());
        }
        let mut records = Vec::new();
        let (next, _) = read_records(log, cursor.next, |_, r| records.push(r))?;
        cursor.next = next;
        let now = seglog_core::clock::now_ms();
        let mut groups = self.groups.lock();
        for r in records {
            if let CoordinatorRecord::Offset { key, value } = r {
                apply_offset(&mut groups, key, value, now);
            }
        }
        Ok(())
    }

    /// The partition of `__consumer_offsets` that holds `group`, if the topic
    /// exists; with `create`, a single broker's store gets it (a cluster
    /// member's is created in ZooKeeper, by FindCoordinator).
    fn partition_of(&self, group: &str, create: bool) -> Result<Option<(i32, Arc<PartitionLog>)>> {
        let topic = if create && self.serves_all {
            offsets_topic(&self.store, self.cfg.offsets_partitions)?
        } else {
            match self.store.topic(OFFSETS_TOPIC) {
                Ok(t) => t,
                Err(Error::UnknownTopic(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        };
        let p = offsets_partition(group, topic.partitions.len() as i32);
        Ok(Some((p, topic.partition(p)?.clone())))
    }

    /// Reads the tail of `group`'s partition into the cache (blocking).
    pub(super) fn catch_up_group(&self, group: &str) -> Result<()> {
        if let Some((p, log)) = self.partition_of(group, false)? {
            let cursor = self.cursor(p);
            let mut cursor = cursor.lock();
            self.catch_up(&log, &mut cursor)?;
        }
        Ok(())
    }

    /// Appends `offsets` (commits or tombstones) and, if given, a group
    /// record, durably, then reads them back into the cache (blocking). A
    /// cluster member's write is returned to be waited for (`replicated`).
    pub(super) fn write_records(
        &self,
        group: &str,
        offsets: Vec<CoordinatorRecord>,
        group_write: Option<GroupWrite>,
    ) -> Result<Option<Replicated>> {
        let Some((p, log)) = self.partition_of(group, true)? else {
            return Err(Error::Kafka {
                code: NOT_COORDINATOR,
                message: format!("{OFFSETS_TOPIC} does not exist here"),
            });
        };
        let cursor = self.cursor(p);
        let mut cursor = cursor.lock();
        let mut records = offsets;
        let mut seq = None;
        if let Some(w) = group_write {
            let newer = cursor.written.get(&w.group).is_none_or(|&last| last < w.seq);
            if newer {
                records.extend(w.offset_tombstones.into_iter().map(|(topic, partition)| {
                    CoordinatorRecord::Offset {
                        key: OffsetCommitKey { group: w.group.clone(), topic, partition },
                        value: None,
                    }
                }));
                records.push(CoordinatorRecord::Group {
                    key: GroupMetadataKey { group: w.group.clone() },
                    value: w.value,
                });
                seq = Some((w.group, w.seq));
            }
        }
        let written = if records.is_empty() { None } else { self.append(&log, &records)? };
        if let Some((g, s)) = seq {
            cursor.written.insert(g, s);
        }
        self.catch_up(&log, &mut cursor)?;
        Ok(written)
    }
}
