//! OffsetForLeaderEpoch: where a leader epoch ends, so a consumer can check
//! that its position survived a truncation (KIP-320). The log's leader epoch
//! cache answers (`PartitionLog::offset_for_leader_epoch`, Kafka's
//! `LeaderEpochFileCache.endOffsetFor`); the broker leads every partition in
//! epoch 0 until replication sets others.

use std::sync::Arc;

use super::{blocking, Reply};
use crate::server::Shared;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind};

/// v4 is the first flexible version; v2 (current leader epoch) the crate's first.
pub const VERSIONS: (i16, i16) = (2, 3);

pub async fn handle(shared: &Arc<Shared>, r: OffsetForLeaderEpochRequest, _version: i16) -> Reply {
    let manager = shared.replica_manager.clone();
    let topics = blocking(move || {
        r.topics
            .into_iter()
            .map(|t| {
                let name = t.topic.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let result = EpochEndOffset::default().with_partition(p.partition);
                        match manager.offset_for_leader_epoch(
                            &name,
                            p.partition,
                            p.current_leader_epoch,
                            p.leader_epoch,
                        ) {
                            Ok((epoch, offset)) => result.with_leader_epoch(epoch).with_end_offset(offset),
                            Err(code) => result.with_error_code(code),
                        }
                    })
                    .collect();
                OffsetForLeaderTopicResult::default().with_topic(t.topic).with_partitions(partitions)
            })
            .collect::<Vec<_>>()
    })
    .await;
    for p in topics.iter().flat_map(|t| &t.partitions) {
        shared.metrics.error("OffsetForLeaderEpoch", p.error_code);
    }
    Reply::Message(Box::new(ResponseKind::OffsetForLeaderEpoch(
        OffsetForLeaderEpochResponse::default().with_topics(topics),
    )))
}

#[cfg(test)]
#[path = "offset_for_leader_epoch_test.rs"]
mod tests;
