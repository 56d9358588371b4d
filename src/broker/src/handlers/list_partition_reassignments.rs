//! ListPartitionReassignments (`Admin.listPartitionReassignments`,
//! `kafka-reassign-partitions --list` and `--verify`): the controller's
//! ongoing moves, each with its replicas, adding and removing replicas.

use std::sync::Arc;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::server::Shared;

pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle(shared: &Arc<Shared>, r: ListPartitionReassignmentsRequest) -> Reply {
    let answer = |code: i16, message: Option<String>, topics: Vec<OngoingTopicReassignment>| {
        shared.metrics.error("ListPartitionReassignments", code);
        Reply::Message(Box::new(ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_topics(topics),
        )))
    };
    let asked: Option<Vec<(String, i32)>> = r.topics.as_ref().map(|ts| {
        ts.iter().flat_map(|t| t.partition_indexes.iter().map(|&p| (t.name.0.to_string(), p))).collect()
    });
    let Some(repl) = &shared.replication else {
        // A single broker, its own controller, never has a move under way.
        return answer(0, None, Vec::new());
    };
    match repl.list_reassignments(asked) {
        Err((code, message)) => answer(code, Some(message), Vec::new()),
        Ok(ongoing) => {
            let ids = |rs: Vec<i32>| rs.into_iter().map(BrokerId).collect::<Vec<_>>();
            let mut topics: Vec<OngoingTopicReassignment> = Vec::new();
            for ((topic, p), replicas, adding, removing) in ongoing {
                let partition = OngoingPartitionReassignment::default()
                    .with_partition_index(p)
                    .with_replicas(ids(replicas))
                    .with_adding_replicas(ids(adding))
                    .with_removing_replicas(ids(removing));
                match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.partitions.push(partition),
                    None => topics.push(
                        OngoingTopicReassignment::default()
                            .with_name(StrBytes::from_string(topic).into())
                            .with_partitions(vec![partition]),
                    ),
                }
            }
            answer(0, None, topics)
        }
    }
}
