//! ListOffsets: the earliest (-2) or latest (-1) offset of a partition, or the
//! first offset whose timestamp is at or after a time (`offsets_for_times`).

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};
use kafka_protocol::ResponseError;
use seglog_core::log::LEADER_EPOCH;

use super::{blocking, error_code, Reply};
use crate::server::Shared;

pub const VERSIONS: (i16, i16) = (1, 5);

const LATEST: i64 = -1;

pub async fn handle(shared: &Arc<Shared>, r: ListOffsetsRequest, version: i16) -> Reply {
    // The leader epoch is a field from v4 on: the protocol crate refuses to
    // encode a value other than -1 in older versions.
    let epoch = if version >= 4 { LEADER_EPOCH } else { -1 };
    let store = shared.store.clone();
    let replication = shared.replication.clone();
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
                        // A cluster member answers for the partitions it leads, in their epochs.
                        let epoch = match &replication {
                            None => epoch,
                            Some(r) => {
                                if let Err(code) =
                                    r.leader_check(&name, p.partition_index, p.current_leader_epoch)
                                {
                                    return resp.with_error_code(code);
                                }
                                let e = r.leader_epoch(&name, p.partition_index).unwrap_or(-1);
                                if version >= 4 {
                                    e
                                } else {
                                    -1
                                }
                            }
                        };
                        let found = store.partition(&name, p.partition_index).and_then(|log| {
                            if p.timestamp == LATEST {
                                // The high watermark: what a consumer can read up to.
                                return Ok(Some((log.high_watermark(), -1)));
                            }
                            log.offset_for_time(p.timestamp)
                        });
                        match found {
                            Ok(Some((offset, ts))) => {
                                resp.with_offset(offset).with_timestamp(ts).with_leader_epoch(epoch)
                            }
                            Ok(None) => resp,
                            Err(seglog_core::Error::InvalidArgument(_)) => {
                                resp.with_error_code(ResponseError::InvalidRequest.code())
                            }
                            Err(e) => resp.with_error_code(error_code(&e)),
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
