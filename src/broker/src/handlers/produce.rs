//! Produce: each partition's batches validated as Kafka's LogValidator does
//! (without re-encoding them), offsets assigned by patching the headers, and
//! an answer per partition with Kafka's error codes. Partitions of a request
//! are appended concurrently; appends to one partition from many connections
//! meet at its writer lock and share their fsyncs (the log's group commit).

use std::sync::Arc;

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use seglog_core::log::AppendOrigin;

use super::{blocking, error_code, Reply};
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

/// A partition's append, for its answer.
struct Appended {
    info: seglog_core::log::AppendInfo,
    start: i64,
    log: Arc<seglog_core::log::PartitionLog>,
    /// The leadership it was appended in (a cluster member's).
    leadership: Option<u64>,
}

/// Kafka's words for the codes a cluster member answers Produce with.
fn describe_code(code: i16) -> &'static str {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::NotLeaderOrFollower) => "this broker is not the partition's leader",
        Some(ResponseError::NotEnoughReplicas) => {
            "Messages are rejected since there are fewer in-sync replicas than required."
        }
        Some(ResponseError::NotEnoughReplicasAfterAppend) => {
            "Messages are written to the log, but to fewer in-sync replicas than required."
        }
        Some(ResponseError::RequestTimedOut) => "the in-sync replicas did not confirm the write in time",
        _ => "refused",
    }
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
        let mut parts = Vec::new();
        for p in topic.partition_data {
            let index = p.index;
            if refused.is_some() {
                parts.push((index, None));
                continue;
            }
            let store = shared.store.clone();
            let name = name.clone();
            let metrics = shared.metrics.clone();
            let replication = shared.replication.clone();
            let append = move || {
                let failed = |e: seglog_core::Error| (error_code(&e), e.to_string());
                let log = store.partition(&name, index).map_err(failed)?;
                // A cluster member appends only as the partition's leader, and
                // takes acks=all only with enough replicas in sync.
                let leadership = match &replication {
                    Some(r) => {
                        let refused = |code: i16| (code, format!("{name}-{index}: {}", describe_code(code)));
                        r.leader_check(&name, index, -1).map_err(refused)?;
                        if acks == -1 {
                            r.min_isr_check(&name, index).map_err(refused)?;
                        }
                        r.leadership(&name, index)
                    }
                    None => None,
                };
                let records = p.records.unwrap_or_default();
                let bytes = records.len() as u64;
                let info = log.append_as_leader(records.to_vec(), AppendOrigin::Client).map_err(failed)?;
                if let Some(r) = &replication {
                    r.leader_appended(&log);
                }
                metrics.bytes_in.inc_by(bytes);
                metrics.messages_in.inc_by(info.records.max(0) as u64);
                Ok::<_, (i16, String)>(Appended { start: log.log_start_offset(), info, log, leadership })
            };
            let task = if parallel {
                tokio::task::spawn_blocking(append)
            } else {
                // Already done by the time it is awaited.
                let result = blocking(append).await;
                tokio::spawn(async move { result })
            };
            parts.push((index, Some(task)));
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
                None => {
                    let (code, why) = refused.unwrap_or((-1, ""));
                    resp.error_code = code;
                    resp.error_message = Some(StrBytes::from_static_str(why));
                }
                Some(task) => match task.await {
                    Ok(Ok(a)) => {
                        // acks=all in a cluster: answered once the ISR has the batch.
                        let code = match (&shared.replication, a.leadership) {
                            (Some(r), Some(leadership)) if acks == -1 => {
                                r.wait_committed(&a.log, leadership, a.info.last_offset + 1, timeout).await
                            }
                            _ => 0,
                        };
                        if code == 0 {
                            resp.base_offset = a.info.base_offset;
                            resp.log_append_time_ms = a.info.log_append_time;
                            resp.log_start_offset = a.start;
                        } else {
                            resp.error_code = code;
                            resp.error_message = Some(StrBytes::from_string(describe_code(code).to_string()));
                        }
                    }
                    Ok(Err((code, message))) => {
                        resp.error_code = code;
                        resp.error_message = Some(StrBytes::from_string(message));
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
