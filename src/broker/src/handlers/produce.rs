//! Produce: each partition's batches validated as Kafka's LogValidator does
//! (without re-encoding them), offsets assigned by patching the headers, and
//! an answer per partition with Kafka's error codes (and, from v8, the records
//! at fault: KIP-467's record errors). Partitions of a request
//! are appended concurrently; appends to one partition from many connections
//! meet at its writer lock and share their fsyncs (the log's group commit).

use std::sync::Arc;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{blocking, Reply};
use crate::replica_manager::describe_code;
use crate::security::acl::{Operation, ResourceType};
use crate::server::Shared;

pub const VERSIONS: (i16, i16) = (3, 8);

/// Why a whole request is refused before anything of it is appended.
fn refusal(r: &ProduceRequest) -> Option<(i16, &'static str)> {
    if !(-1..=1).contains(&r.acks) {
        return Some((ResponseError::InvalidRequiredAcks.code(), "acks must be 0, 1 or -1 (all)"));
    }
    if r.transactional_id.is_some() {
        return Some((
            ResponseError::TransactionalIdAuthorizationFailed.code(),
            "transactions are not supported by this broker",
        ));
    }
    None
}

pub async fn handle(shared: &Arc<Shared>, r: ProduceRequest, _version: i16) -> Reply {
    let acks = r.acks;
    let timeout = std::time::Duration::from_millis(r.timeout_ms.max(0) as u64);
    let refused = refusal(&r);
    // One partition (the common case): append on this thread. Several: in
    // parallel, so one partition's fsync does not hold up the others.
    let parallel = r.topic_data.iter().map(|t| t.partition_data.len()).sum::<usize>() > 1;
    let mut pending = Vec::new();
    for topic in r.topic_data {
        let name = topic.name.0.to_string();
        let refused = refused.or_else(|| {
            (!shared.authorize(Operation::Write, ResourceType::Topic, &name))
                .then_some((ResponseError::TopicAuthorizationFailed.code(), "Topic authorization failed."))
        });
        let mut parts = Vec::new();
        for p in topic.partition_data {
            let index = p.index;
            if let Some(refusal) = refused {
                parts.push((index, Err(refusal)));
                continue;
            }
            let manager = shared.replica_manager.clone();
            let name = name.clone();
            let append = move || {
                let records = p.records.unwrap_or_default();
                manager.append_records(&name, index, records.to_vec(), acks)
            };
            let task = if parallel {
                tokio::task::spawn_blocking(append)
            } else {
                // Already done by the time it is awaited.
                let result = blocking(append).await;
                tokio::spawn(async move { result })
            };
            parts.push((index, Ok(task)));
        }
        pending.push((name, parts));
    }
    let mut responses = Vec::with_capacity(pending.len());
    for (name, parts) in pending {
        let mut partitions = Vec::with_capacity(parts.len());
        for (index, task) in parts {
            let mut resp = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            match task {
                Err((code, why)) => {
                    resp.error_code = code;
                    resp.error_message = Some(StrBytes::from_static_str(why));
                }
                Ok(task) => match task.await {
                    Ok(Ok(a)) => {
                        // acks=all: answered once the in-sync replicas have the batch.
                        let code = if acks == -1 {
                            shared.replica_manager.wait_for_replicas(&a, timeout).await
                        } else {
                            0
                        };
                        if code == 0 {
                            resp.base_offset = a.info.base_offset;
                            resp.log_append_time_ms = a.info.log_append_time;
                            resp.log_start_offset = a.log_start_offset;
                        } else {
                            resp.error_code = code;
                            resp.error_message = Some(StrBytes::from_string(describe_code(code).to_string()));
                        }
                    }
                    Ok(Err(refused)) => {
                        resp.error_code = refused.code;
                        resp.error_message = Some(StrBytes::from_string(refused.message));
                        // v8+ (KIP-467): the records at fault, so a client fails only those.
                        resp.record_errors = refused
                            .record_errors
                            .into_iter()
                            .map(|(index, why)| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(index)
                                    .with_batch_index_error_message(Some(StrBytes::from_string(why)))
                            })
                            .collect();
                    }
                    Err(e) => {
                        resp.error_code = ResponseError::UnknownServerError.code();
                        resp.error_message = Some(StrBytes::from_string(format!("append failed: {e}")));
                    }
                },
            }
            shared.metrics.error("Produce", resp.error_code);
            partitions.push(resp);
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(StrBytes::from_string(name)))
                .with_partition_responses(partitions),
        );
    }
    if acks == 0 {
        return Reply::Nothing;
    }
    Reply::Message(Box::new(ResponseKind::Produce(ProduceResponse::default().with_responses(responses))))
}
