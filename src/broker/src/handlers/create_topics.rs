//! CreateTopics: topics made in the store with their partition count and
//! config overrides, each answered alone with Kafka's error codes and
//! messages (`ReplicationControlManager.createTopics`). A single broker takes
//! a replication factor of -1 (the default, 1) or 1; a cluster member places
//! the replicas over the live brokers by rack and writes the topic to
//! ZooKeeper for the controller to give its partitions leaders.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use seglog_core::error::Error;
use seglog_core::log::is_internal_topic;
use seglog_core::store::{validate_topic_name, Store, MAX_PARTITIONS};

use super::{blocking, each_topic, error_code, Reply};
use crate::replication::{Placing, Replication};
use crate::server::Shared;
use std::time::Duration;

/// v5 is the first flexible version; v2 the crate's first.
pub const VERSIONS: (i16, i16) = (2, 4);

/// The name KRaft keeps for its own log, refused like the store's internal topics.
const CLUSTER_METADATA: &str = "__cluster_metadata";

type Refusal = (i16, String);

/// A topic's manual assignment, if it gives one: each partition's replicas in
/// partition order, once the request's own rules hold (Kafka's: replication
/// factor and partition count -1, partitions numbered 0.. without gaps).
fn manual_assignment(t: &CreatableTopic) -> Result<Option<Vec<Vec<i32>>>, Refusal> {
    if t.assignments.is_empty() {
        return Ok(None);
    }
    let invalid_request = |m: &str| (ResponseError::InvalidRequest.code(), m.to_string());
    if t.replication_factor != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ));
    }
    if t.num_partitions != -1 {
        return Err(invalid_request(
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ));
    }
    let bad = |m: String| (ResponseError::InvalidReplicaAssignment.code(), m);
    let mut placed: Vec<Option<Vec<i32>>> = vec![None; t.assignments.len()];
    for a in &t.assignments {
        match usize::try_from(a.partition_index).ok().and_then(|i| placed.get_mut(i)) {
            Some(slot @ None) => *slot = Some(a.broker_ids.iter().map(|b| b.0).collect()),
            Some(Some(_)) => {
                return Err(bad(format!(
                    "Found multiple manual partition assignments for partition {}",
                    a.partition_index
                )))
            }
            None => return Err(bad("partitions should be a consecutive 0-based integer sequence".into())),
        }
    }
    Ok(Some(placed.into_iter().flatten().collect()))
}

/// The partition count a topic asks for, from its count or its assignments.
fn partition_count(t: &CreatableTopic, node: i32, default: i32) -> Result<i32, Refusal> {
    if let Some(assignment) = manual_assignment(t)? {
        // A single broker's: every partition on this broker.
        if let Some((p, replicas)) = assignment.iter().enumerate().find(|(_, r)| **r != [node]) {
            return Err((
                ResponseError::InvalidReplicaAssignment.code(),
                format!("partition {p}: replicas {replicas:?} must be exactly this broker, [{node}] (a single-broker cluster)"),
            ));
        }
        return Ok(assignment.len() as i32);
    }
    let rf = t.replication_factor;
    if rf < -1 || rf == 0 {
        return Err((
            ResponseError::InvalidReplicationFactor.code(),
            "Replication factor must be larger than 0, or -1 to use the default value.".into(),
        ));
    }
    if rf > 1 {
        return Err((
            ResponseError::InvalidReplicationFactor.code(),
            format!(
                "Unable to replicate the partition {rf} time(s): The target replication factor of {rf} \
                 cannot be reached because only 1 broker(s) are registered."
            ),
        ));
    }
    match t.num_partitions {
        -1 => Ok(default),
        n if n < -1 || n == 0 => Err((
            ResponseError::InvalidPartitions.code(),
            "Number of partitions was set to an invalid non-positive value.".into(),
        )),
        n if n > MAX_PARTITIONS => Err((
            ResponseError::InvalidPartitions.code(),
            format!("Number of partitions {n} is more than this broker allows ({MAX_PARTITIONS})."),
        )),
        n => Ok(n),
    }
}

/// The topic's config overrides, checked against the store's defaults.
fn overrides_of(store: &Store, t: &CreatableTopic) -> Result<BTreeMap<String, String>, Refusal> {
    let mut overrides = BTreeMap::new();
    for c in &t.configs {
        let Some(value) = &c.value else {
            return Err((
                ResponseError::InvalidConfig.code(),
                format!("Null value not supported for topic configs: {}", c.name.as_str()),
            ));
        };
        overrides.insert(c.name.to_string(), value.to_string());
    }
    super::configs::within_bounds(&BTreeMap::new(), &overrides)?;
    if let Some(small) = overrides.remove(super::configs::INTERNAL_SEGMENT_BYTES) {
        overrides.insert("segment.bytes".to_string(), small);
    }
    // Kafka's message as it is, without the store's "invalid config: ".
    store.config().topic_defaults.with_overrides(&overrides).map_err(|e| match e {
        Error::InvalidConfig(m) => (ResponseError::InvalidConfig.code(), m),
        e => (error_code(&e), e.to_string()),
    })?;
    Ok(overrides)
}

/// The name checks both kinds of broker make.
fn check_name(name: &str) -> Result<(), Refusal> {
    validate_topic_name(name).map_err(|e| (error_code(&e), e.to_string()))?;
    if is_internal_topic(name) || name == CLUSTER_METADATA {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!("Creation of internal topic {name} is prohibited."),
        ));
    }
    Ok(())
}

/// A cluster member's CreateTopics for one topic: placed over the live
/// brokers by rack, written to ZooKeeper, led once the controller acts.
async fn create_replicated(
    shared: &Shared,
    repl: &Replication,
    t: &CreatableTopic,
    validate_only: bool,
    timeout: Duration,
) -> Result<(), Refusal> {
    let name = t.name.0.as_str();
    check_name(name)?;
    if let Some(assignment) = manual_assignment(t)? {
        let overrides = overrides_of(&shared.store, t)?;
        let placing = Placing::Manual(assignment);
        return repl.create_topic(name, placing, &overrides, validate_only, timeout).await;
    }
    let rf = match t.replication_factor {
        -1 => shared.config.default_replication_factor,
        rf if rf < -1 || rf == 0 => {
            return Err((
                ResponseError::InvalidReplicationFactor.code(),
                "Replication factor must be larger than 0, or -1 to use the default value.".into(),
            ))
        }
        rf => i32::from(rf),
    };
    // The partition count's rules are the single broker's (at replication factor 1).
    let count = partition_count(
        &t.clone().with_replication_factor(1),
        shared.config.node_id,
        shared.store.config().num_partitions,
    )?;
    let overrides = overrides_of(&shared.store, t)?;
    let placing = Placing::Auto { partitions: count, replication_factor: rf };
    repl.create_topic(name, placing, &overrides, validate_only, timeout).await
}

/// Creates (or, with `validate_only`, only checks) one topic.
fn create(store: &Store, t: &CreatableTopic, node: i32, validate_only: bool) -> Result<(), Refusal> {
    let name = t.name.0.as_str();
    check_name(name)?;
    if store.topic(name).is_ok() {
        return Err((ResponseError::TopicAlreadyExists.code(), format!("Topic '{name}' already exists.")));
    }
    let count = partition_count(t, node, store.config().num_partitions)?;
    let overrides = overrides_of(store, t)?;
    if validate_only {
        return Ok(());
    }
    match store.create_topic(name, count, &overrides) {
        Ok(_) => Ok(()),
        Err(Error::TopicExists(_)) => {
            Err((ResponseError::TopicAlreadyExists.code(), format!("Topic '{name}' already exists.")))
        }
        Err(e @ Error::InvalidArgument(_)) => Err((ResponseError::InvalidPartitions.code(), e.to_string())),
        Err(e) => Err((error_code(&e), e.to_string())),
    }
}

/// The partitions one request may create, all its topics together (Kafka 4's
/// bound): a request over it creates nothing. Without it one request could
/// take more files than the process may open.
pub const MAX_PARTITIONS_PER_REQUEST: i64 = 10_000;

/// Kafka's message for a request over `MAX_PARTITIONS_PER_REQUEST`.
pub const TOO_MANY_PARTITIONS: &str = "Excessively large number of partitions per request.";

/// The partitions `topics` would create: each topic's assignments, or its
/// count (`-1`: `num.partitions`); topics refused for their count add none.
pub fn partitions_asked(topics: &[CreatableTopic], default: i32) -> i64 {
    topics
        .iter()
        .map(|t| match (t.assignments.len(), t.num_partitions) {
            (0, -1) => i64::from(default),
            (0, n) => i64::from(n.max(0)),
            (n, _) => n as i64,
        })
        .sum()
}

pub async fn handle(shared: &Arc<Shared>, r: CreateTopicsRequest, _version: i16) -> Reply {
    if partitions_asked(&r.topics, shared.store.config().num_partitions) > MAX_PARTITIONS_PER_REQUEST {
        let topics: Vec<_> = r
            .topics
            .iter()
            .map(|t| {
                CreatableTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(ResponseError::PolicyViolation.code())
                    .with_error_message(Some(StrBytes::from_static_str(TOO_MANY_PARTITIONS)))
            })
            .collect();
        for t in &topics {
            shared.metrics.error("CreateTopics", t.error_code);
        }
        return Reply::Message(Box::new(ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(topics),
        )));
    }
    if let Some(repl) = &shared.replication {
        let timeout = Duration::from_millis(r.timeout_ms.max(0) as u64);
        let mut topics = Vec::with_capacity(r.topics.len());
        let mut seen = std::collections::HashSet::new();
        for t in &r.topics {
            let result = CreatableTopicResult::default().with_name(t.name.clone()).with_error_message(None);
            let outcome = if seen.insert(t.name.0.to_string()) {
                create_replicated(shared, repl, t, r.validate_only, timeout).await
            } else {
                Err((
                    ResponseError::InvalidRequest.code(),
                    format!("Duplicate topic name {}", t.name.0.as_str()),
                ))
            };
            topics.push(match outcome {
                Ok(()) => result,
                Err((code, message)) => {
                    result.with_error_code(code).with_error_message(Some(StrBytes::from_string(message)))
                }
            });
        }
        record_created(shared, &r, &topics);
        return Reply::Message(Box::new(ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(topics),
        )));
    }
    let store = shared.store.clone();
    let asked = r.clone();
    let node = shared.config.node_id;
    let topics = blocking(move || {
        let outcomes =
            each_topic(&r.topics, |t| t.name.0.as_str(), |t| create(&store, t, node, r.validate_only));
        r.topics
            .iter()
            .zip(outcomes)
            .map(|(t, outcome)| {
                let result =
                    CreatableTopicResult::default().with_name(t.name.clone()).with_error_message(None);
                match outcome {
                    Ok(()) => result,
                    Err((code, message)) => {
                        result.with_error_code(code).with_error_message(Some(StrBytes::from_string(message)))
                    }
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    record_created(shared, &asked, &topics);
    Reply::Message(Box::new(ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))))
}

/// Counts the answers' errors, and the partitions created against the
/// client's controller mutation quota.
fn record_created(shared: &Shared, r: &CreateTopicsRequest, results: &[CreatableTopicResult]) {
    for t in results {
        shared.metrics.error("CreateTopics", t.error_code);
    }
    if r.validate_only {
        return;
    }
    let default = shared.store.config().num_partitions;
    let created: Vec<CreatableTopic> = r
        .topics
        .iter()
        .zip(results)
        .filter(|(_, result)| result.error_code == 0)
        .map(|(t, _)| t.clone())
        .collect();
    super::client_quotas::record_mutations(shared, partitions_asked(&created, default));
}
