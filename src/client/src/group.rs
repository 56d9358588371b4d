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
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
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

use crate::cluster::Cluster;
use crate::connection::Connection;
use crate::consumer_protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use crate::errors::{self, About};

/// The protocol type of consumer groups (Kafka's `ConsumerProtocol.PROTOCOL_TYPE`).
pub const PROTOCOL_TYPE: &str = "consumer";
/// The assignors this member implements, in Kafka's names.
pub const ASSIGNORS: &[&str] = &["range", "roundrobin"];

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

/// A committed offset as OffsetFetch answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub metadata: String,
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
    pub fn committed(&self, partitions: Option<&[(String, i32)]>) -> Result<Vec<CommittedOffset>> {
        self.shared.check_open()?;
        let topics = partitions.map(|ps| {
            let mut topics: Vec<OffsetFetchRequestTopic> = Vec::new();
            for (topic, partition) in ps {
                match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
                    Some(t) => t.partition_indexes.push(*partition),
                    None => topics.push(
                        OffsetFetchRequestTopic::default()
                            .with_name(TopicName(str_bytes(topic)))
                            .with_partition_indexes(vec![*partition]),
                    ),
                }
            }
            topics
        });
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
        let mut out = Vec::new();
        for t in &answer.topics {
            for p in &t.partitions {
                if p.error_code != errors::NONE {
                    return Err(errors::from_code(
                        p.error_code,
                        About {
                            api: "OffsetFetch",
                            topic: t.name.0.as_str(),
                            partition: p.partition_index,
                            message: None,
                        },
                    ));
                }
                if p.committed_offset >= 0 {
                    out.push(CommittedOffset {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        metadata: p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
                    });
                }
            }
        }
        Ok(out)
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

impl Shared {
    fn check_open(&self) -> Result<()> {
        if let Some(why) = self.fatal.lock().clone() {
            return Err(Error::Kafka { code: FENCED_INSTANCE_ID, message: why });
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "the member of group {:?} has left or was closed",
                self.config.group_id
            )));
        }
        Ok(())
    }

    /// Runs `f` on a connection to the group's coordinator; `f` answers its
    /// result and the answer's error code. A coordinator that moved or cannot
    /// be reached is looked up again, after a backoff, a bounded number of times.
    fn coordinated<T>(&self, mut f: impl FnMut(&mut Connection) -> Result<(T, i16)>) -> Result<T> {
        let group = &self.config.group_id;
        let retries = self.cluster.config().retries;
        let mut attempt = 0;
        loop {
            let node = self.cluster.coordinator(0, group);
            let out = node.and_then(|node| {
                self.cluster.with_connection(node, &mut f).inspect_err(|e| {
                    if errors::is_connection_error(e) {
                        self.cluster.disconnect(node);
                    }
                })
            });
            let retry = match &out {
                Ok((_, code)) if is_coordinator_error(*code) => {
                    Some(code_error("FindCoordinator", *code, group))
                }
                Ok(_) => None,
                Err(e) if errors::is_connection_error(e) || errors::is_retriable_error(e) => {
                    Some(e.duplicate())
                }
                Err(_) => None,
            };
            match retry {
                None => return out.map(|(t, _)| t),
                Some(e) => {
                    self.cluster.forget_coordinator(0, group);
                    if attempt >= retries || self.closed.load(Ordering::Acquire) && attempt > 0 {
                        return Err(e);
                    }
                    std::thread::sleep(self.cluster.config().backoff(attempt));
                    attempt += 1;
                }
            }
        }
    }

    /// A code saying the group moved on without this member's knowing:
    /// rejoin (forgetting the member id if the coordinator did).
    fn moved_on(&self, code: i16, generation: i32) {
        if !matches!(code, ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID | REBALANCE_IN_PROGRESS) {
            return;
        }
        let mut s = self.state.lock();
        if s.generation != generation {
            return; // answered about a generation already left behind
        }
        if code == UNKNOWN_MEMBER_ID {
            s.member_id.clear();
            s.generation = -1;
        }
        self.rejoin.store(true, Ordering::Release);
    }

    fn heartbeat_loop(self: Arc<Self>) {
        let interval = Duration::from_millis(self.config.heartbeat_interval_ms as u64);
        let session = Duration::from_millis(self.config.session_timeout_ms as u64);
        let mut last_ok = Instant::now();
        loop {
            {
                let mut g = self.wake_lock.lock();
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                self.wake.wait_for(&mut g, interval);
            }
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            if self.joining.load(Ordering::Acquire) {
                last_ok = Instant::now();
                continue;
            }
            let (generation, member_id) = {
                let s = self.state.lock();
                (s.generation, s.member_id.clone())
            };
            if generation < 0 || member_id.is_empty() {
                last_ok = Instant::now();
                continue;
            }
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(str_bytes(&self.config.group_id)))
                .with_generation_id(generation)
                .with_member_id(str_bytes(&member_id))
                .with_group_instance_id(self.config.instance_id.as_deref().map(str_bytes));
            // One attempt per beat: the next beat is the retry.
            let answer = self.cluster.coordinator(0, &self.config.group_id).and_then(|node| {
                self.cluster.with_connection(node, |c| c.send(&request)).inspect_err(|e| {
                    if errors::is_connection_error(e) {
                        self.cluster.disconnect(node);
                    }
                })
            });
            match answer.map(|a| a.error_code) {
                Ok(errors::NONE) => last_ok = Instant::now(),
                Ok(REBALANCE_IN_PROGRESS) => {
                    // Still a member: the session goes on while it rejoins.
                    last_ok = Instant::now();
                    self.moved_on(REBALANCE_IN_PROGRESS, generation);
                }
                Ok(code @ (ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID)) => self.moved_on(code, generation),
                Ok(FENCED_INSTANCE_ID) => {
                    *self.fatal.lock() = Some(format!(
                        "FENCED_INSTANCE_ID: another member of group {:?} took group.instance.id {:?}",
                        self.config.group_id,
                        self.config.instance_id.as_deref().unwrap_or("")
                    ));
                    return;
                }
                Ok(code) if is_coordinator_error(code) => {
                    self.cluster.forget_coordinator(0, &self.config.group_id);
                }
                Ok(_) | Err(_) => {
                    self.cluster.forget_coordinator(0, &self.config.group_id);
                }
            }
            if last_ok.elapsed() >= session {
                // The coordinator has surely dropped this member by now.
                let mut s = self.state.lock();
                if s.generation == generation {
                    s.generation = -1;
                    if self.config.instance_id.is_none() {
                        s.member_id.clear();
                    }
                    self.rejoin.store(true, Ordering::Release);
                }
                last_ok = Instant::now();
            }
        }
    }

    /// JoinGroup and SyncGroup until a generation's assignment arrives.
    fn rejoin_group(&self) -> Result<()> {
        struct Joining<'a>(&'a AtomicBool);
        impl Drop for Joining<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        self.joining.store(true, Ordering::Release);
        let _joining = Joining(&self.joining);
        let config = &self.config;
        let group = &config.group_id;
        // JoinGroup and SyncGroup may wait for the other members up to the
        // rebalance timeout (and an empty group's initial delay).
        let wait = Duration::from_millis(config.rebalance_timeout_ms as u64) + Duration::from_secs(5);
        let deadline = Instant::now() + wait * 2;
        loop {
            self.check_open()?;
            if Instant::now() > deadline {
                return Err(Error::Timeout(
                    (wait * 2).as_millis() as u64,
                    format!("joining group {group:?}: no assignment within twice the rebalance timeout"),
                ));
            }
            // Cleared before the round: a rebalance noticed during it flags again.
            self.rejoin.store(false, Ordering::Release);
            let (member_id, topics) = {
                let s = self.state.lock();
                (s.member_id.clone(), s.topics.clone())
            };
            let metadata = encode_subscription(&topics)?;
            let protocols: Vec<JoinGroupRequestProtocol> = config
                .assignors
                .iter()
                .map(|a| {
                    JoinGroupRequestProtocol::default()
                        .with_name(str_bytes(a))
                        .with_metadata(metadata.clone())
                })
                .collect();
            let joined = self.coordinated(|c| {
                let version = c.version(ApiKey::JoinGroup)?;
                if config.instance_id.is_some() && version < 5 {
                    return Err(Error::Kafka {
                        code: errors::UNSUPPORTED_VERSION,
                        message: format!(
                            "static membership (group.instance.id) needs JoinGroup v5; the broker at {} speaks v{version}",
                            c.addr()
                        ),
                    });
                }
                let request = JoinGroupRequest::default()
                    .with_group_id(GroupId(str_bytes(group)))
                    .with_session_timeout_ms(config.session_timeout_ms)
                    .with_rebalance_timeout_ms(config.rebalance_timeout_ms)
                    .with_member_id(str_bytes(&member_id))
                    .with_group_instance_id(config.instance_id.as_deref().map(str_bytes))
                    .with_protocol_type(str_bytes(PROTOCOL_TYPE))
                    .with_protocols(protocols.clone());
                let answer = c.send_at(&request, version, wait)?;
                let code = answer.error_code;
                Ok((answer, code))
            })?;
            match joined.error_code {
                errors::NONE => {}
                MEMBER_ID_REQUIRED => {
                    // KIP-394: join again at once with the id handed out.
                    self.state.lock().member_id = joined.member_id.to_string();
                    self.rejoin.store(true, Ordering::Release);
                    continue;
                }
                UNKNOWN_MEMBER_ID => {
                    let mut s = self.state.lock();
                    s.member_id.clear();
                    s.generation = -1;
                    continue;
                }
                ILLEGAL_GENERATION | REBALANCE_IN_PROGRESS => continue,
                FENCED_INSTANCE_ID => {
                    let why = format!(
                        "FENCED_INSTANCE_ID from JoinGroup: another member of group {group:?} has group.instance.id {:?}",
                        config.instance_id.as_deref().unwrap_or("")
                    );
                    *self.fatal.lock() = Some(why.clone());
                    return Err(Error::Kafka { code: FENCED_INSTANCE_ID, message: why });
                }
                code => return Err(code_error("JoinGroup", code, group)),
            }
            let member_id = joined.member_id.to_string();
            let generation = joined.generation_id;
            let protocol = joined.protocol_name.as_ref().map(|p| p.to_string());
            let leader = joined.leader.to_string();
            {
                let mut s = self.state.lock();
                s.member_id.clone_from(&member_id);
                s.leader.clone_from(&leader);
                s.protocol.clone_from(&protocol);
            }
            let assignments = if leader == member_id && !joined.members.is_empty() {
                let assignor = protocol.as_deref().unwrap_or("range");
                let members = joined
                    .members
                    .iter()
                    .map(|m| {
                        Ok(Subscriber {
                            member_id: m.member_id.to_string(),
                            instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                            topics: decode_subscription(&m.metadata)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let wanted: BTreeSet<String> =
                    members.iter().flat_map(|m| m.topics.iter().cloned()).collect();
                let wanted: Vec<String> = wanted.into_iter().collect();
                let metadata = self.cluster.refresh(Some(&wanted), false)?;
                let counts: BTreeMap<String, i32> = metadata
                    .topics
                    .values()
                    .filter(|t| t.error_code == errors::NONE)
                    .map(|t| (t.name.clone(), t.partitions.len() as i32))
                    .collect();
                let plan = assign(assignor, &members, &counts)?;
                plan.into_iter()
                    .map(|(m, parts)| {
                        Ok(SyncGroupRequestAssignment::default()
                            .with_member_id(str_bytes(&m))
                            .with_assignment(encode_assignment(&parts)?))
                    })
                    .collect::<Result<Vec<_>>>()?
            } else {
                Vec::new()
            };
            let request = SyncGroupRequest::default()
                .with_group_id(GroupId(str_bytes(group)))
                .with_generation_id(generation)
                .with_member_id(str_bytes(&member_id))
                .with_group_instance_id(config.instance_id.as_deref().map(str_bytes))
                .with_protocol_type(Some(str_bytes(PROTOCOL_TYPE)))
                .with_protocol_name(protocol.as_deref().map(str_bytes))
                .with_assignments(assignments);
            let synced = self.coordinated(|c| {
                let version = c.version(ApiKey::SyncGroup)?;
                let answer = c.send_at(&request, version, wait)?;
                let code = answer.error_code;
                Ok((answer, code))
            })?;
            match synced.error_code {
                errors::NONE => {}
                UNKNOWN_MEMBER_ID => {
                    let mut s = self.state.lock();
                    s.member_id.clear();
                    s.generation = -1;
                    continue;
                }
                ILLEGAL_GENERATION | REBALANCE_IN_PROGRESS => continue,
                code => return Err(code_error("SyncGroup", code, group)),
            }
            let partitions = decode_assignment(&synced.assignment)?;
            let mut s = self.state.lock();
            s.generation = generation;
            s.assignment = partitions;
            return Ok(());
        }
    }
}

/// A member as the leader sees it in JoinGroup's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscriber {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub topics: Vec<String>,
}

impl Subscriber {
    /// Kafka's `MemberInfo` order: static members first, by instance id,
    /// then dynamic ones by member id.
    fn order_key(&self) -> (bool, &str) {
        match &self.instance_id {
            Some(i) => (false, i.as_str()),
            None => (true, self.member_id.as_str()),
        }
    }
}

/// Kafka's client-side assignors: member id -> its partitions (sorted), for
/// every member (an empty list for one that gets none). Topics missing from
/// `partition_counts` (unknown to the metadata) are assigned to nobody.
pub fn assign(
    assignor: &str,
    members: &[Subscriber],
    partition_counts: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, Vec<(String, i32)>>> {
    let mut sorted: Vec<&Subscriber> = members.iter().collect();
    sorted.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    let mut out: BTreeMap<String, Vec<(String, i32)>> =
        members.iter().map(|m| (m.member_id.clone(), Vec::new())).collect();
    match assignor {
        // RangeAssignor: per topic, its subscribers in order get consecutive
        // ranges, the first `count % subscribers` one partition more.
        "range" => {
            for (topic, &count) in partition_counts {
                let subs: Vec<&&Subscriber> = sorted.iter().filter(|m| m.topics.contains(topic)).collect();
                if subs.is_empty() {
                    continue;
                }
                let n = subs.len() as i32;
                let (per, extra) = (count / n, count % n);
                for (i, m) in subs.iter().enumerate() {
                    let i = i as i32;
                    let start = per * i + i.min(extra);
                    let len = per + i32::from(i < extra);
                    let list = out.entry(m.member_id.clone()).or_default();
                    list.extend((start..start + len).map(|p| (topic.clone(), p)));
                }
            }
        }
        // RoundRobinAssignor: every subscribed partition in (topic, partition)
        // order goes to the next member in a circle that subscribes to its topic.
        "roundrobin" => {
            if !sorted.is_empty() {
                let mut next = 0usize;
                for (topic, &count) in partition_counts {
                    if !sorted.iter().any(|m| m.topics.contains(topic)) {
                        continue;
                    }
                    for p in 0..count {
                        while !sorted[next % sorted.len()].topics.contains(topic) {
                            next += 1;
                        }
                        let m = sorted[next % sorted.len()];
                        next += 1;
                        out.entry(m.member_id.clone()).or_default().push((topic.clone(), p));
                    }
                }
            }
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "the group chose assignor {other:?}, which this member does not implement ({ASSIGNORS:?})"
            )))
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    Ok(out)
}

#[cfg(test)]
#[path = "group_test.rs"]
mod tests;
