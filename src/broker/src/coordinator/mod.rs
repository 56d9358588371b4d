//! Kafka's classic group coordinator: consumer groups that rebalance through
//! JoinGroup/SyncGroup with client-side assignors (the broker relays their
//! metadata and assignments as opaque bytes), heartbeats and session
//! timeouts, static membership, and committed offsets in `__consumer_offsets`
//! (shared with the embedded consumer of the same store).
//!
//! Layout: `group` (a group's state and record), `member`, `rebalance` (the
//! protocol's state machine, in memory, on a caller-given clock), `offsets`
//! (who may commit; retention), `storage` (loading and writing the log),
//! `api` (the requests and answers in plain Rust types, with Kafka's error
//! codes, so that network handlers and the embedded consumer use the same
//! coordinator), `admin` (listing, describing and deleting groups and
//! offsets). This file holds the coordinator itself: its state, the member
//! requests (join, sync, heartbeat, leave, commit, fetch) and its clock.

mod admin;
mod api;
mod group;
mod member;
mod offsets;
mod ownership;
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

pub use api::*;
pub use group::{CommittedOffset, GroupState};
pub use member::Protocol;
pub use seglog_core::error::kafka_codes::*;

use group::Group;
use rebalance::{Ctx, GroupWrite, JoinOutcome, SyncOutcome};
use storage::Cursor;

use crate::blocking::blocking;
use crate::logline::log;

/// The longest group id accepted (Kafka sets none; a bound keeps records and
/// memory sane): longer ones get INVALID_GROUP_ID.
pub const MAX_GROUP_ID_BYTES: usize = 255;
/// The most protocol metadata (all protocols together) or assignment bytes
/// one member may have the broker keep: more gets INVALID_REQUEST.
pub const MAX_MEMBER_METADATA_BYTES: usize = 1 << 20;
/// How often member sessions, join deadlines and retention are looked at.
const TICK: Duration = Duration::from_millis(100);

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
        Error::Kafka { code, .. } => ownership::group_code(*code),
        _ => COORDINATOR_NOT_AVAILABLE,
    }
}

/// A write to make: offset records and/or a group record, for one group.
type PendingWrite = (String, Vec<CoordinatorRecord>, Option<GroupWrite>);

pub struct Coordinator {
    store: Arc<Store>,
    /// A cluster member's replication: set, this coordinator serves only the
    /// partitions of `__consumer_offsets` it leads (`owned`).
    replication: std::sync::OnceLock<Arc<crate::replication::Replication>>,
    /// A single broker's coordinator serves every group; a cluster member's
    /// only those of the partitions in `owned`.
    serves_all: bool,
    owned: Mutex<HashMap<i32, ownership::Owned>>,
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
    /// Loads the groups and offsets of `store`'s `__consumer_offsets` (blocking):
    /// a single broker's coordinator, which serves every group.
    pub fn load(store: Arc<Store>, config: GroupConfig) -> Result<Arc<Coordinator>> {
        let loaded = storage::load(&store, now_ms())?;
        Ok(Self::with(store, config, Some((loaded.groups, loaded.cursors))))
    }

    /// A coordinator serving no group yet: a cluster member's, which loads
    /// each partition of `__consumer_offsets` as it comes to lead it
    /// (`take_partitions`, which `follow_leadership` calls), and appends
    /// through `set_replication`'s replication.
    pub fn new(store: Arc<Store>, config: GroupConfig) -> Arc<Coordinator> {
        Self::with(store, config, None)
    }

    /// `loaded`: the groups and cursors of a coordinator that serves every group.
    #[allow(clippy::type_complexity)]
    fn with(
        store: Arc<Store>,
        config: GroupConfig,
        loaded: Option<(HashMap<String, Group>, HashMap<i32, Arc<Mutex<Cursor>>>)>,
    ) -> Arc<Coordinator> {
        let now = now_ms();
        let serves_all = loaded.is_some();
        let (groups, cursors) = loaded.unwrap_or_default();
        Arc::new(Coordinator {
            store,
            replication: std::sync::OnceLock::new(),
            serves_all,
            owned: Mutex::new(HashMap::new()),
            next_retention_check: AtomicI64::new(now.saturating_add(config.retention_check_interval_ms)),
            cfg: config,
            groups: Mutex::new(groups),
            cursors: Mutex::new(cursors),
            seq: AtomicU64::new(1),
            stopped: AtomicBool::new(false),
        })
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
                // Not waited for: nobody is answered on these.
                if let Err(e) = me.write_records(&group, records, group_write) {
                    log("warn", "group_write_failed", &[("group", &group), ("error", &e)]);
                }
            }
        })
        .await
    }

    /// Writes a group's record, answered once its replicas have it.
    async fn write_group(self: &Arc<Self>, w: GroupWrite) -> std::result::Result<(), i16> {
        let me = self.clone();
        let written =
            blocking(move || me.write_records(&w.group.clone(), Vec::new(), Some(w))).await.map_err(|e| {
                log("warn", "group_write_failed", &[("error", &e)]);
                write_error_code(&e)
            })?;
        self.replicated(written).await
    }

    fn group_writes(writes: Vec<GroupWrite>) -> Vec<PendingWrite> {
        writes.into_iter().map(|w| (w.group.clone(), Vec::new(), Some(w))).collect()
    }

    pub(crate) fn join_at(&self, req: &JoinGroup, now: i64) -> (JoinOutcome, Vec<GroupWrite>) {
        let fail = |code| (JoinOutcome::Ready(JoinResponse::error(code, &req.member_id)), Vec::new());
        if let Err(code) = check_group_id(&req.group_id, false).and_then(|()| self.serving(&req.group_id)) {
            return fail(code);
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
        if let Err(code) = check_group_id(&req.group_id, false).and_then(|()| self.serving(&req.group_id)) {
            return fail(code);
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
        if let Err(code) = check_group_id(group_id, false).and_then(|()| self.serving(group_id)) {
            return code;
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
        if let Err(code) = check_group_id(group_id, false).and_then(|()| self.serving(group_id)) {
            return ((code, Vec::new()), Vec::new());
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
        if let Err(code) = check_group_id(&req.group_id, true).and_then(|()| self.serving(&req.group_id)) {
            return all(code);
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
            let written = match blocking(move || me.write_records(&group, records, None)).await {
                Ok(w) => self.replicated(w).await,
                Err(e) => {
                    log("warn", "offset_commit_failed", &[("group", &req.group_id), ("error", &e)]);
                    Err(match e {
                        Error::RecordTooLarge { .. } | Error::RecordBatchTooLarge(_) => {
                            INVALID_COMMIT_OFFSET_SIZE
                        }
                        e => write_error_code(&e),
                    })
                }
            };
            if let Err(code) = written {
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
        self.serving(group_id)?;
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
            rebalance::abandon(g, COORDINATOR_NOT_AVAILABLE);
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
