//! Kafka's classic group coordinator: consumer groups that rebalance through
//! JoinGroup/SyncGroup with client-side assignors (the broker relays their
//! metadata and assignments as opaque bytes), heartbeats and session
//! timeouts, static membership, and committed offsets in `__consumer_offsets`
//! (shared with the embedded consumer of the same store).
//!
//! Layout: `group` (a group's state and record), `member`, `rebalance` (the
//! protocol's state machine, in memory, on a caller-given clock), `offsets`
//! (who may commit; retention), `storage` (loading and writing the log);
//! Kafka's codes are the core's one table. This file holds the public API: requests in
//! plain Rust types, answered with Kafka's error codes, so the network
//! handlers and (later) the embedded consumer use the same coordinator.

mod group;
mod member;
mod offsets;
mod rebalance;
mod storage;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use seglog_core::clock::now_ms;
use seglog_core::error::{Error, Result};
use seglog_core::group::{CoordinatorRecord, OffsetCommitKey, OffsetCommitValue};
use seglog_core::store::Store;
use tokio::sync::watch;

pub use group::{CommittedOffset, GroupState};
pub use member::Protocol;
pub use seglog_core::error::kafka_codes::*;

use group::Group;
use rebalance::{Ctx, GroupWrite, JoinOutcome, SyncOutcome};
use storage::Cursor;

use crate::blocking::blocking;
use crate::config::BrokerConfig;
use crate::logline::log;

/// The longest group id accepted (Kafka sets none; a bound keeps records and
/// memory sane): longer ones get INVALID_GROUP_ID.
pub const MAX_GROUP_ID_BYTES: usize = 255;
/// The most protocol metadata (all protocols together) or assignment bytes
/// one member may have the broker keep: more gets INVALID_REQUEST.
pub const MAX_MEMBER_METADATA_BYTES: usize = 1 << 20;
/// How often member sessions, join deadlines and retention are looked at.
const TICK: Duration = Duration::from_millis(100);

/// The coordinator's settings, from the broker's keys.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
    pub offsets_partitions: i32,
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

/// A group id's check: INVALID_GROUP_ID if too long (or empty where the API
/// needs one).
pub fn check_group_id(id: &str, allow_empty: bool) -> std::result::Result<(), i16> {
    if (id.is_empty() && !allow_empty) || id.len() > MAX_GROUP_ID_BYTES {
        return Err(INVALID_GROUP_ID);
    }
    Ok(())
}

/// Kafka's code for a failed write of group state.
fn write_error_code(e: &Error) -> i16 {
    match e {
        Error::RecordTooLarge { .. } | Error::RecordBatchTooLarge(_) => UNKNOWN_SERVER_ERROR,
        _ => COORDINATOR_NOT_AVAILABLE,
    }
}

/// A write to make: offset records and/or a group record, for one group.
type PendingWrite = (String, Vec<CoordinatorRecord>, Option<GroupWrite>);

pub struct Coordinator {
    store: Arc<Store>,
    cfg: GroupConfig,
    groups: Mutex<HashMap<String, Group>>,
    cursors: Mutex<HashMap<i32, Arc<Mutex<Cursor>>>>,
    seq: AtomicU64,
    stopped: AtomicBool,
    next_retention_check: AtomicI64,
}

/// A group made only by a request that then failed: nothing to keep.
fn pristine(g: &Group) -> bool {
    g.is(GroupState::Empty)
        && g.members.is_empty()
        && g.pending_members.is_empty()
        && g.offsets.is_empty()
        && g.generation_id == 0
        && g.protocol_type.is_none()
}

impl Coordinator {
    /// Loads the groups and offsets of `store`'s `__consumer_offsets` (blocking).
    pub fn load(store: Arc<Store>, config: GroupConfig) -> Result<Arc<Coordinator>> {
        let now = now_ms();
        let loaded = storage::load(&store, now)?;
        Ok(Arc::new(Coordinator {
            store,
            next_retention_check: AtomicI64::new(now.saturating_add(config.retention_check_interval_ms)),
            cfg: config,
            groups: Mutex::new(loaded.groups),
            cursors: Mutex::new(loaded.cursors),
            seq: AtomicU64::new(1),
            stopped: AtomicBool::new(false),
        }))
    }

    pub fn config(&self) -> &GroupConfig {
        &self.cfg
    }

    fn ctx(&self, now: i64) -> Ctx<'_> {
        Ctx { cfg: &self.cfg, now, seq: &self.seq, writes: Vec::new() }
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Makes the writes (durably, in order), logging failures: nobody waits on them.
    async fn write_all(self: &Arc<Self>, writes: Vec<PendingWrite>) {
        if writes.is_empty() {
            return;
        }
        let me = self.clone();
        blocking(move || {
            for (group, records, group_write) in writes {
                if let Err(e) = me.write_records(&group, records, group_write) {
                    log("warn", "group_write_failed", &[("group", &group), ("error", &e)]);
                }
            }
        })
        .await
    }

    async fn write_group(self: &Arc<Self>, w: GroupWrite) -> std::result::Result<(), i16> {
        let me = self.clone();
        blocking(move || me.write_records(&w.group.clone(), Vec::new(), Some(w))).await.map_err(|e| {
            log("warn", "group_write_failed", &[("error", &e)]);
            write_error_code(&e)
        })
    }

    fn group_writes(writes: Vec<GroupWrite>) -> Vec<PendingWrite> {
        writes.into_iter().map(|w| (w.group.clone(), Vec::new(), Some(w))).collect()
    }

    pub(crate) fn join_at(&self, req: &JoinGroup, now: i64) -> (JoinOutcome, Vec<GroupWrite>) {
        let fail = |code| (JoinOutcome::Ready(JoinResponse::error(code, &req.member_id)), Vec::new());
        if let Err(code) = check_group_id(&req.group_id, false) {
            return fail(code);
        }
        if self.stopped() {
            return fail(COORDINATOR_NOT_AVAILABLE);
        }
        if req.session_timeout_ms < self.cfg.min_session_timeout_ms
            || req.session_timeout_ms > self.cfg.max_session_timeout_ms
        {
            return fail(INVALID_SESSION_TIMEOUT);
        }
        let metadata: usize = req.protocols.iter().map(|p| p.metadata.len() + p.name.len()).sum();
        if metadata > MAX_MEMBER_METADATA_BYTES {
            return fail(INVALID_REQUEST);
        }
        let mut groups = self.groups.lock();
        let g = if req.member_id.is_empty() {
            groups.entry(req.group_id.clone()).or_insert_with(|| Group::new(&req.group_id, now))
        } else {
            match groups.get_mut(&req.group_id) {
                Some(g) => g,
                None => return fail(UNKNOWN_MEMBER_ID),
            }
        };
        let mut ctx = self.ctx(now);
        let outcome = rebalance::join(g, req, &mut ctx);
        if pristine(g) {
            groups.remove(&req.group_id);
        }
        (outcome, ctx.writes)
    }

    /// JoinGroup: answered once the join completes (or at once for errors,
    /// MEMBER_ID_REQUIRED and retried joins of the current generation).
    pub async fn join_group(self: &Arc<Self>, req: JoinGroup) -> JoinResponse {
        let (outcome, writes) = self.join_at(&req, now_ms());
        self.write_all(Self::group_writes(writes)).await;
        match outcome {
            JoinOutcome::Ready(r) => r,
            JoinOutcome::Wait(rx) => {
                rx.await.unwrap_or_else(|_| JoinResponse::error(COORDINATOR_NOT_AVAILABLE, &req.member_id))
            }
            JoinOutcome::AfterWrite(w, r) => match self.write_group(w).await {
                Ok(()) => r,
                Err(code) => JoinResponse::error(code, &r.member_id),
            },
        }
    }

    pub(crate) fn sync_at(&self, req: &SyncGroup, now: i64) -> (SyncOutcome, Vec<GroupWrite>) {
        let fail =
            |code| (SyncOutcome::Ready(SyncResponse { error: code, ..Default::default() }), Vec::new());
        if let Err(code) = check_group_id(&req.group_id, false) {
            return fail(code);
        }
        if self.stopped() {
            return fail(COORDINATOR_NOT_AVAILABLE);
        }
        if req.assignments.iter().any(|(_, a)| a.len() > MAX_MEMBER_METADATA_BYTES) {
            return fail(INVALID_REQUEST);
        }
        let mut groups = self.groups.lock();
        let Some(g) = groups.get_mut(&req.group_id) else { return fail(UNKNOWN_MEMBER_ID) };
        let mut ctx = self.ctx(now);
        let outcome = rebalance::sync(g, req, &mut ctx);
        (outcome, ctx.writes)
    }

    pub(crate) fn assignment_stored_at(
        &self,
        group_id: &str,
        generation: i32,
        assignment: HashMap<String, Bytes>,
        result: std::result::Result<(), i16>,
        now: i64,
    ) -> Vec<GroupWrite> {
        let mut groups = self.groups.lock();
        let mut ctx = self.ctx(now);
        if let Some(g) = groups.get_mut(group_id) {
            rebalance::assignment_stored(g, generation, assignment, result, &mut ctx);
        }
        ctx.writes
    }

    /// SyncGroup: the leader's assignment is written (fsynced) before any
    /// member gets its part.
    pub async fn sync_group(self: &Arc<Self>, req: SyncGroup) -> SyncResponse {
        let (outcome, writes) = self.sync_at(&req, now_ms());
        self.write_all(Self::group_writes(writes)).await;
        let rx = match outcome {
            SyncOutcome::Ready(r) => return r,
            SyncOutcome::Wait(rx) => rx,
            SyncOutcome::LeaderWrite { write, generation, assignment, rx } => {
                let result = self.write_group(write).await;
                let writes =
                    self.assignment_stored_at(&req.group_id, generation, assignment, result, now_ms());
                self.write_all(Self::group_writes(writes)).await;
                rx
            }
        };
        rx.await.unwrap_or(SyncResponse { error: COORDINATOR_NOT_AVAILABLE, ..Default::default() })
    }

    pub(crate) fn heartbeat_at(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now: i64,
    ) -> i16 {
        if let Err(code) = check_group_id(group_id, false) {
            return code;
        }
        if self.stopped() {
            return COORDINATOR_NOT_AVAILABLE;
        }
        match self.groups.lock().get_mut(group_id) {
            None => UNKNOWN_MEMBER_ID,
            Some(g) => rebalance::heartbeat(g, member_id, group_instance_id, generation_id, now),
        }
    }

    /// Heartbeat: NONE, REBALANCE_IN_PROGRESS (rejoin), or why the member is not one.
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> i16 {
        self.heartbeat_at(group_id, member_id, group_instance_id, generation_id, now_ms())
    }

    pub(crate) fn leave_at(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: i64,
    ) -> ((i16, Vec<i16>), Vec<GroupWrite>) {
        if let Err(code) = check_group_id(group_id, false) {
            return ((code, Vec::new()), Vec::new());
        }
        if self.stopped() {
            return ((COORDINATOR_NOT_AVAILABLE, Vec::new()), Vec::new());
        }
        let mut groups = self.groups.lock();
        let Some(g) = groups.get_mut(group_id) else {
            return ((NONE, vec![UNKNOWN_MEMBER_ID; members.len()]), Vec::new());
        };
        if g.is(GroupState::Dead) {
            return ((COORDINATOR_NOT_AVAILABLE, Vec::new()), Vec::new());
        }
        let mut ctx = self.ctx(now);
        let codes = members
            .iter()
            .map(|(id, instance)| rebalance::leave(g, id, instance.as_deref(), &mut ctx))
            .collect();
        ((NONE, codes), ctx.writes)
    }

    /// LeaveGroup of (member id, group.instance.id) pairs: the top-level code
    /// and one per member.
    pub async fn leave_group(
        self: &Arc<Self>,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> (i16, Vec<i16>) {
        let (answer, writes) = self.leave_at(group_id, members, now_ms());
        self.write_all(Self::group_writes(writes)).await;
        answer
    }

    /// OffsetCommit: per partition, NONE once the commit is fsynced in
    /// `__consumer_offsets`, or Kafka's error.
    pub async fn commit_offsets(self: &Arc<Self>, req: OffsetCommit) -> Vec<(String, i32, i16)> {
        let now = now_ms();
        let all =
            |code: i16| req.offsets.iter().map(|o| (o.topic.clone(), o.partition, code)).collect::<Vec<_>>();
        if let Err(code) = check_group_id(&req.group_id, true) {
            return all(code);
        }
        if self.stopped() {
            return all(COORDINATOR_NOT_AVAILABLE);
        }
        {
            let mut groups = self.groups.lock();
            let created = !groups.contains_key(&req.group_id);
            if created && req.generation_id >= 0 {
                // A commit from a generation of a group that is gone.
                return all(ILLEGAL_GENERATION);
            }
            let g = groups.entry(req.group_id.clone()).or_insert_with(|| Group::new(&req.group_id, now));
            let checked = offsets::validate_commit(
                g,
                req.generation_id,
                &req.member_id,
                req.group_instance_id.as_deref(),
                now,
            );
            if let Err(code) = checked {
                if created && pristine(g) {
                    groups.remove(&req.group_id);
                }
                return all(code);
            }
        }
        let mut codes = Vec::with_capacity(req.offsets.len());
        let mut records = Vec::new();
        for o in &req.offsets {
            let code = if o.metadata.len() > self.cfg.metadata_max_bytes {
                OFFSET_METADATA_TOO_LARGE
            } else if self.store.partition(&o.topic, o.partition).is_err() {
                UNKNOWN_TOPIC_OR_PARTITION
            } else {
                records.push(CoordinatorRecord::Offset {
                    key: OffsetCommitKey {
                        group: req.group_id.clone(),
                        topic: o.topic.clone(),
                        partition: o.partition,
                    },
                    value: Some(OffsetCommitValue {
                        offset: o.offset,
                        leader_epoch: o.leader_epoch,
                        metadata: o.metadata.clone(),
                        commit_timestamp: now,
                    }),
                });
                NONE
            };
            codes.push((o.topic.clone(), o.partition, code));
        }
        if !records.is_empty() {
            let me = self.clone();
            let group = req.group_id.clone();
            if let Err(e) = blocking(move || me.write_records(&group, records, None)).await {
                log("warn", "offset_commit_failed", &[("group", &req.group_id), ("error", &e)]);
                let code = match e {
                    Error::RecordTooLarge { .. } | Error::RecordBatchTooLarge(_) => {
                        INVALID_COMMIT_OFFSET_SIZE
                    }
                    _ => COORDINATOR_NOT_AVAILABLE,
                };
                for c in codes.iter_mut().filter(|c| c.2 == NONE) {
                    c.2 = code;
                }
            }
        }
        codes
    }

    /// OffsetFetch: the committed offsets of `partitions` (all the group has
    /// if None), None where nothing is committed. Commits appended by an
    /// embedded consumer of the store are read first.
    #[allow(clippy::type_complexity)]
    pub async fn fetch_offsets(
        self: &Arc<Self>,
        group_id: &str,
        partitions: Option<Vec<(String, i32)>>,
    ) -> std::result::Result<Vec<(String, i32, Option<CommittedOffset>)>, i16> {
        check_group_id(group_id, true)?;
        if self.stopped() {
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        let me = self.clone();
        let group = group_id.to_string();
        if let Err(e) = blocking(move || me.catch_up_group(&group)).await {
            log("warn", "offsets_read_failed", &[("group", &group_id), ("error", &e)]);
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        let groups = self.groups.lock();
        let g = groups.get(group_id);
        Ok(match partitions {
            Some(ps) => ps
                .into_iter()
                .map(|(t, p)| {
                    let o = g.and_then(|g| g.offsets.get(&(t.clone(), p))).cloned();
                    (t, p, o)
                })
                .collect(),
            None => g
                .map(|g| g.offsets.iter().map(|((t, p), o)| (t.clone(), *p, Some(o.clone()))).collect())
                .unwrap_or_default(),
        })
    }

    /// ListGroups: every group but those being deleted.
    pub fn list_groups(&self) -> Vec<GroupListing> {
        let groups = self.groups.lock();
        let mut out: Vec<GroupListing> = groups
            .values()
            .filter(|g| !g.is(GroupState::Dead))
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DescribeGroups: an unknown group is described as Dead with no error,
    /// as Kafka does; members' metadata and assignments only when Stable.
    pub fn describe_groups(&self, ids: &[String]) -> Vec<GroupDescription> {
        let groups = self.groups.lock();
        ids.iter()
            .map(|id| {
                let mut d = GroupDescription {
                    error: NONE,
                    group_id: id.clone(),
                    state: GroupState::Dead,
                    protocol_type: String::new(),
                    protocol: String::new(),
                    generation_id: -1,
                    members: Vec::new(),
                };
                if let Err(code) = check_group_id(id, true) {
                    d.error = code;
                    return d;
                }
                if self.stopped() {
                    d.error = COORDINATOR_NOT_AVAILABLE;
                    return d;
                }
                let Some(g) = groups.get(id) else { return d };
                let stable = g.is(GroupState::Stable);
                d.state = g.state;
                d.protocol_type = g.protocol_type.clone().unwrap_or_default();
                d.generation_id = g.generation_id;
                if stable {
                    d.protocol = g.protocol_name.clone().unwrap_or_default();
                }
                d.members = g
                    .members
                    .values()
                    .map(|m| MemberDescription {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: if stable {
                            m.metadata(&d.protocol).cloned().unwrap_or_default()
                        } else {
                            Bytes::new()
                        },
                        assignment: if stable { m.assignment.clone() } else { Bytes::new() },
                    })
                    .collect();
                d
            })
            .collect()
    }

    /// DeleteGroups: empty groups are deleted with their offsets (tombstones
    /// written); others get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.
    pub async fn delete_groups(self: &Arc<Self>, ids: &[String]) -> Vec<(String, i16)> {
        let now = now_ms();
        let mut out = Vec::with_capacity(ids.len());
        let mut doomed = Vec::new();
        {
            let mut groups = self.groups.lock();
            for id in ids {
                let code = if let Err(code) = check_group_id(id, true) {
                    code
                } else if self.stopped() {
                    COORDINATOR_NOT_AVAILABLE
                } else {
                    match groups.get_mut(id) {
                        None => GROUP_ID_NOT_FOUND,
                        Some(g) if g.is(GroupState::Dead) => GROUP_ID_NOT_FOUND,
                        Some(g) if g.is(GroupState::Empty) => {
                            g.transition(GroupState::Dead, now);
                            doomed.push(GroupWrite {
                                group: id.clone(),
                                seq: self.seq.fetch_add(1, Ordering::Relaxed),
                                value: None,
                                offset_tombstones: g.offsets.keys().cloned().collect(),
                            });
                            NONE
                        }
                        Some(_) => NON_EMPTY_GROUP,
                    }
                };
                out.push((id.clone(), code));
            }
        }
        for w in doomed {
            let id = w.group.clone();
            let result = self.write_group(w).await;
            let mut groups = self.groups.lock();
            match result {
                Ok(()) => {
                    if groups.get(&id).is_some_and(|g| g.is(GroupState::Dead)) {
                        groups.remove(&id);
                    }
                }
                Err(code) => {
                    if let Some(g) = groups.get_mut(&id) {
                        g.transition(GroupState::Empty, now);
                    }
                    for r in out.iter_mut().filter(|r| r.0 == id) {
                        r.1 = code;
                    }
                }
            }
        }
        out
    }

    /// OffsetDelete: removes committed offsets of partitions the group does
    /// not consume (GROUP_SUBSCRIBED_TO_TOPIC for those it does).
    #[allow(clippy::type_complexity)]
    pub async fn delete_offsets(
        self: &Arc<Self>,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> std::result::Result<Vec<(String, i32, i16)>, i16> {
        check_group_id(group_id, true)?;
        if self.stopped() {
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        let mut out = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        {
            let mut groups = self.groups.lock();
            let g = match groups.get_mut(group_id) {
                None => return Err(GROUP_ID_NOT_FOUND),
                Some(g) if g.is(GroupState::Dead) => return Err(GROUP_ID_NOT_FOUND),
                Some(g) => g,
            };
            let subscribed = match g.state {
                GroupState::Empty => Some(Vec::new()),
                _ if g.protocol_type.as_deref() == Some("consumer") => g.subscribed_topics(),
                _ => return Err(NON_EMPTY_GROUP),
            };
            for (t, p) in partitions {
                let code = if self.store.partition(t, *p).is_err() {
                    UNKNOWN_TOPIC_OR_PARTITION
                } else if subscribed.as_ref().is_none_or(|s| s.contains(t)) {
                    GROUP_SUBSCRIBED_TO_TOPIC
                } else {
                    if g.offsets.remove(&(t.clone(), *p)).is_some() {
                        tombstones.push(CoordinatorRecord::Offset {
                            key: OffsetCommitKey {
                                group: group_id.to_string(),
                                topic: t.clone(),
                                partition: *p,
                            },
                            value: None,
                        });
                    }
                    NONE
                };
                out.push((t.clone(), *p, code));
            }
        }
        if !tombstones.is_empty() {
            let me = self.clone();
            let group = group_id.to_string();
            if let Err(e) = blocking(move || me.write_records(&group, tombstones, None)).await {
                log("warn", "offset_delete_failed", &[("group", &group_id), ("error", &e)]);
                for r in out.iter_mut().filter(|r| r.2 == NONE) {
                    r.2 = COORDINATOR_NOT_AVAILABLE;
                }
            }
        }
        Ok(out)
    }

    /// Expires members and member ids, completes due joins and (every
    /// `offsets.retention.check.interval.ms`) removes expired offsets and the
    /// empty groups left without any. Returns the writes to make.
    pub(crate) fn tick_at(&self, now: i64) -> Vec<PendingWrite> {
        let mut writes = Vec::new();
        let retention = now >= self.next_retention_check.load(Ordering::Relaxed);
        if retention {
            self.next_retention_check
                .store(now.saturating_add(self.cfg.retention_check_interval_ms), Ordering::Relaxed);
        }
        let mut groups = self.groups.lock();
        let mut gone = Vec::new();
        for g in groups.values_mut() {
            let mut ctx = self.ctx(now);
            for id in rebalance::expire(g, &mut ctx) {
                log("info", "group_member_expired", &[("group", &g.id), ("member", &id)]);
            }
            writes.extend(Self::group_writes(ctx.writes));
            if !retention || g.is(GroupState::Dead) {
                continue;
            }
            let expired = offsets::expired_offsets(g, now, self.cfg.retention_ms);
            for tp in &expired {
                g.offsets.remove(tp);
            }
            if g.is(GroupState::Empty)
                && g.offsets.is_empty()
                && g.members.is_empty()
                && g.pending_members.is_empty()
            {
                gone.push(g.id.clone());
                if g.generation_id == 0 && g.protocol_type.is_none() && expired.is_empty() {
                    continue; // never written: nothing to delete in the log
                }
                g.transition(GroupState::Dead, now);
                writes.push((
                    g.id.clone(),
                    Vec::new(),
                    Some(GroupWrite {
                        group: g.id.clone(),
                        seq: self.seq.fetch_add(1, Ordering::Relaxed),
                        value: None,
                        offset_tombstones: expired,
                    }),
                ));
            } else if !expired.is_empty() {
                let records = expired
                    .into_iter()
                    .map(|(topic, partition)| CoordinatorRecord::Offset {
                        key: OffsetCommitKey { group: g.id.clone(), topic, partition },
                        value: None,
                    })
                    .collect();
                writes.push((g.id.clone(), records, None));
            }
        }
        for id in gone {
            groups.remove(&id);
        }
        writes
    }

    /// Runs the coordinator's clock until `stop`; then answers every waiting
    /// member (COORDINATOR_NOT_AVAILABLE) so nothing hangs on a stopped broker.
    pub async fn run_timer(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = interval.tick() => {
                    let writes = self.tick_at(now_ms());
                    self.write_all(writes).await;
                }
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
        }
        self.shutdown();
    }

    /// Stops serving: new requests get COORDINATOR_NOT_AVAILABLE and waiting
    /// joins and syncs are answered with it. Idempotent.
    pub fn shutdown(&self) {
        self.stopped.store(true, Ordering::Release);
        for g in self.groups.lock().values_mut() {
            rebalance::abandon(g);
        }
    }

    /// The state and generation of a group, if it exists.
    pub fn group_state(&self, group_id: &str) -> Option<(GroupState, i32)> {
        self.groups.lock().get(group_id).map(|g| (g.state, g.generation_id))
    }
}

#[cfg(test)]
#[path = "coordinator_test.rs"]
mod tests;
