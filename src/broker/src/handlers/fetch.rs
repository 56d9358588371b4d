//! Fetch: long poll (`max_wait_ms`, `min_bytes`), `max_bytes` and per-partition
//! limits (the first batch of the first partition with data always goes out
//! whole, as in KIP-74), never past the high watermark for consumers; a
//! cluster member's follower (`replica_id`) reads to the log end, and its
//! fetch offset tells the leader how far it got (the replica manager's
//! `fetch_messages`). The response is encoded here rather than by the
//! protocol crate because each partition's records are a file slice that the
//! connection sends with sendfile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{FetchRequest, RequestHeader};
use kafka_protocol::ResponseError;

use super::Reply;
use crate::fetch_session::Context;
use crate::replica_manager::{FetchParams, PartitionData, Reader, TopicData, Wanted};
use crate::response::{encode_header, Part, Response};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::Shared;

/// v4 is the first with RecordBatch v2 (librdkafka's MSGVER2), v7 the first
/// with fetch sessions, v10 the first with zstd; v12 is flexible and would
/// need topic ids.
pub const VERSIONS: (i16, i16) = (4, 11);

pub async fn handle(shared: &Arc<Shared>, r: FetchRequest, header: &RequestHeader, version: i16) -> Reply {
    let wanted: Vec<Wanted> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| Wanted {
                topic: t.topic.0.to_string(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: i64::from(p.partition_max_bytes.max(0)),
                current_epoch: p.current_leader_epoch,
            })
        })
        .collect();
    // v7+ carry fetch sessions (KIP-227, see `fetch_session`).
    let (context, wanted) = if version >= 7 {
        let forgotten: Vec<(String, i32)> = r
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |&p| (t.topic.0.to_string(), p)))
            .collect();
        match shared.fetch_sessions.begin(r.session_id, r.session_epoch, wanted, &forgotten) {
            Ok(resolved) => resolved,
            Err(code) => {
                shared.metrics.error("Fetch", code);
                return built(header, encode(version, code, 0, &[], r.isolation_level));
            }
        }
    } else {
        (Context::Sessionless, wanted)
    };
    match context {
        Context::New(_) => {
            shared.metrics.fetch_sessions_opened.inc();
        }
        Context::Incremental(_) => {
            shared.metrics.incremental_fetches.inc();
        }
        Context::Sessionless => {}
    }
    // A consumer under a fetch byte-rate quota reads at most what the quota
    // allows over its windows in one response (as Kafka caps it), so that a
    // response is never too large to be let through.
    let quotas = Some(shared.quota_configs()).filter(|q| r.replica_id.0 < 0 && !q.is_empty());
    let user = quotas.as_ref().map(|_| crate::connection::quota_user()).unwrap_or_default();
    let client_id = header.client_id.as_deref().unwrap_or("");
    let most = quotas.as_ref().and_then(|q| shared.client_quotas.fetch.most_per_request(q, &user, client_id));
    let params = FetchParams {
        max_bytes: most
            .map_or(i64::from(r.max_bytes.max(0)), |m| i64::from(r.max_bytes.max(0)).min(m.max(1.0) as i64)),
        min_bytes: r.min_bytes.max(0) as u64,
        deadline: Instant::now() + Duration::from_millis(r.max_wait_ms.max(0) as u64),
        reader: Reader {
            replica_id: r.replica_id.0,
            rack: r.rack_id.to_string(),
            from_followers: version >= 11,
        },
    };
    // A consumer needs READ on each topic; a follower CLUSTER_ACTION on the cluster.
    let (wanted, denied): (Vec<Wanted>, Vec<Wanted>) = if !shared.authorizer.enabled {
        (wanted, Vec::new())
    } else if r.replica_id.0 >= 0 {
        match shared.authorize(Operation::ClusterAction, ResourceType::Cluster, CLUSTER_NAME) {
            true => (wanted, Vec::new()),
            false => (Vec::new(), wanted),
        }
    } else {
        let mut allowed = std::collections::BTreeMap::new();
        wanted.into_iter().partition(|w| {
            *allowed
                .entry(w.topic.clone())
                .or_insert_with(|| shared.authorize(Operation::Read, ResourceType::Topic, &w.topic))
        })
    };
    let (mut topics, total) = shared.replica_manager.fetch_messages(Arc::new(wanted), params).await;
    for w in denied {
        let refused = PartitionData::refused(w.partition, ResponseError::TopicAuthorizationFailed.code());
        match topics.iter_mut().find(|t| t.name == w.topic) {
            Some(t) => t.partitions.push(refused),
            None => topics.push(TopicData { name: w.topic, partitions: vec![refused] }),
        }
    }
    if let Some(r) = shared.replication.as_ref().filter(|_| r.replica_id.0 >= 0) {
        r.leader_answered(&topics);
    }
    for p in topics.iter().flat_map(|t| &t.partitions) {
        shared.metrics.error("Fetch", p.error_code);
    }
    if let Some(quotas) = &quotas {
        let now = Instant::now();
        let fetch = &shared.client_quotas.fetch;
        let wait = fetch.record(quotas, &user, client_id, total as f64, now);
        // A first batch larger than the quota allows at once (KIP-74 sends
        // it whole) would be refused for ever: it goes out, and the client
        // waits for it afterwards.
        let oversized = most.is_some_and(|m| total as f64 > m);
        if !wait.is_zero() {
            shared.metrics.throttled("fetch", wait.as_millis() as u64);
            crate::connection::throttle(wait);
            if !oversized {
                // Over the quota: nothing is sent (so nothing counts), and the
                // client is told how long to wait, as Kafka answers.
                fetch.unrecord(quotas, &user, client_id, total as f64, now);
                let session_id = shared.fetch_sessions.abandon(context);
                return built(header, encode(version, 0, session_id, &[], r.isolation_level));
            }
        }
    }
    shared.metrics.bytes_out.inc_by(total);
    let topics = shared.fetch_sessions.finish(context, topics);
    built(header, encode(version, 0, context.session_id(), &topics, r.isolation_level))
}

/// Writes `throttle_time_ms` into a Fetch response built here: the body's
/// first field, right after the response header.
pub fn set_throttle(response: &mut Response, ms: i32) {
    let Some(Part::Bytes(body)) = response.parts.get_mut(1) else { return };
    if body.len() >= 4 {
        let mut patched = BytesMut::from(&body[..]);
        patched[..4].copy_from_slice(&ms.to_be_bytes());
        *body = patched.freeze();
    }
}

fn built(header: &RequestHeader, body: Vec<Part>) -> Reply {
    let mut head = BytesMut::new();
    // Fetch v4-v11 answers with response header v0, which cannot fail to encode.
    let _ = encode_header(&mut head, header.correlation_id, 0);
    let mut parts = vec![Part::Bytes(head.freeze())];
    parts.extend(body);
    Reply::Built(Response { parts })
}

fn put_string(buf: &mut BytesMut, s: &str) {
    let b = s.as_bytes();
    buf.put_i16(b.len().min(i16::MAX as usize) as i16);
    buf.put_slice(&b[..b.len().min(i16::MAX as usize)]);
}

/// The FetchResponse body of `version` (4 to 11) as parts: the fields as
/// bytes, each partition's records as its file slice.
pub fn encode(
    version: i16,
    error: i16,
    session_id: i32,
    topics: &[TopicData],
    isolation_level: i8,
) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0); // throttle_time_ms
    if version >= 7 {
        buf.put_i16(error);
        buf.put_i32(session_id);
    }
    buf.put_i32(topics.len() as i32);
    for t in topics {
        put_string(&mut buf, &t.name);
        buf.put_i32(t.partitions.len() as i32);
        for p in &t.partitions {
            buf.put_i32(p.partition);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            buf.put_i64(p.high_watermark); // last_stable_offset: no transactions
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            // aborted_transactions: null for read_uncommitted, none for read_committed
            buf.put_i32(if isolation_level == 0 { -1 } else { 0 });
            if version >= 11 {
                buf.put_i32(p.preferred_read_replica);
            }
            match &p.records {
                Some(f) => {
                    buf.put_i32(f.length as i32);
                    parts.push(Part::Bytes(std::mem::take(&mut buf).freeze()));
                    parts.push(Part::File(f.clone()));
                }
                None => buf.put_i32(0),
            }
        }
    }
    if !buf.is_empty() {
        parts.push(Part::Bytes(buf.freeze()));
    }
    parts.retain(|p| !matches!(p, Part::Bytes(b) if b.is_empty()));
    parts
}

#[cfg(test)]
#[path = "fetch_test.rs"]
mod tests;
