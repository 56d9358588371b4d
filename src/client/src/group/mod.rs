//! A consumer group's member over the wire: Kafka's classic consumer protocol
//! as Java's and librdkafka's consumers speak it. FindCoordinator, JoinGroup
//! (KIP-394's member-id round trip, static membership), the leader's
//! client-side assignment ("range" and "roundrobin", Kafka's algorithms, over
//! ConsumerProtocolSubscription/Assignment), SyncGroup, a heartbeat thread
//! that flags a rejoin, LeaveGroup, OffsetCommit and OffsetFetch.
//!
//! The rejoin itself happens in the caller's thread (`poll_assignment`), as
//! in Kafka's consumers: a member that stops polling drops out of the group
//! after its rebalance timeout, one that stops heart-beating after its session.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::{Condvar, Mutex};
use seglog_core::error::kafka_codes::{
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, ILLEGAL_GENERATION,
    MEMBER_ID_REQUIRED, NOT_COORDINATOR, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};
use seglog_core::error::{Error, Result};

use crate::admin::{committed_offsets, offset_fetch_topics, GroupOffsets};
use crate::assignor::{assign, Subscriber, ASSIGNORS};
use crate::cluster::Cluster;
use crate::connection::Connection;
use crate::consumer_protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use crate::errors::{self, About};

/// The protocol type of consumer groups (Kafka's `ConsumerProtocol.PROTOCOL_TYPE`).
pub const PROTOCOL_TYPE: &str = "consumer";

/// A member's settings, in Kafka's consumer keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberConfig {
    /// `group.id`.
    pub group_id: String,
    /// The subscribed topics.
    pub topics: Vec<String>,
    /// `group.instance.id`: static membership (JoinGroup v5+).
    pub instance_id: Option<String>,
    /// `session.timeout.ms`: heartbeats missed this long drop the member.
    pub session_timeout_ms: i32,
    /// `max.poll.interval.ms`: how long a rebalance waits for the member to rejoin.
    pub rebalance_timeout_ms: i32,
    /// `heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `partition.assignment.strategy`: assignor names, most preferred first.
    pub assignors: Vec<String>,
}

impl Default for MemberConfig {
    fn default() -> Self {
        MemberConfig {
            group_id: String::new(),
            topics: Vec::new(),
            instance_id: None,
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 300_000,
            heartbeat_interval_ms: 3_000,
            assignors: ASSIGNORS.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// What `poll_assignment` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub generation: i32,
    /// Sorted by topic, then partition.
    pub partitions: Vec<(String, i32)>,
    /// Whether the partitions differ from those the previous call answered
    /// (the first call: whether there are any).
    pub changed: bool,
}

#[derive(Debug, Default)]
struct State {
    member_id: String,
    /// -1 until the first completed join.
    generation: i32,
    leader: String,
    protocol: Option<String>,
    assignment: Vec<(String, i32)>,
    /// What `poll_assignment` last answered.
    answered: Option<Vec<(String, i32)>>,
    topics: Vec<String>,
}

struct Shared {
    cluster: Arc<Cluster>,
    config: MemberConfig,
    state: Mutex<State>,
    /// Set by the heartbeat thread (or a commit) when the group rebalances or
    /// forgot this member; `poll_assignment` rejoins.
    rejoin: AtomicBool,
    /// A JoinGroup/SyncGroup round is under way: no heartbeats meanwhile.
    joining: AtomicBool,
    /// Only one thread joins at a time.
    join_lock: Mutex<()>,
    closed: AtomicBool,
    /// Wakes the heartbeat thread early (close).
    wake: Condvar,
    wake_lock: Mutex<()>,
    /// Why the member can no longer take part (FENCED_INSTANCE_ID).
    fatal: Mutex<Option<String>>,
}

/// One member of a consumer group. Shareable between threads; a heartbeat
/// thread runs until `leave`, `close` or drop.
pub struct GroupMember {
    shared: Arc<Shared>,
    heartbeat: Mutex<Option<JoinHandle<()>>>,
}

fn code_error(api: &str, code: i16, group: &str) -> Error {
    errors::from_code(
        code,
        About { api, topic: "", partition: -1, message: Some(&format!("group {group:?}")) },
    )
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl GroupMember {
    /// A member of `config.group_id` that has not joined yet: the first
    /// `poll_assignment` joins. Finds the coordinator now, so a wrong address
    /// or a broker without groups fails here.
    pub fn new(cluster: Arc<Cluster>, config: MemberConfig) -> Result<GroupMember> {
        if config.group_id.is_empty() {
            return Err(Error::InvalidArgument("group_id: expected a non-empty group id".into()));
        }
        if config.session_timeout_ms <= 0
            || config.rebalance_timeout_ms <= 0
            || config.heartbeat_interval_ms <= 0
        {
            return Err(Error::InvalidArgument(format!(
                "session_timeout_ms, rebalance_timeout_ms and heartbeat_interval_ms must be positive, got \
                 {}, {} and {}",
                config.session_timeout_ms, config.rebalance_timeout_ms, config.heartbeat_interval_ms
            )));
        }
        if config.heartbeat_interval_ms >= config.session_timeout_ms {
            return Err(Error::InvalidArgument(format!(
                "heartbeat_interval_ms ({}) must be lower than session_timeout_ms ({})",
                config.heartbeat_interval_ms, config.session_timeout_ms
            )));
        }
        if config.assignors.is_empty() {
            return Err(Error::InvalidArgument(format!("assignors: expected one or more of {ASSIGNORS:?}")));
        }
        for a in &config.assignors {
            if !ASSIGNORS.contains(&a.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "assignor {a:?} is not implemented: expected one of {ASSIGNORS:?}"
                )));
            }
        }
        if config.instance_id.as_deref() == Some("") {
            return Err(Error::InvalidArgument("instance_id: expected a non-empty group.instance.id".into()));
        }
        cluster.coordinator(0, &config.group_id)?;
        let mut topics = config.topics.clone();
        topics.sort();
        topics.dedup();
        let shared = Arc::new(Shared {
            cluster,
            state: Mutex::new(State { generation: -1, topics, ..State::default() }),
            config,
            rejoin: AtomicBool::new(true),
            joining: AtomicBool::new(false),
            join_lock: Mutex::new(()),
            closed: AtomicBool::new(false),
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
            fatal: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("seglog-heartbeat-{}", shared.config.group_id))
            .spawn(move || s.heartbeat_loop())
            .map_err(Error::Io)?;
        Ok(GroupMember { shared, heartbeat: Mutex::new(Some(thread)) })
    }

    /// A member that has joined the group (blocks until the group's rebalance
    /// completes, up to the rebalance timeout).
    pub fn join(cluster: Arc<Cluster>, config: MemberConfig) -> Result<GroupMember> {
        let member = GroupMember::new(cluster, config)?;
        member.poll_assignment()?;
        Ok(member)
    }

    pub fn config(&self) -> &MemberConfig {
        &self.shared.config
    }

    /// The member id the coordinator gave ("" before the first join).
    pub fn member_id(&self) -> String {
        self.shared.state.lock().member_id.clone()
    }

    /// The generation joined last (-1 before the first join).
    pub fn generation(&self) -> i32 {
        self.shared.state.lock().generation
    }

    /// Whether the group's leader is this member.
    pub fn is_leader(&self) -> bool {
        let s = self.shared.state.lock();
        !s.member_id.is_empty() && s.leader == s.member_id
    }

    /// The assignor the group chose (None before the first join).
    pub fn protocol(&self) -> Option<String> {
        self.shared.state.lock().protocol.clone()
    }

    /// Whether the next `poll_assignment` rejoins (a rebalance was noticed).
    pub fn needs_rejoin(&self) -> bool {
        self.shared.rejoin.load(Ordering::Acquire)
    }

    /// Changes the subscription; the next `poll_assignment` rejoins with it.
    pub fn subscribe(&self, topics: &[String]) {
        let mut topics = topics.to_vec();
        topics.sort();
        topics.dedup();
        let mut s = self.shared.state.lock();
        if s.topics != topics {
            s.topics = topics;
            self.shared.rejoin.store(true, Ordering::Release);
        }
    }

    /// The member's partitions: rejoins first when the group rebalances (or
    /// on the first call), else answers at once.
    pub fn poll_assignment(&self) -> Result<Assignment> {
        self.shared.check_open()?;
        if self.shared.rejoin.load(Ordering::Acquire) {
            let _one = self.shared.join_lock.lock();
            if self.shared.rejoin.load(Ordering::Acquire) {
                self.shared.rejoin_group()?;
            }
        }
        let mut s = self.shared.state.lock();
        let changed = match &s.answered {
            Some(before) => *before != s.assignment,
            None => !s.assignment.is_empty(),
        };
        s.answered = Some(s.assignment.clone());
        Ok(Assignment { generation: s.generation, partitions: s.assignment.clone(), changed })
    }

    /// Commits `(topic, partition, offset, metadata)` with the member's
    /// generation and id (generation -1 and no id before it joined: a group
    /// that only stores offsets). A commit the coordinator refuses because
    /// the group moved on (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
    /// REBALANCE_IN_PROGRESS) also flags a rejoin.
    pub fn commit(&self, offsets: &[(String, i32, i64, String)]) -> Result<()> {
        self.shared.check_open()?;
        if offsets.is_empty() {
            return Ok(());
        }
        let (generation, member_id) = {
            let s = self.shared.state.lock();
            (s.generation, s.member_id.clone())
        };
        let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
        for (topic, partition, offset, metadata) in offsets {
            let p = OffsetCommitRequestPartition::default()
                .with_partition_index(*partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(str_bytes(metadata)));
            match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                Some(t) => t.partitions.push(p),
                None => topics.push(
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(str_bytes(topic)))
                        .with_partitions(vec![p]),
                ),
            }
        }
        let config = &self.shared.config;
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(str_bytes(&config.group_id)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(str_bytes(&member_id))
            .with_group_instance_id(if generation >= 0 {
                config.instance_id.as_deref().map(str_bytes)
            } else {
                None
            })
            .with_retention_time_ms(-1)
            .with_topics(topics);
        let answer = self.shared.coordinated(|c| {
            let answer = c.send(&request)?;
            let code = answer
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter())
                .map(|p| p.error_code)
                .find(|&c| is_coordinator_error(c))
                .unwrap_or(errors::NONE);
            Ok((answer, code))
        })?;
        for t in &answer.topics {
            for p in &t.partitions {
                if p.error_code == errors::NONE {
                    continue;
                }
                self.shared.moved_on(p.error_code, generation);
                return Err(errors::from_code(
                    p.error_code,
                    About {
                        api: "OffsetCommit",
                        topic: t.name.0.as_str(),
                        partition: p.partition_index,
                        message: Some(&format!(
                            "group {:?} (generation {generation}, member {member_id:?})",
                            config.group_id
                        )),
                    },
                ));
            }
        }
        Ok(())
    }

    /// The group's committed offsets of `partitions` (all of the group's for
    /// None); partitions without one are left out.
    pub fn committed(&self, partitions: Option<&[(String, i32)]>) -> Result<GroupOffsets> {
        self.shared.check_open()?;
        let topics = partitions.map(offset_fetch_topics);
        let group = &self.shared.config.group_id;
        let request =
            OffsetFetchRequest::default().with_group_id(GroupId(str_bytes(group))).with_topics(topics);
        let answer = self.shared.coordinated(|c| {
            let version = c.version(ApiKey::OffsetFetch)?;
            if request.topics.is_none() && version < 2 {
                return Err(Error::Kafka {
                    code: errors::UNSUPPORTED_VERSION,
                    message: "OffsetFetch of all of a group's offsets needs v2 or later".into(),
                });
            }
            let answer = c.send_at(&request, version, Duration::ZERO)?;
            let code = if answer.error_code != errors::NONE {
                answer.error_code
            } else {
                answer
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .map(|p| p.error_code)
                    .find(|&c| is_coordinator_error(c))
                    .unwrap_or(errors::NONE)
            };
            Ok((answer, code))
        })?;
        if answer.error_code != errors::NONE {
            return Err(code_error("OffsetFetch", answer.error_code, group));
        }
        committed_offsets(&answer)
    }

    /// Sends LeaveGroup (the group rebalances at once instead of after the
    /// session timeout) and stops heart-beating.
    pub fn leave(&self) -> Result<()> {
        let (generation, member_id) = {
            let s = self.shared.state.lock();
            (s.generation, s.member_id.clone())
        };
        self.stop();
        if member_id.is_empty() || generation < 0 {
            return Ok(());
        }
        let config = &self.shared.config;
        let answer = self.shared.coordinated(|c| {
            let version = c.version(ApiKey::LeaveGroup)?;
            let mut request =
                LeaveGroupRequest::default().with_group_id(GroupId(str_bytes(&config.group_id)));
            if version >= 3 {
                request = request.with_members(vec![MemberIdentity::default()
                    .with_member_id(str_bytes(&member_id))
                    .with_group_instance_id(config.instance_id.as_deref().map(str_bytes))]);
            } else {
                request = request.with_member_id(str_bytes(&member_id));
            }
            let answer = c.send_at(&request, version, Duration::ZERO)?;
            Ok((answer.error_code, answer.error_code))
        });
        let mut s = self.shared.state.lock();
        s.generation = -1;
        s.member_id.clear();
        s.assignment.clear();
        drop(s);
        match answer? {
            errors::NONE | UNKNOWN_MEMBER_ID => Ok(()),
            code => Err(code_error("LeaveGroup", code, &config.group_id)),
        }
    }

    /// Stops heart-beating without leaving: the coordinator drops the member
    /// after its session timeout (a static member may come back before then
    /// and keep its partitions).
    pub fn close(&self) {
        self.stop();
    }

    fn stop(&self) {
        self.shared.closed.store(true, Ordering::Release);
        {
            let _g = self.shared.wake_lock.lock();
            self.shared.wake.notify_all();
        }
        if let Some(t) = self.heartbeat.lock().take() {
            let _ = t.join();
        }
    }
}

impl Drop for GroupMember {
    fn drop(&mut self) {
        // The thread ends at its next wake; no join here (a heartbeat in
        // flight may take a request timeout).
        self.shared.closed.store(true, Ordering::Release);
        let _g = self.shared.wake_lock.lock();
        self.shared.wake.notify_all();
    }
}

fn is_coordinator_error(code: i16) -> bool {
    matches!(code, NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS)
}

mod membership;

#[cfg(test)]
#[path = "group_test.rs"]
mod tests;
