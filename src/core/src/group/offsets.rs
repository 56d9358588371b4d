//! Reading and writing a group's committed offsets in a store.

use std::collections::BTreeMap;

use super::{offsets_partition, OffsetCommitKey, OffsetCommitValue, OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG};
use crate::client::fetch::read_batches;
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::log::AppendOrigin;
use crate::record::batch::NO_TIMESTAMP;
use crate::record::parse_records;
use crate::record::{Compression, NewRecord};
use crate::store::Store;

/// (offset, metadata) per (topic, partition).
pub type CommittedOffsets = BTreeMap<(String, i32), (i64, String)>;

/// The latest committed offset of each partition of `group`. Records this
/// cannot parse are skipped and counted in the second value.
pub fn load_committed(store: &Store, group: &str) -> Result<(CommittedOffsets, usize)> {
    let mut out = CommittedOffsets::new();
    let mut skipped = 0;
    let Ok(topic) = store.topic(OFFSETS_TOPIC) else { return Ok((out, 0)) };
    let log = topic.partition(offsets_partition(group, topic.partitions.len() as i32))?.clone();
    log.catch_up()?;
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let batches = read_batches(&log, offset, 1 << 20)?;
        let Some(last) = batches.last() else { break };
        for b in &batches {
            if b.control {
                continue;
            }
            for r in parse_records(&b.payload, b.records, b.last_offset_delta)? {
                if b.base_offset + i64::from(r.offset_delta) < offset {
                    continue;
                }
                let key = match r.key.map(OffsetCommitKey::decode) {
                    Some(Ok(Some(k))) => k,
                    Some(Ok(None)) => continue,
                    None | Some(Err(_)) => {
                        skipped += 1;
                        continue;
                    }
                };
                if key.group != group {
                    continue;
                }
                let tp = (key.topic, key.partition);
                match r.value.map(OffsetCommitValue::decode) {
                    None => {
                        out.remove(&tp);
                    }
                    Some(Ok(v)) => {
                        out.insert(tp, (v.offset, v.metadata));
                    }
                    Some(Err(_)) => skipped += 1,
                }
            }
        }
        offset = last.next_offset().max(offset + 1);
    }
    Ok((out, skipped))
}

/// Appends the commits durably: acknowledged only once fsynced.
pub fn commit(store: &Store, group: &str, offsets: &CommittedOffsets) -> Result<()> {
    if offsets.is_empty() {
        return Ok(());
    }
    let topic = match store.topic(OFFSETS_TOPIC) {
        Ok(t) => t,
        Err(Error::UnknownTopic(_)) => {
            let config = OFFSETS_TOPIC_CONFIG.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            match store.create_topic(OFFSETS_TOPIC, 1, &config) {
                Ok(_) | Err(Error::TopicExists(_)) => {}
                Err(e) => return Err(e),
            }
            store.topic(OFFSETS_TOPIC)?
        }
        Err(e) => return Err(e),
    };
    let log = topic.partition(offsets_partition(group, topic.partitions.len() as i32))?.clone();
    let now = now_ms();
    let mut encoded = Vec::with_capacity(offsets.len());
    for ((t, p), (offset, metadata)) in offsets {
        let key = OffsetCommitKey { group: group.to_string(), topic: t.clone(), partition: *p }.encode()?;
        let value = OffsetCommitValue {
            offset: *offset,
            leader_epoch: -1,
            metadata: metadata.clone(),
            commit_timestamp: now,
        }
        .encode()?;
        encoded.push((key, value));
    }
    let records: Vec<NewRecord<'_>> = encoded
        .iter()
        .map(|(k, v)| NewRecord { timestamp: NO_TIMESTAMP, key: Some(k), value: Some(v), headers: &[] })
        .collect();
    log.append_records(&records, Compression::None, true, AppendOrigin::Coordinator)?;
    Ok(())
}
