//! One handler per API, each declaring the versions it serves next to its
//! code; `SUPPORTED` gathers them, and it is what ApiVersions answers.
//!
//! A request whose API is unknown or not served, or whose bytes do not decode,
//! closes its connection with a log line (as Kafka does); an ApiVersions of a
//! version not served gets UNSUPPORTED_VERSION and the served ranges, so the
//! client can retry with one it has.

mod acls;
mod alter_configs;
mod alter_partition_reassignments;
mod api_versions;
mod authorize;
mod client_quotas;
pub(crate) mod configs;
mod controlled_shutdown;
mod controller_requests;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod elect_leaders;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_partition_reassignments;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
mod produce;
mod sasl;
mod sync_group;
mod user_scram_credentials;

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::Decodable;

pub use crate::blocking::blocking;
use crate::frame::HeaderStart;
pub use crate::replica_manager::error_code;
use crate::response::Response;
use crate::server::Shared;

/// The APIs served, with their version ranges.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, produce::VERSIONS.0, produce::VERSIONS.1),
    (ApiKey::Fetch, fetch::VERSIONS.0, fetch::VERSIONS.1),
    (ApiKey::ListOffsets, list_offsets::VERSIONS.0, list_offsets::VERSIONS.1),
    (ApiKey::Metadata, metadata::VERSIONS.0, metadata::VERSIONS.1),
    (ApiKey::ApiVersions, api_versions::VERSIONS.0, api_versions::VERSIONS.1),
    (ApiKey::InitProducerId, init_producer_id::VERSIONS.0, init_producer_id::VERSIONS.1),
    (ApiKey::CreateTopics, create_topics::VERSIONS.0, create_topics::VERSIONS.1),
    (ApiKey::DeleteTopics, delete_topics::VERSIONS.0, delete_topics::VERSIONS.1),
    (ApiKey::CreatePartitions, create_partitions::VERSIONS.0, create_partitions::VERSIONS.1),
    (ApiKey::DescribeConfigs, describe_configs::VERSIONS.0, describe_configs::VERSIONS.1),
    (ApiKey::AlterConfigs, alter_configs::VERSIONS.0, alter_configs::VERSIONS.1),
    (
        ApiKey::IncrementalAlterConfigs,
        incremental_alter_configs::VERSIONS.0,
        incremental_alter_configs::VERSIONS.1,
    ),
    (ApiKey::DeleteRecords, delete_records::VERSIONS.0, delete_records::VERSIONS.1),
    (ApiKey::DescribeCluster, describe_cluster::VERSIONS.0, describe_cluster::VERSIONS.1),
    (ApiKey::DescribeLogDirs, describe_log_dirs::VERSIONS.0, describe_log_dirs::VERSIONS.1),
    (ApiKey::ElectLeaders, elect_leaders::VERSIONS.0, elect_leaders::VERSIONS.1),
    (
        ApiKey::AlterPartitionReassignments,
        alter_partition_reassignments::VERSIONS.0,
        alter_partition_reassignments::VERSIONS.1,
    ),
    (
        ApiKey::ListPartitionReassignments,
        list_partition_reassignments::VERSIONS.0,
        list_partition_reassignments::VERSIONS.1,
    ),
    (ApiKey::OffsetForLeaderEpoch, offset_for_leader_epoch::VERSIONS.0, offset_for_leader_epoch::VERSIONS.1),
    (ApiKey::FindCoordinator, find_coordinator::VERSIONS.0, find_coordinator::VERSIONS.1),
    (ApiKey::JoinGroup, join_group::VERSIONS.0, join_group::VERSIONS.1),
    (ApiKey::SyncGroup, sync_group::VERSIONS.0, sync_group::VERSIONS.1),
    (ApiKey::Heartbeat, heartbeat::VERSIONS.0, heartbeat::VERSIONS.1),
    (ApiKey::LeaveGroup, leave_group::VERSIONS.0, leave_group::VERSIONS.1),
    (ApiKey::OffsetCommit, offset_commit::VERSIONS.0, offset_commit::VERSIONS.1),
    (ApiKey::OffsetFetch, offset_fetch::VERSIONS.0, offset_fetch::VERSIONS.1),
    (ApiKey::ListGroups, list_groups::VERSIONS.0, list_groups::VERSIONS.1),
    (ApiKey::DescribeGroups, describe_groups::VERSIONS.0, describe_groups::VERSIONS.1),
    (ApiKey::DeleteGroups, delete_groups::VERSIONS.0, delete_groups::VERSIONS.1),
    (ApiKey::OffsetDelete, offset_delete::VERSIONS.0, offset_delete::VERSIONS.1),
    (ApiKey::DescribeAcls, acls::VERSIONS.0, acls::VERSIONS.1),
    (ApiKey::CreateAcls, acls::VERSIONS.0, acls::VERSIONS.1),
    (ApiKey::DeleteAcls, acls::VERSIONS.0, acls::VERSIONS.1),
    (ApiKey::SaslHandshake, sasl::HANDSHAKE_VERSIONS.0, sasl::HANDSHAKE_VERSIONS.1),
    (ApiKey::SaslAuthenticate, sasl::AUTHENTICATE_VERSIONS.0, sasl::AUTHENTICATE_VERSIONS.1),
    (
        ApiKey::DescribeUserScramCredentials,
        user_scram_credentials::DESCRIBE_VERSIONS.0,
        user_scram_credentials::DESCRIBE_VERSIONS.1,
    ),
    (
        ApiKey::AlterUserScramCredentials,
        user_scram_credentials::ALTER_VERSIONS.0,
        user_scram_credentials::ALTER_VERSIONS.1,
    ),
    (ApiKey::DescribeClientQuotas, client_quotas::VERSIONS.0, client_quotas::VERSIONS.1),
    (ApiKey::AlterClientQuotas, client_quotas::VERSIONS.0, client_quotas::VERSIONS.1),
];

pub fn supported(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED.iter().find(|(k, ..)| *k == key).map(|&(_, lo, hi)| (lo, hi))
}

/// What to do with a request.
pub enum Outcome {
    Respond {
        api: &'static str,
        response: Response,
    },
    /// acks=0 Produce: no response is sent.
    NoResponse {
        api: &'static str,
    },
    Close {
        api: &'static str,
        reason: String,
    },
}

impl Outcome {
    pub fn api(&self) -> &'static str {
        match self {
            Outcome::Respond { api, .. } | Outcome::NoResponse { api } | Outcome::Close { api, .. } => api,
        }
    }
}

/// A handler's answer: a message the protocol crate encodes, a response it
/// built itself (Fetch, with file slices), or none.
pub enum Reply {
    Message(Box<ResponseKind>),
    Built(Response),
    Nothing,
}

pub fn api_name(key: ApiKey) -> &'static str {
    match key {
        ApiKey::Produce => "Produce",
        ApiKey::Fetch => "Fetch",
        ApiKey::ListOffsets => "ListOffsets",
        ApiKey::Metadata => "Metadata",
        ApiKey::ApiVersions => "ApiVersions",
        ApiKey::InitProducerId => "InitProducerId",
        ApiKey::CreateTopics => "CreateTopics",
        ApiKey::DeleteTopics => "DeleteTopics",
        ApiKey::CreatePartitions => "CreatePartitions",
        ApiKey::DescribeConfigs => "DescribeConfigs",
        ApiKey::AlterConfigs => "AlterConfigs",
        ApiKey::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        ApiKey::DeleteRecords => "DeleteRecords",
        ApiKey::DescribeCluster => "DescribeCluster",
        ApiKey::DescribeLogDirs => "DescribeLogDirs",
        ApiKey::ElectLeaders => "ElectLeaders",
        ApiKey::AlterPartitionReassignments => "AlterPartitionReassignments",
        ApiKey::ListPartitionReassignments => "ListPartitionReassignments",
        ApiKey::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        ApiKey::FindCoordinator => "FindCoordinator",
        ApiKey::JoinGroup => "JoinGroup",
        ApiKey::SyncGroup => "SyncGroup",
        ApiKey::Heartbeat => "Heartbeat",
        ApiKey::LeaveGroup => "LeaveGroup",
        ApiKey::OffsetCommit => "OffsetCommit",
        ApiKey::OffsetFetch => "OffsetFetch",
        ApiKey::ListGroups => "ListGroups",
        ApiKey::DescribeGroups => "DescribeGroups",
        ApiKey::DeleteGroups => "DeleteGroups",
        ApiKey::OffsetDelete => "OffsetDelete",
        ApiKey::DescribeAcls => "DescribeAcls",
        ApiKey::CreateAcls => "CreateAcls",
        ApiKey::DeleteAcls => "DeleteAcls",
        ApiKey::SaslHandshake => "SaslHandshake",
        ApiKey::SaslAuthenticate => "SaslAuthenticate",
        ApiKey::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        ApiKey::AlterUserScramCredentials => "AlterUserScramCredentials",
        ApiKey::DescribeClientQuotas => "DescribeClientQuotas",
        ApiKey::AlterClientQuotas => "AlterClientQuotas",
        _ => "Other",
    }
}

/// Decodes and serves one request frame.
pub async fn handle(shared: &Arc<Shared>, frame: Bytes) -> Outcome {
    let Some(start) = HeaderStart::peek(&frame) else {
        return Outcome::Close { api: "Unknown", reason: "request shorter than its header".into() };
    };
    if start.api_key == crate::replication::shutdown::wire::API_KEY {
        return controlled_shutdown::handle(shared, frame, start.api_version).await;
    }
    if let Some(api) = crate::replication::controller_requests::api(start.api_key) {
        return controller_requests::handle(shared, api, frame, start.api_version).await;
    }
    let Ok(key) = ApiKey::try_from(start.api_key) else {
        return Outcome::Close { api: "Unknown", reason: format!("unknown API key {}", start.api_key) };
    };
    let api = api_name(key);
    let version = start.api_version;
    let Some((lo, hi)) = supported(key) else {
        return Outcome::Close {
            api,
            reason: format!("API {api} (key {}) is not served by this broker", start.api_key),
        };
    };
    if !(lo..=hi).contains(&version) {
        if key == ApiKey::ApiVersions {
            return respond(api, api_versions::unsupported(start.correlation_id));
        }
        return Outcome::Close {
            api,
            reason: format!("{api} version {version} is not served (this broker serves {lo} to {hi})"),
        };
    }
    let size = frame.len();
    let mut body = frame;
    let header = match RequestHeader::decode(&mut body, key.request_header_version(version)) {
        Ok(h) => h,
        Err(e) => {
            return Outcome::Close { api, reason: format!("malformed {api} v{version} request header: {e}") }
        }
    };
    let request = match RequestKind::decode(key, &mut body, version) {
        Ok(r) => r,
        Err(e) => return Outcome::Close { api, reason: format!("malformed {api} v{version} request: {e}") },
    };
    if let Some(refused) = authorize::refusal(shared, &request) {
        return encoded(api, key, version, header.correlation_id, &refused);
    }
    let quotas = shared.quota_configs();
    let reply = if quotas.is_empty() {
        dispatch(shared, request, &header, version).await
    } else {
        // Followers' fetches are the cluster's own work, not a client's.
        let exempt = matches!(&request, RequestKind::Fetch(f) if f.replica_id.0 >= 0);
        let client_id: Arc<str> = Arc::from(header.client_id.as_deref().unwrap_or(""));
        let work =
            client_quotas::REQUEST_CLIENT_ID.scope(client_id, dispatch(shared, request, &header, version));
        let (reply, busy) = timed(work).await;
        if !exempt {
            client_quotas::record(shared, &quotas, key, &header, size, busy);
        }
        reply
    };
    let Some(reply) = reply else {
        return Outcome::Close { api, reason: format!("{api} is not served by this broker") };
    };
    let throttle_ms = crate::connection::throttled().as_millis().min(i32::MAX as u128) as i32;
    match reply {
        Reply::Nothing => Outcome::NoResponse { api },
        Reply::Built(mut response) => {
            if throttle_ms > 0 && key == ApiKey::Fetch {
                fetch::set_throttle(&mut response, throttle_ms);
            }
            Outcome::Respond { api, response }
        }
        Reply::Message(mut message) => {
            authorize::filter(shared, &mut message);
            if throttle_ms > 0 {
                client_quotas::set_throttle_time(&mut message, throttle_ms);
            }
            encoded(api, key, version, header.correlation_id, &message)
        }
    }
}

/// Runs `work`, and answers with how long it took of a thread's time: the
/// time spent in its polls (blocking store work included, as it runs in
/// place), not the time it waited.
async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, std::time::Duration) {
    let mut work = std::pin::pin!(work);
    let mut busy = std::time::Duration::ZERO;
    let out = std::future::poll_fn(|cx| {
        let started = std::time::Instant::now();
        let polled = work.as_mut().poll(cx);
        busy += started.elapsed();
        polled
    })
    .await;
    (out, busy)
}

/// The handler's reply; `None` for an API no handler serves.
async fn dispatch(
    shared: &Arc<Shared>,
    request: RequestKind,
    header: &RequestHeader,
    version: i16,
) -> Option<Reply> {
    Some(match request {
        RequestKind::ApiVersions(r) => api_versions::handle(r),
        RequestKind::Metadata(r) => metadata::handle(shared, r, version).await,
        RequestKind::Produce(r) => produce::handle(shared, r, version).await,
        RequestKind::Fetch(r) => fetch::handle(shared, r, header, version).await,
        RequestKind::ListOffsets(r) => list_offsets::handle(shared, r, version).await,
        RequestKind::InitProducerId(r) => init_producer_id::handle(shared, r).await,
        RequestKind::CreateTopics(r) => create_topics::handle(shared, r, version).await,
        RequestKind::DeleteTopics(r) => delete_topics::handle(shared, r, version).await,
        RequestKind::CreatePartitions(r) => create_partitions::handle(shared, r, version).await,
        RequestKind::DescribeConfigs(r) => describe_configs::handle(shared, r, version).await,
        RequestKind::AlterConfigs(r) => alter_configs::handle(shared, r, version).await,
        RequestKind::IncrementalAlterConfigs(r) => {
            incremental_alter_configs::handle(shared, r, version).await
        }
        RequestKind::DeleteRecords(r) => delete_records::handle(shared, r, version).await,
        RequestKind::DescribeCluster(r) => describe_cluster::handle(shared, r, version).await,
        RequestKind::DescribeLogDirs(r) => describe_log_dirs::handle(shared, r).await,
        RequestKind::ElectLeaders(r) => elect_leaders::handle(shared, r, version).await,
        RequestKind::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle(shared, r, version).await
        }
        RequestKind::ListPartitionReassignments(r) => list_partition_reassignments::handle(shared, r).await,
        RequestKind::OffsetForLeaderEpoch(r) => offset_for_leader_epoch::handle(shared, r, version).await,
        RequestKind::FindCoordinator(r) => find_coordinator::handle(shared, r, version).await,
        RequestKind::JoinGroup(r) => join_group::handle(shared, r, header, version).await,
        RequestKind::SyncGroup(r) => sync_group::handle(shared, r).await,
        RequestKind::Heartbeat(r) => heartbeat::handle(shared, r).await,
        RequestKind::LeaveGroup(r) => leave_group::handle(shared, r, version).await,
        RequestKind::OffsetCommit(r) => offset_commit::handle(shared, r).await,
        RequestKind::OffsetFetch(r) => offset_fetch::handle(shared, r, version).await,
        RequestKind::ListGroups(r) => list_groups::handle(shared, r).await,
        RequestKind::DescribeGroups(r) => describe_groups::handle(shared, r, version).await,
        RequestKind::DeleteGroups(r) => delete_groups::handle(shared, r).await,
        RequestKind::OffsetDelete(r) => offset_delete::handle(shared, r).await,
        RequestKind::DescribeAcls(r) => acls::describe(shared, r),
        RequestKind::CreateAcls(r) => acls::create(shared, r).await,
        RequestKind::DeleteAcls(r) => acls::delete(shared, r).await,
        RequestKind::SaslHandshake(_) => sasl::handshake(),
        RequestKind::SaslAuthenticate(_) => sasl::authenticate(),
        RequestKind::DescribeUserScramCredentials(r) => user_scram_credentials::describe(shared, r),
        RequestKind::AlterUserScramCredentials(r) => user_scram_credentials::alter(shared, r).await,
        RequestKind::DescribeClientQuotas(r) => client_quotas::describe(shared, r),
        RequestKind::AlterClientQuotas(r) => client_quotas::alter(shared, r).await,
        _ => return None,
    })
}

fn encoded(
    api: &'static str,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    message: &ResponseKind,
) -> Outcome {
    let mut buf = bytes::BytesMut::new();
    let encoded =
        crate::response::encode_header(&mut buf, correlation_id, key.response_header_version(version))
            .and_then(|_| message.encode(&mut buf, version));
    match encoded {
        Ok(()) => Outcome::Respond { api, response: Response::bytes(buf.freeze()) },
        Err(e) => Outcome::Close { api, reason: format!("encoding the {api} v{version} response: {e}") },
    }
}

fn respond(api: &'static str, r: anyhow::Result<Response>) -> Outcome {
    match r {
        Ok(response) => Outcome::Respond { api, response },
        Err(e) => Outcome::Close { api, reason: format!("encoding the response: {e}") },
    }
}

/// A per-topic answer of an admin request: done, or Kafka's code and a message.
pub type TopicOutcome = Result<(), (i16, String)>;

/// Runs `act` for each topic of an admin request, in order; a name given more
/// than once is refused for every copy (INVALID_REQUEST, as Kafka does) and
/// not acted on.
pub fn each_topic<T>(
    topics: &[T],
    name: impl Fn(&T) -> &str,
    mut act: impl FnMut(&T) -> TopicOutcome,
) -> Vec<TopicOutcome> {
    let mut count: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for t in topics {
        *count.entry(name(t)).or_default() += 1;
    }
    topics
        .iter()
        .map(|t| {
            if count[name(t)] > 1 {
                Err((
                    kafka_protocol::ResponseError::InvalidRequest.code(),
                    "Duplicate topic name.".to_string(),
                ))
            } else {
                act(t)
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "handle_test.rs"]
mod tests;
