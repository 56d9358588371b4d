//! ListOffsets: the earliest (-2) or latest (-1) offset of a partition, the
//! first record with its largest timestamp (-3, from v7), or the first offset
//! whose timestamp is at or after a time (`offsets_for_times`).

use std::sync::Arc;

use super::{blocking, Reply};
use crate::server::Shared;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};

/// v6 is the first flexible version; v7 adds -3 (KIP-734), v8 and later the
/// tiered-storage timestamps this broker has no use for.
pub const VERSIONS: (i16, i16) = (1, 7);

pub async fn handle(shared: &Arc<Shared>, r: ListOffsetsRequest, version: i16) -> Reply {
    let manager = shared.replica_manager.clone();
    let topics = blocking(move || {
        r.topics
            .into_iter()
            .map(|t| {
                let name = t.name.0.to_string();
                let partitions = t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        let resp = ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_timestamp(-1)
                            .with_offset(-1)
                            .with_leader_epoch(-1);
                        let index = p.partition_index;
                        match manager.list_offset(&name, index, p.current_leader_epoch, p.timestamp) {
                            // The leader epoch is a field from v4 on: the protocol crate
                            // refuses to encode a value other than -1 in older versions.
                            Ok(Some((offset, ts))) => {
                                resp.with_offset(offset).with_timestamp(ts).with_leader_epoch(
                                    if version >= 4 { manager.leader_epoch(&name, index) } else { -1 },
                                )
                            }
                            Ok(None) => resp,
                            Err(code) => resp.with_error_code(code),
                        }
                    })
                    .collect();
                ListOffsetsTopicResponse::default().with_name(t.name).with_partitions(partitions)
            })
            .collect::<Vec<_>>()
    })
    .await;
    for p in topics.iter().flat_map(|t| &t.partitions) {
        shared.metrics.error("ListOffsets", p.error_code);
    }
    Reply::Message(Box::new(ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))))
}
