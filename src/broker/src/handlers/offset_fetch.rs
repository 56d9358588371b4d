//! OffsetFetch: a group's committed offsets, from the coordinator's cache of
//! `__consumer_offsets` (which also sees the embedded consumer's commits).

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::server::Shared;

/// v1–v5 (the protocol crate's minimum is 1; v6 is flexible). v2+ may ask
/// for all the group's partitions (null topics).
pub const VERSIONS: (i16, i16) = (1, 5);

fn partition(p: i32, offset: i64, epoch: i32, metadata: String, code: i16) -> OffsetFetchResponsePartition {
    OffsetFetchResponsePartition::default()
        .with_partition_index(p)
        .with_committed_offset(offset)
        .with_committed_leader_epoch(epoch)
        .with_metadata(Some(StrBytes::from_string(metadata)))
        .with_error_code(code)
}

pub async fn handle(shared: &Arc<Shared>, r: OffsetFetchRequest, version: i16) -> Reply {
    let asked: Option<Vec<(String, i32)>> = r.topics.as_ref().map(|ts| {
        ts.iter().flat_map(|t| t.partition_indexes.iter().map(move |&p| (t.name.0.to_string(), p))).collect()
    });
    let answer = shared.coordinator.fetch_offsets(&r.group_id.0, asked.clone()).await;
    let (rows, top) = match answer {
        Ok(rows) => (
            rows.into_iter()
                .map(|(t, p, o)| match o {
                    Some(o) => (t, partition(p, o.offset, o.leader_epoch, o.metadata, 0)),
                    None => (t, partition(p, -1, -1, String::new(), 0)),
                })
                .collect::<Vec<_>>(),
            0,
        ),
        // v1 has no top-level error: each partition carries it.
        Err(code) => (
            asked
                .unwrap_or_default()
                .into_iter()
                .map(|(t, p)| (t, partition(p, -1, -1, String::new(), code)))
                .collect(),
            code,
        ),
    };
    shared.metrics.error("OffsetFetch", top);
    let mut topics: Vec<OffsetFetchResponseTopic> = Vec::new();
    for (t, p) in rows {
        match topics.last_mut() {
            Some(last) if *last.name.0 == *t => last.partitions.push(p),
            _ => topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let mut response = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        response.error_code = top;
    }
    Reply::Message(Box::new(ResponseKind::OffsetFetch(response)))
}
