//! OffsetForLeaderEpoch: where a leader epoch ends, so a consumer can check
//! that its position survived a truncation (KIP-320). The log's leader epoch
//! cache answers (`PartitionLog::offset_for_leader_epoch`, Kafka's
//! `LeaderEpochFileCache.endOffsetFor`); the broker leads every partition in
//! epoch 0 until replication sets others.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind};
use kafka_protocol::ResponseError;
use seglog_core::log::LEADER_EPOCH;

use super::{blocking, error_code, Reply};
use crate::server::Shared;

/// v4 is the first flexible version; v2 (current leader epoch) the crate's first.
pub const VERSIONS: (i16, i16) = (2, 3);

/// The error for the requester's idea of the current leader epoch (-1: none
/// given): FENCED_LEADER_EPOCH if it is older than ours, UNKNOWN_LEADER_EPOCH
/// if newer.
pub fn check_current_epoch(current: i32) -> i16 {
    match current {
        -1 => 0,
        c if c < LEADER_EPOCH => ResponseError::FencedLeaderEpoch.code(),
        c if c > LEADER_EPOCH => ResponseError::UnknownLeaderEpoch.code(),
        _ => 0,
    }
}

pub async fn handle(shared: &Arc<Shared>, r: OffsetForLeaderEpochRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
    let replication = shared.replication.clone();
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
                        let log = match store.partition(&name, p.partition) {
                            Ok(log) => log,
                            Err(e) => return result.with_error_code(error_code(&e)),
                        };
                        let code = match &replication {
                            None => check_current_epoch(p.current_leader_epoch),
                            Some(r) => {
                                r.leader_check(&name, p.partition, p.current_leader_epoch).err().unwrap_or(0)
                            }
                        };
                        if code != 0 {
                            return result.with_error_code(code);
                        }
                        let (epoch, offset) = log.offset_for_leader_epoch(p.leader_epoch);
                        result.with_leader_epoch(epoch).with_end_offset(offset)
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
