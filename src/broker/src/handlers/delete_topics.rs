//! DeleteTopics: topics removed from the store by name, each answered alone:
//! UNKNOWN_TOPIC_OR_PARTITION for one that is not there (or whose name no
//! topic could have), and a refusal for the internal topics, which only their
//! coordinator writes.

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use seglog_core::log::is_internal_topic;
use seglog_core::store::validate_topic_name;

use super::{blocking, error_code, Reply};
use crate::server::Shared;

/// v4 is the first flexible version; v1 the crate's first. Names only (topic
/// ids come with v6).
pub const VERSIONS: (i16, i16) = (1, 3);

pub async fn handle(shared: &Arc<Shared>, r: DeleteTopicsRequest, _version: i16) -> Reply {
    let names: Vec<TopicName> =
        r.topic_names.iter().cloned().chain(r.topics.iter().filter_map(|t| t.name.clone())).collect();
    // The partitions of each topic: those deleted count against the client's
    // controller mutation quota.
    let partitions: std::collections::BTreeMap<String, i64> = names
        .iter()
        .map(|n| {
            let name = n.0.as_str();
            let count = match &shared.replication {
                Some(repl) => repl.view().topics.get(name).map_or(0, |t| t.assignment.len() as i64),
                None => shared.store.topic(name).map_or(0, |t| t.partitions.len() as i64),
            };
            (name.to_string(), count)
        })
        .collect();
    let reply = delete(shared, names, r.timeout_ms).await;
    if let Reply::Message(m) = &reply {
        if let ResponseKind::DeleteTopics(response) = m.as_ref() {
            let deleted: i64 = response
                .responses
                .iter()
                .filter(|t| t.error_code == 0)
                .filter_map(|t| partitions.get(t.name.as_ref()?.0.as_str()))
                .sum();
            super::client_quotas::record_mutations(shared, deleted);
        }
    }
    reply
}

async fn delete(shared: &Arc<Shared>, names: Vec<TopicName>, timeout_ms: i32) -> Reply {
    let store = shared.store.clone();
    if let Some(repl) = &shared.replication {
        // A cluster's topics are deleted in ZooKeeper; each member then drops its replicas.
        let mut responses = Vec::with_capacity(names.len());
        for name in names {
            let n = name.0.to_string();
            let outcome = if is_internal_topic(&n) {
                Err((
                    ResponseError::InvalidRequest.code(),
                    format!("Deletion of internal topic {n} is prohibited."),
                ))
            } else {
                let timeout = std::time::Duration::from_millis(timeout_ms.max(0) as u64);
                repl.delete_topic(&n, timeout).await
            };
            let result = DeletableTopicResult::default().with_name(Some(name));
            responses.push(match outcome {
                Ok(()) => result,
                Err((code, m)) => {
                    result.with_error_code(code).with_error_message(Some(StrBytes::from_string(m)))
                }
            });
        }
        for t in &responses {
            shared.metrics.error("DeleteTopics", t.error_code);
        }
        return Reply::Message(Box::new(ResponseKind::DeleteTopics(
            DeleteTopicsResponse::default().with_responses(responses),
        )));
    }
    let responses = blocking(move || {
        names
            .into_iter()
            .map(|name| {
                let n = name.0.to_string();
                let code = if validate_topic_name(&n).is_err() {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    match store.delete_topic(&n) {
                        Ok(()) => 0,
                        Err(e) => error_code(&e),
                    }
                };
                let result = DeletableTopicResult::default().with_name(Some(name)).with_error_code(code);
                if code == ResponseError::UnknownTopicOrPartition.code() {
                    result.with_error_message(Some(StrBytes::from_string(format!(
                        "The topic '{n}' does not exist."
                    ))))
                } else {
                    result
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    for t in &responses {
        shared.metrics.error("DeleteTopics", t.error_code);
    }
    Reply::Message(Box::new(ResponseKind::DeleteTopics(
        DeleteTopicsResponse::default().with_responses(responses),
    )))
}
