//! CreatePartitions: a topic grown to a new partition count through
//! `Store::create_partitions`, each topic answered alone with Kafka's codes
//! and messages: INVALID_PARTITIONS for a count not larger than the current
//! one, INVALID_REPLICA_ASSIGNMENT for an assignment off this one broker.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use seglog_core::error::Error;
use seglog_core::store::{Store, MAX_PARTITIONS};

use super::create_topics::{MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS};
use super::{blocking, each_topic, error_code, Reply};
use crate::server::Shared;

/// v2 is the first flexible version.
pub const VERSIONS: (i16, i16) = (0, 1);

type Refusal = (i16, String);

fn grow(store: &Store, t: &CreatePartitionsTopic, node: i32, validate_only: bool) -> Result<(), Refusal> {
    let name = t.name.0.as_str();
    let topic = store.topic(name).map_err(|e| match e {
        Error::UnknownTopic(_) | Error::InvalidTopic { .. } => {
            (ResponseError::UnknownTopicOrPartition.code(), format!("The topic '{name}' does not exist."))
        }
        e => (error_code(&e), e.to_string()),
    })?;
    let current = topic.partitions.len() as i32;
    let invalid = |m: String| Err((ResponseError::InvalidPartitions.code(), m));
    if t.count == current {
        return invalid(format!("Topic already has {current} partition(s)."));
    }
    if t.count < current {
        return invalid(format!(
            "Topic currently has {current} partitions, which is higher than the requested {}.",
            t.count
        ));
    }
    if t.count > MAX_PARTITIONS {
        return invalid(format!(
            "The requested {} partitions are more than this broker allows ({MAX_PARTITIONS}).",
            t.count
        ));
    }
    if let Some(assignments) = &t.assignments {
        let bad = |m: String| Err((ResponseError::InvalidReplicaAssignment.code(), m));
        let adding = t.count - current;
        if assignments.len() as i32 != adding {
            return bad(format!(
                "Attempted to add {adding} additional partitions, but only {} assignments were specified.",
                assignments.len()
            ));
        }
        if let Some(a) = assignments.iter().find(|a| a.broker_ids.iter().map(|b| b.0).ne([node])) {
            return bad(format!(
                "replicas {:?} must be exactly this broker, [{node}] (a single-broker cluster)",
                a.broker_ids.iter().map(|b| b.0).collect::<Vec<_>>()
            ));
        }
    }
    if validate_only {
        return Ok(());
    }
    match store.create_partitions(name, t.count) {
        Ok(_) => Ok(()),
        Err(e @ Error::InvalidArgument(_)) => invalid(e.to_string()),
        Err(e) => Err((error_code(&e), e.to_string())),
    }
}

/// The topics of a request that would take it past
/// `MAX_PARTITIONS_PER_REQUEST` new partitions, counted in order (a topic's
/// new partitions are its count less those it has): they are refused, the
/// topics before them grown.
fn over_budget(r: &CreatePartitionsRequest, current: impl Fn(&str) -> Option<usize>) -> Vec<bool> {
    let mut budget = MAX_PARTITIONS_PER_REQUEST;
    r.topics
        .iter()
        .map(|t| {
            let adding = current(t.name.0.as_str()).map_or(0, |n| (i64::from(t.count) - n as i64).max(0));
            if adding > budget {
                true
            } else {
                budget -= adding;
                false
            }
        })
        .collect()
}

fn too_many() -> Refusal {
    (ResponseError::PolicyViolation.code(), TOO_MANY_PARTITIONS.to_string())
}

pub async fn handle(shared: &Arc<Shared>, r: CreatePartitionsRequest, _version: i16) -> Reply {
    // The partitions each topic has now: what it grows by counts against
    // the client's controller mutation quota.
    let before: Vec<i64> = match &shared.replication {
        Some(repl) => {
            let view = repl.view();
            r.topics
                .iter()
                .map(|t| view.topics.get(t.name.0.as_str()).map_or(0, |v| v.assignment.len() as i64))
                .collect()
        }
        None => r
            .topics
            .iter()
            .map(|t| shared.store.topic(t.name.0.as_str()).map_or(0, |v| v.partitions.len() as i64))
            .collect(),
    };
    let asked: Vec<i64> = r.topics.iter().map(|t| i64::from(t.count)).collect();
    let validate_only = r.validate_only;
    let reply = grow_topics(shared, r).await;
    if let (Reply::Message(m), false) = (&reply, validate_only) {
        if let ResponseKind::CreatePartitions(response) = m.as_ref() {
            let grown: i64 = response
                .results
                .iter()
                .zip(asked.iter().zip(&before))
                .filter(|(result, _)| result.error_code == 0)
                .map(|(_, (count, before))| (count - before).max(0))
                .sum();
            super::client_quotas::record_mutations(shared, grown);
        }
    }
    reply
}

async fn grow_topics(shared: &Arc<Shared>, r: CreatePartitionsRequest) -> Reply {
    if let Some(repl) = &shared.replication {
        let view = repl.view();
        let over = over_budget(&r, |name| view.topics.get(name).map(|t| t.assignment.len()));
        let mut results = Vec::with_capacity(r.topics.len());
        for (t, over) in r.topics.iter().zip(over) {
            let result =
                CreatePartitionsTopicResult::default().with_name(t.name.clone()).with_error_message(None);
            let outcome = if over {
                Err(too_many())
            } else if t.count > MAX_PARTITIONS {
                Err((
                    ResponseError::InvalidPartitions.code(),
                    format!(
                        "The requested {} partitions are more than this broker allows ({MAX_PARTITIONS}).",
                        t.count
                    ),
                ))
            } else {
                let timeout = Duration::from_millis(r.timeout_ms.max(0) as u64);
                let manual = t
                    .assignments
                    .as_ref()
                    .map(|a| a.iter().map(|p| p.broker_ids.iter().map(|b| b.0).collect()).collect());
                repl.add_partitions(t.name.0.as_str(), t.count, manual, r.validate_only, timeout).await
            };
            results.push(match outcome {
                Ok(()) => result,
                Err((code, m)) => {
                    result.with_error_code(code).with_error_message(Some(StrBytes::from_string(m)))
                }
            });
        }
        for t in &results {
            shared.metrics.error("CreatePartitions", t.error_code);
        }
        return Reply::Message(Box::new(ResponseKind::CreatePartitions(
            CreatePartitionsResponse::default().with_results(results),
        )));
    }
    let store = shared.store.clone();
    let node = shared.config.node_id;
    let results = blocking(move || {
        let over = over_budget(&r, |name| store.topic(name).ok().map(|t| t.partitions.len()));
        let refused: std::collections::HashSet<&str> =
            r.topics.iter().zip(over).filter(|(_, over)| *over).map(|(t, _)| t.name.0.as_str()).collect();
        let outcomes = each_topic(
            &r.topics,
            |t| t.name.0.as_str(),
            |t| match refused.contains(t.name.0.as_str()) {
                true => Err(too_many()),
                false => grow(&store, t, node, r.validate_only),
            },
        );
        r.topics
            .iter()
            .zip(outcomes)
            .map(|(t, outcome)| {
                let result =
                    CreatePartitionsTopicResult::default().with_name(t.name.clone()).with_error_message(None);
                match outcome {
                    Ok(()) => result,
                    Err((code, m)) => {
                        result.with_error_code(code).with_error_message(Some(StrBytes::from_string(m)))
                    }
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    for t in &results {
        shared.metrics.error("CreatePartitions", t.error_code);
    }
    Reply::Message(Box::new(ResponseKind::CreatePartitions(
        CreatePartitionsResponse::default().with_results(results),
    )))
}
