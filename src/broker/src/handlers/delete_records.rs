//! DeleteRecords: a partition's log start offset moved up to an offset (-1:
//! the high watermark, everything), answered with the new low watermark;
//! OFFSET_OUT_OF_RANGE beyond the high watermark or for other negatives, as
//! Kafka's `ReplicaManager.deleteRecordsOnLocalLog` answers.

use std::sync::Arc;

use super::{blocking, Reply};
use crate::server::Shared;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};

/// v2 is the first flexible version.
pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle(shared: &Arc<Shared>, r: DeleteRecordsRequest, _version: i16) -> Reply {
    let manager = shared.replica_manager.clone();
    let topics = blocking(move || {
        r.topics
            .into_iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let result = DeleteRecordsPartitionResult::default()
                            .with_partition_index(p.partition_index)
                            .with_low_watermark(-1);
                        match manager.delete_records(&name, p.partition_index, p.offset) {
                            Ok(low_watermark) => result.with_low_watermark(low_watermark),
                            Err(code) => result.with_error_code(code),
                        }
                    })
                    .collect();
                DeleteRecordsTopicResult::default().with_name(t.name).with_partitions(partitions)
            })
            .collect::<Vec<_>>()
    })
    .await;
    for p in topics.iter().flat_map(|t| &t.partitions) {
        shared.metrics.error("DeleteRecords", p.error_code);
    }
    Reply::Message(Box::new(ResponseKind::DeleteRecords(
        DeleteRecordsResponse::default().with_topics(topics),
    )))
}
