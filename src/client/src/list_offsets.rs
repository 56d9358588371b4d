//! ListOffsets: a partition's earliest offset, its latest (the high
//! watermark), or the first offset whose timestamp is at or after a time.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use seglog_core::error::{Error, Result};

use crate::cluster::{Cluster, Step};
use crate::errors::{self, About};

/// The timestamp that asks for the log start offset.
pub const EARLIEST: i64 = -2;
/// The timestamp that asks for the high watermark.
pub const LATEST: i64 = -1;

/// For each `(topic, partition, timestamp)`: `(offset, timestamp)`, or None
/// when no record has a timestamp at or after the one asked for. The
/// timestamp is -1 for EARLIEST and LATEST.
pub fn list_offsets(cluster: &Cluster, wanted: &[(String, i32, i64)]) -> Vec<Result<Option<(i64, i64)>>> {
    cluster.per_leader(
        wanted,
        |w| (w.0.as_str(), w.1),
        false,
        |cluster, node, group| {
            let mut topics: Vec<ListOffsetsTopic> = Vec::new();
            for (topic, partition, timestamp) in group.iter().map(|w| (&w.0, w.1, w.2)) {
                let p =
                    ListOffsetsPartition::default().with_partition_index(partition).with_timestamp(timestamp);
                match topics.last_mut() {
                    Some(t) if t.name.0.as_str() == topic => t.partitions.push(p),
                    _ => topics.push(
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.clone())))
                            .with_partitions(vec![p]),
                    ),
                }
            }
            let request = ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(topics);
            let answer = cluster.send(node, &request)?;
            // A partition asked twice (for two times) is answered twice: each answer is taken once.
            let mut taken = vec![false; answer.topics.iter().map(|t| t.partitions.len()).sum()];
            Ok(group
                .iter()
                .map(|(topic, partition, _)| {
                    let found = answer
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
                        .enumerate()
                        .find(|(i, (t, p))| {
                            !taken[*i] && t.name.0.as_str() == topic && p.partition_index == *partition
                        })
                        .map(|(i, (_, p))| {
                            taken[i] = true;
                            p
                        });
                    let Some(p) = found else {
                        return Step::Done(Err(errors::protocol(
                            &format!("node {node}"),
                            format!("the ListOffsets response has no answer for {topic}-{partition}"),
                        )));
                    };
                    let about = About { api: "ListOffsets", topic, partition: *partition, message: None };
                    match p.error_code {
                        errors::NONE if p.offset < 0 => Step::Done(Ok(None)),
                        errors::NONE => Step::Done(Ok(Some((p.offset, p.timestamp)))),
                        code if errors::is_stale_metadata(code) || errors::is_retriable(code) => {
                            Step::Retry(errors::from_code(code, about))
                        }
                        code => Step::Done(Err(errors::from_code(code, about))),
                    }
                })
                .collect())
        },
    )
}

/// One partition's offset for `timestamp` (EARLIEST, LATEST or a time in ms).
pub fn list_offset(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> Result<Option<(i64, i64)>> {
    list_offsets(cluster, &[(topic.to_string(), partition, timestamp)])
        .pop()
        .unwrap_or_else(|| Err(Error::InvalidArgument("a ListOffsets of one partition got no answer".into())))
}
