//! Consumer-group offsets as Kafka keeps them: records of the compacted internal
//! topic `__consumer_offsets`, in Kafka's own key and value formats, in the
//! partition Kafka's coordinator would pick for the group, with the groups'
//! metadata records (GroupMetadataKey/Value) the broker's coordinator writes.

mod catalog;
pub mod codec;
mod offsets;

pub use catalog::{delete_group, load_groups, GroupRecords};
pub use codec::{
    decode_consumer_assignment, GroupMetadataKey, GroupMetadataValue, MemberMetadata, OffsetCommitKey,
    OffsetCommitValue,
};
pub use offsets::{
    append_records, commit, load_committed, offsets_topic, read_records, CommittedOffsets, CoordinatorRecord,
};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// The topic's settings: compacted, with Kafka's `offsets.topic.segment.bytes`.
pub const OFFSETS_TOPIC_CONFIG: &[(&str, &str)] =
    &[("cleanup.policy", "compact"), ("compression.type", "producer"), ("segment.bytes", "104857600")];

/// Java's `String.hashCode` over UTF-16 code units, as Kafka computes it.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// Kafka's `Utils.abs(groupId.hashCode()) % partitionCount`.
pub fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let h = java_string_hash(group);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
#[path = "group_test.rs"]
mod tests;
