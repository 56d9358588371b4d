//! CreateTopics: topics made in the store with their partition count and
//! config overrides, each answered alone with Kafka's error codes and
//! messages (`ReplicationControlManager.createTopics`). There is one broker,
//! so a replication factor is -1 (the default, 1) or 1.

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
use crate::server::Shared;

/// v5 is the first flexible version; v2 the crate's first.
pub const VERSIONS: (i16, i16) = (2, 4);

/// The name KRaft keeps for its own log, refused like the store's internal topics.
const CLUSTER_METADATA: &str = "__cluster_metadata";

type Refusal = (i16, String);

/// The partition count a topic asks for, from its count or its assignments.
fn partition_count(t: &CreatableTopic, node: i32, default: i32) -> Result<i32, Refusal> {
    let invalid_request = |m: &str| (ResponseError::InvalidRequest.code(), m.to_string());
    if !t.assignments.is_empty() {
        // A manual assignment: every partition on this broker, numbered from 0.
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
        let mut seen = vec![false; t.assignments.len()];
        for a in &t.assignments {
            if a.broker_ids.iter().map(|b| b.0).ne([node]) {
                return Err(bad(format!(
                    "partition {}: replicas {:?} must be exactly this broker, [{node}] (a single-broker cluster)",
                    a.partition_index,
                    a.broker_ids.iter().map(|b| b.0).collect::<Vec<_>>()
                )));
            }
            match usize::try_from(a.partition_index).ok().and_then(|i| seen.get_mut(i)) {
                Some(s) if !*s => *s = true,
                Some(_) => {
                    return Err(bad(format!(
                        "Found multiple manual partition assignments for partition {}",
                        a.partition_index
                    )))
                }
                None => {
                    return Err(bad("partitions should be a consecutive 0-based integer sequence".into()))
                }
            }
        }
        return Ok(t.assignments.len() as i32);
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

/// Creates (or, with `validate_only`, only checks) one topic.
fn create(store: &Store, t: &CreatableTopic, node: i32, validate_only: bool) -> Result<(), Refusal> {
    let name = t.name.0.as_str();
    validate_topic_name(name).map_err(|e| (error_code(&e), e.to_string()))?;
    if is_internal_topic(name) || name == CLUSTER_METADATA {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!("Creation of internal topic {name} is prohibited."),
        ));
    }
    if store.topic(name).is_ok() {
        return Err((ResponseError::TopicAlreadyExists.code(), format!("Topic '{name}' already exists.")));
    }
    let count = partition_count(t, node, store.config().num_partitions)?;
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
    let checked = store.config().topic_defaults.with_overrides(&overrides);
    checked.map_err(|e| (error_code(&e), e.to_string()))?;
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

pub async fn handle(shared: &Arc<Shared>, r: CreateTopicsRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
    let node = shared.config.node_id;
    let topics = blocking(move || {
        let outcomes =
            each_topic(&r.topics, |t| t.name.0.as_str(), |t| create(&store, t, node, r.validate_only));
        r.topics
            .iter()
            .zip(outcomes)
            .map(|(t, outcome)| {
                let result = CreatableTopicResult::default().with_name(t.name.clone());
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
    for t in &topics {
        shared.metrics.error("CreateTopics", t.error_code);
    }
    Reply::Message(Box::new(ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(topics))))
}
