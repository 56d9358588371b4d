//! ElectLeaders (`Admin.electLeaders`, `kafka-leader-election`): preferred or
//! unclean leader elections, made by the controller of a cluster. A single
//! broker leads every partition of its store, its only replica, so no
//! election is ever needed there. As in Kafka, a request for every partition
//! (no partitions named) answers only for the partitions where an election
//! was made or failed, not those that needed none.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

use super::Reply;
use crate::replication::{Elected, Election};
use crate::server::Shared;

/// v2 is the first flexible version.
pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle(shared: &Arc<Shared>, r: ElectLeadersRequest, version: i16) -> Reply {
    let answer = |error: i16, results: Vec<ReplicaElectionResult>| {
        Reply::Message(Box::new(ResponseKind::ElectLeaders(
            ElectLeadersResponse::default().with_error_code(error).with_replica_election_results(results),
        )))
    };
    let election = match r.election_type {
        0 => Election::Preferred,
        1 => Election::Unclean,
        other => {
            shared.metrics.error("ElectLeaders", E::InvalidRequest.code());
            let results =
                by_topic(named(&r).into_iter().map(|tp| {
                    (tp, E::InvalidRequest.code(), Some(format!("unknown election type {other}")))
                }));
            return answer(if version >= 1 { E::InvalidRequest.code() } else { 0 }, results);
        }
    };
    let every = r.topic_partitions.is_none();
    let asked = r.topic_partitions.as_ref().map(|_| named(&r));
    let outcome = match &shared.replication {
        Some(repl) => {
            let timeout = Duration::from_millis(r.timeout_ms.max(0) as u64);
            repl.elect_leaders(election, asked, timeout).await
        }
        None => Ok(single_broker(shared, asked)),
    };
    match outcome {
        Ok(results) => {
            // Every partition: only those with an election made or failed.
            let results =
                results.into_iter().filter(|(_, code, _)| !every || *code != E::ElectionNotNeeded.code());
            let results: Vec<Elected> = results.collect();
            for (_, code, _) in &results {
                shared.metrics.error("ElectLeaders", *code);
            }
            answer(0, by_topic(results.into_iter()))
        }
        Err((code, message)) => {
            shared.metrics.error("ElectLeaders", code);
            if version >= 1 {
                answer(code, Vec::new())
            } else {
                // v0 has no top-level error: each partition carries it.
                answer(0, by_topic(named(&r).into_iter().map(|tp| (tp, code, Some(message.clone())))))
            }
        }
    }
}

/// The partitions the request names, in its order.
fn named(r: &ElectLeadersRequest) -> Vec<(String, i32)> {
    r.topic_partitions
        .iter()
        .flatten()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect()
}

/// A single broker: every partition it has is led by its only replica.
fn single_broker(shared: &Shared, asked: Option<Vec<(String, i32)>>) -> Vec<Elected> {
    let Some(asked) = asked else { return Vec::new() };
    asked
        .into_iter()
        .map(|(topic, p)| {
            let exists =
                shared.store.topic(&topic).is_ok_and(|t| (0..t.partitions.len() as i32).contains(&p));
            if exists {
                ((topic, p), E::ElectionNotNeeded.code(), None)
            } else {
                let message = format!("The partition {topic}-{p} does not exist.");
                ((topic, p), E::UnknownTopicOrPartition.code(), Some(message))
            }
        })
        .collect()
}

fn by_topic(results: impl Iterator<Item = Elected>) -> Vec<ReplicaElectionResult> {
    let mut topics: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    for ((topic, p), code, message) in results {
        topics.entry(topic).or_default().push(
            PartitionResult::default()
                .with_partition_id(p)
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string)),
        );
    }
    topics
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic)))
                .with_partition_result(partitions)
        })
        .collect()
}
