//! OffsetForLeaderEpoch: where a leader epoch ends, so a consumer can check
//! that its position survived a truncation (KIP-320). Every batch here has
//! epoch 0 and the broker has led every partition since offset 0 in epoch 0,
//! so the epoch cache is one entry, and Kafka's answers
//! (`Partition.lastOffsetForLeaderEpoch`, `LeaderEpochFileCache.endOffsetFor`)
//! reduce to `end_offset_for` below.

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

/// Kafka's `UNDEFINED_EPOCH` and `UNDEFINED_EPOCH_OFFSET`.
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_EPOCH_OFFSET: i64 = -1;

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

/// `(epoch, end offset)` for a requested epoch, with one epoch (0) that began
/// at the log start: the current epoch ends at the log end; a later one is
/// unknown (undefined epoch and offset); an earlier one ends where epoch 0
/// began, the log start (Kafka returns the requested epoch with it).
pub fn end_offset_for(requested: i32, log_start: i64, log_end: i64) -> (i32, i64) {
    match requested {
        UNDEFINED_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
        LEADER_EPOCH => (LEADER_EPOCH, log_end),
        r if r > LEADER_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
        r => (r, log_start),
    }
}

pub async fn handle(shared: &Arc<Shared>, r: OffsetForLeaderEpochRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
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
                        let code = check_current_epoch(p.current_leader_epoch);
                        if code != 0 {
                            return result.with_error_code(code);
                        }
                        let (epoch, offset) =
                            end_offset_for(p.leader_epoch, log.log_start_offset(), log.log_end_offset());
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
