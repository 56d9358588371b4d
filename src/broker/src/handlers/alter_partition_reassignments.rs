//! AlterPartitionReassignments (`Admin.alterPartitionReassignments`,
//! `kafka-reassign-partitions --execute` and `--cancel`): sent to the
//! controller, which starts or cancels each partition's move (see
//! `replication::reassignment`). A single broker, its own controller,
//! answers as Kafka's one-broker cluster does: a move onto itself is done at
//! once, one naming any other broker is INVALID_REPLICA_ASSIGNMENT, and there
//! is never a move to cancel.

use std::sync::Arc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

use super::Reply;
use crate::replication::{Reassigned, Target};
use crate::server::Shared;

/// v1 adds `allow_replication_factor_change` (KIP-860).
pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle(shared: &Arc<Shared>, r: AlterPartitionReassignmentsRequest, version: i16) -> Reply {
    let allow_change = version < 1 || r.allow_replication_factor_change;
    let answer = |code: i16, message: Option<String>, responses: Vec<ReassignableTopicResponse>| {
        shared.metrics.error("AlterPartitionReassignments", code);
        Reply::Message(Box::new(ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string))
                .with_allow_replication_factor_change(allow_change)
                .with_responses(responses),
        )))
    };
    let wanted: Vec<Target> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let target = p.replicas.as_ref().map(|rs| rs.iter().map(|b| b.0).collect());
                ((t.name.0.to_string(), p.partition_index), target)
            })
        })
        .collect();
    let outcome = match &shared.replication {
        Some(repl) => repl.alter_reassignments(wanted, allow_change).await,
        None => Ok(single_broker(shared, wanted)),
    };
    match outcome {
        Err((code, message)) => answer(code, Some(message), Vec::new()),
        Ok(results) => {
            let mut topics: Vec<ReassignableTopicResponse> = Vec::new();
            for ((topic, p), code, message) in results {
                shared.metrics.error("AlterPartitionReassignments", code);
                let partition = ReassignablePartitionResponse::default()
                    .with_partition_index(p)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string));
                match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.partitions.push(partition),
                    None => topics.push(
                        ReassignableTopicResponse::default()
                            .with_name(StrBytes::from_string(topic).into())
                            .with_partitions(vec![partition]),
                    ),
                }
            }
            answer(0, None, topics)
        }
    }
}

/// A single broker's answers: each partition its only replica.
fn single_broker(shared: &Shared, wanted: Vec<Target>) -> Vec<Reassigned> {
    let node = shared.config.node_id;
    wanted
        .into_iter()
        .map(|((topic, p), target)| {
            let (code, message) = if shared.store.partition(&topic, p).is_err() {
                (E::UnknownTopicOrPartition.code(), None)
            } else {
                match target {
                    None => (E::NoReassignmentInProgress.code(), None),
                    Some(rs) if rs == [node] => (0, None),
                    Some(rs) => (
                        E::InvalidReplicaAssignment.code(),
                        Some(format!(
                            "Replica assignment {rs:?} names brokers that are not alive (this cluster is broker {node} alone)"
                        )),
                    ),
                }
            };
            ((topic, p), code, message)
        })
        .collect()
}
