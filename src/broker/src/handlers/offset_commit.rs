//! OffsetCommit: a group's positions written to `__consumer_offsets` (Kafka's
//! record formats), acknowledged once fsynced.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};

use super::Reply;
use crate::coordinator::{OffsetCommit, PartitionCommit};
use crate::server::Shared;

/// v2–v7 (the protocol crate's minimum is 2; v8 is flexible). The
/// retention time of v2–v4 is not honoured: `offsets.retention.minutes` rules.
pub const VERSIONS: (i16, i16) = (2, 7);

pub async fn handle(shared: &Arc<Shared>, r: OffsetCommitRequest) -> Reply {
    let names: Vec<_> = r.topics.iter().map(|t| (t.name.clone(), t.partitions.len())).collect();
    let req = OffsetCommit {
        group_id: r.group_id.0.to_string(),
        generation_id: r.generation_id_or_member_epoch,
        member_id: r.member_id.to_string(),
        group_instance_id: r.group_instance_id.map(|s| s.to_string()),
        offsets: r
            .topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.name.0.to_string();
                t.partitions.into_iter().map(move |p| PartitionCommit {
                    topic: topic.clone(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.map(|m| m.to_string()).unwrap_or_default(),
                })
            })
            .collect(),
    };
    let mut codes = shared.coordinator.commit_offsets(req).await.into_iter();
    let topics = names
        .into_iter()
        .map(|(name, n)| {
            let partitions = codes
                .by_ref()
                .take(n)
                .map(|(_, p, code)| {
                    shared.metrics.error("OffsetCommit", code);
                    OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default().with_name(name).with_partitions(partitions)
        })
        .collect();
    Reply::Message(Box::new(ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))))
}
