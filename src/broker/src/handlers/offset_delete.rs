//! OffsetDelete: removes a group's committed offsets for partitions it does
//! not consume.

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, ResponseKind};

use super::Reply;
use crate::server::Shared;

/// v0 (its only version).
pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle(shared: &Arc<Shared>, r: OffsetDeleteRequest) -> Reply {
    let asked: Vec<(String, i32)> = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.0.to_string(), p.partition_index)))
        .collect();
    let mut response = OffsetDeleteResponse::default();
    match shared.coordinator.delete_offsets(&r.group_id.0, &asked).await {
        Err(code) => response.error_code = code,
        Ok(rows) => {
            let mut rows = rows.into_iter();
            response.topics = r
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = rows
                        .by_ref()
                        .take(t.partitions.len())
                        .map(|(_, p, code)| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect();
                    OffsetDeleteResponseTopic::default().with_name(t.name).with_partitions(partitions)
                })
                .collect();
        }
    }
    shared.metrics.error("OffsetDelete", response.error_code);
    Reply::Message(Box::new(ResponseKind::OffsetDelete(response)))
}
