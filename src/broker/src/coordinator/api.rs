//! The coordinator's requests and answers in plain Rust types (the network
//! handlers translate Kafka's messages to and from them), and its settings.

use bytes::Bytes;

use super::{GroupState, Protocol};
use crate::config::BrokerConfig;

/// The coordinator's settings, from the broker's keys.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    pub offsets_partitions: i32,
    /// How long a write waits for its partition's in-sync replicas (a cluster member's).
    pub commit_timeout_ms: u64,
    pub retention_ms: i64,
    pub retention_check_interval_ms: i64,
    pub metadata_max_bytes: usize,
}

impl GroupConfig {
    pub fn from_broker(c: &BrokerConfig) -> GroupConfig {
        GroupConfig {
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
            max_size: c.group_max_size,
            offsets_partitions: c.offsets_topic_num_partitions,
            commit_timeout_ms: c.offsets_commit_timeout_ms,
            retention_ms: c.offsets_retention_minutes.saturating_mul(60_000),
            retention_check_interval_ms: i64::try_from(c.offsets_retention_check_interval_ms)
                .unwrap_or(i64::MAX),
            metadata_max_bytes: c.offset_metadata_max_bytes,
        }
    }
}

/// A JoinGroup.
#[derive(Debug, Clone, Default)]
pub struct JoinGroup {
    pub group_id: String,
    /// Empty for a member joining for the first time.
    pub member_id: String,
    /// Static membership's `group.instance.id`.
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    /// KIP-394 (JoinGroup v4+, dynamic members): a first join gets
    /// MEMBER_ID_REQUIRED and its id, and must join again with it.
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinResponse {
    pub error: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member with its metadata for the chosen protocol: the leader's only.
    pub members: Vec<JoinedMember>,
}

impl JoinResponse {
    pub fn error(code: i16, member_id: &str) -> JoinResponse {
        JoinResponse {
            error: code,
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

/// A SyncGroup; only the leader's carries assignments.
#[derive(Debug, Clone, Default)]
pub struct SyncGroup {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncResponse {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// One partition's offset in an OffsetCommit.
#[derive(Debug, Clone, Default)]
pub struct PartitionCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// An OffsetCommit: generation -1 and an empty member id for a group that
/// only stores offsets (allowed while the group has no members).
#[derive(Debug, Clone, Default)]
pub struct OffsetCommit {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub offsets: Vec<PartitionCommit>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub error: i16,
    pub group_id: String,
    pub state: GroupState,
    pub protocol_type: String,
    /// The chosen protocol when Stable, else empty.
    pub protocol: String,
    pub generation_id: i32,
    pub members: Vec<MemberDescription>,
}
