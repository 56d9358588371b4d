//! The classic rebalance protocol on one group, as Kafka's `GroupCoordinator`
//! runs it: JoinGroup (KIP-394 member ids, static members of KIP-345),
//! SyncGroup, Heartbeat, LeaveGroup, member expiry and the completion of a
//! join. Everything here is in memory and takes the time as an argument (so
//! tests drive it with a fake clock); what must be written to the log comes
//! back as `GroupWrite`s, and responses that must wait go through channels.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::group::{Group, GroupState, InitialDelay};
use super::member::Member;
use super::{GroupConfig, JoinGroup, JoinResponse, JoinedMember, SyncGroup, SyncResponse};
use seglog_core::error::kafka_codes::*;
use seglog_core::group::GroupMetadataValue;

/// How long a new member may wait in a join before it is dropped (Kafka's
/// `NewMemberJoinTimeoutMs`).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 5 * 60 * 1000;

/// A group metadata record (or tombstone) to write, with the offsets to
/// delete alongside it. `seq` orders writes of one group: a write older than
/// one already in the log is dropped.
#[derive(Debug)]
pub struct GroupWrite {
    pub group: String,
    pub seq: u64,
    pub value: Option<GroupMetadataValue>,
    pub offset_tombstones: Vec<(String, i32)>,
}

/// What an operation needs besides the group: settings, the time, and where
/// writes go.
pub struct Ctx<'a> {
    pub cfg: &'a GroupConfig,
    pub now: i64,
    pub seq: &'a AtomicU64,
    pub writes: Vec<GroupWrite>,
}

impl Ctx<'_> {
    pub fn write_group(&mut self, g: &Group, assignment: Option<&HashMap<String, Bytes>>) -> GroupWrite {
        GroupWrite {
            group: g.id.clone(),
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            value: Some(g.snapshot(assignment)),
            offset_tombstones: Vec::new(),
        }
    }
}

pub enum JoinOutcome {
    Ready(JoinResponse),
    Wait(oneshot::Receiver<JoinResponse>),
    /// Answer once the group record is written (a static member replaced).
    AfterWrite(GroupWrite, JoinResponse),
}

pub enum SyncOutcome {
    Ready(SyncResponse),
    Wait(oneshot::Receiver<SyncResponse>),
    /// The leader's assignment: write it, then `assignment_stored`, then wait.
    LeaderWrite {
        write: GroupWrite,
        generation: i32,
        assignment: HashMap<String, Bytes>,
        rx: oneshot::Receiver<SyncResponse>,
    },
}

fn sync_error(code: i16) -> SyncResponse {
    SyncResponse { error: code, ..Default::default() }
}

/// Kafka's `validateCurrentMember`: a static member's instance id must map to
/// its member id; a dynamic member must be known.
pub fn validate_member(g: &Group, member_id: &str, instance: Option<&str>) -> Result<(), i16> {
    match instance {
        Some(instance) => match g.static_members.get(instance) {
            None => Err(UNKNOWN_MEMBER_ID),
            Some(id) if id != member_id => Err(FENCED_INSTANCE_ID),
            Some(_) => Ok(()),
        },
        None if !g.members.contains_key(member_id) => Err(UNKNOWN_MEMBER_ID),
        None => Ok(()),
    }
}

/// Whether one more member may join (Kafka's `acceptJoiningMember`).
fn accept_joining_member(g: &Group, member_id: &str, max: i32) -> bool {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    match g.state {
        GroupState::Empty | GroupState::Dead => true,
        GroupState::PreparingRebalance => {
            g.members.get(member_id).is_some_and(Member::is_awaiting_join)
                || g.members.values().filter(|m| m.is_awaiting_join()).count() < max
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            g.members.contains_key(member_id) || g.members.len() < max
        }
    }
}

/// The current generation's answer to a member that need not wait.
fn current_join_response(g: &Group, member_id: &str, with_members: bool) -> JoinResponse {
    JoinResponse {
        error: NONE,
        generation_id: g.generation_id,
        protocol_type: g.protocol_type.clone(),
        protocol_name: g.protocol_name.clone(),
        leader: g.leader.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        members: if with_members { joined_members(g) } else { Vec::new() },
    }
}

fn joined_members(g: &Group) -> Vec<JoinedMember> {
    let protocol = g.protocol_name.as_deref().unwrap_or("");
    g.members
        .values()
        .map(|m| JoinedMember {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            metadata: m.metadata(protocol).cloned().unwrap_or_default(),
        })
        .collect()
}

/// A JoinGroup on an existing (or just created) group.
pub fn join(g: &mut Group, req: &JoinGroup, ctx: &mut Ctx<'_>) -> JoinOutcome {
    if !accept_joining_member(g, &req.member_id, ctx.cfg.max_size) {
        if g.members.contains_key(&req.member_id) {
            remove_member_and_update(g, &req.member_id, ctx);
        }
        return JoinOutcome::Ready(JoinResponse::error(GROUP_MAX_SIZE_REACHED, ""));
    }
    let outcome = if req.member_id.is_empty() {
        join_new_member(g, req, ctx)
    } else {
        join_current_member(g, req, ctx)
    };
    try_complete_join(g, ctx);
    outcome
}

fn join_new_member(g: &mut Group, req: &JoinGroup, ctx: &mut Ctx<'_>) -> JoinOutcome {
    if g.is(GroupState::Dead) {
        return JoinOutcome::Ready(JoinResponse::error(COORDINATOR_NOT_AVAILABLE, ""));
    }
    if !g.supports_protocols(&req.protocol_type, &req.protocols, "") {
        return JoinOutcome::Ready(JoinResponse::error(INCONSISTENT_GROUP_PROTOCOL, ""));
    }
    let member_id = format!("{}-{}", req.client_id, uuid::Uuid::new_v4());
    if req.group_instance_id.is_some() {
        return join_static_member(g, req, member_id, ctx);
    }
    if req.require_known_member_id {
        // KIP-394: the id is handed out first; the member must come back with it.
        let deadline = ctx.now.saturating_add(i64::from(req.session_timeout_ms));
        g.pending_members.insert(member_id.clone(), deadline);
        return JoinOutcome::Ready(JoinResponse::error(MEMBER_ID_REQUIRED, &member_id));
    }
    add_member_and_rebalance(g, req, member_id, ctx)
}

fn join_current_member(g: &mut Group, req: &JoinGroup, ctx: &mut Ctx<'_>) -> JoinOutcome {
    let member_id = req.member_id.clone();
    if g.is(GroupState::Dead) {
        return JoinOutcome::Ready(JoinResponse::error(COORDINATOR_NOT_AVAILABLE, &member_id));
    }
    if !g.supports_protocols(&req.protocol_type, &req.protocols, &member_id) {
        return JoinOutcome::Ready(JoinResponse::error(INCONSISTENT_GROUP_PROTOCOL, &member_id));
    }
    if g.pending_members.contains_key(&member_id) {
        if req.group_instance_id.is_some() {
            return JoinOutcome::Ready(JoinResponse::error(UNKNOWN_MEMBER_ID, &member_id));
        }
        return add_member_and_rebalance(g, req, member_id, ctx);
    }
    if let Err(code) = validate_member(g, &member_id, req.group_instance_id.as_deref()) {
        return JoinOutcome::Ready(JoinResponse::error(code, &member_id));
    }
    let unchanged = g.members.get(&member_id).is_some_and(|m| m.protocols == req.protocols);
    match g.state {
        GroupState::PreparingRebalance => update_member_and_rebalance(g, req, ctx),
        GroupState::CompletingRebalance if unchanged => {
            // A retried join of this generation: the same answer again.
            let leader = g.is_leader(&member_id);
            JoinOutcome::Ready(current_join_response(g, &member_id, leader))
        }
        GroupState::Stable if unchanged && !g.is_leader(&member_id) => {
            JoinOutcome::Ready(current_join_response(g, &member_id, false))
        }
        GroupState::CompletingRebalance | GroupState::Stable => update_member_and_rebalance(g, req, ctx),
        GroupState::Empty | GroupState::Dead => {
            JoinOutcome::Ready(JoinResponse::error(UNKNOWN_MEMBER_ID, &member_id))
        }
    }
}

/// A static member (group.instance.id) joining without a member id: new, or a
/// restart of a known instance, which takes the old member's place (fencing
/// the old id) without a rebalance if the group's protocol would not change.
fn join_static_member(g: &mut Group, req: &JoinGroup, member_id: String, ctx: &mut Ctx<'_>) -> JoinOutcome {
    let instance = req.group_instance_id.clone().unwrap_or_default();
    let Some(old_id) = g.static_members.get(&instance).cloned() else {
        return add_member_and_rebalance(g, req, member_id, ctx);
    };
    let old_leader = g.leader.clone();
    let Some(mut member) = g.remove(&old_id) else {
        return add_member_and_rebalance(g, req, member_id, ctx);
    };
    if let Some(tx) = member.awaiting_join.take() {
        let _ = tx.send(JoinResponse::error(FENCED_INSTANCE_ID, &old_id));
    }
    if let Some(tx) = member.awaiting_sync.take() {
        let _ = tx.send(sync_error(FENCED_INSTANCE_ID));
    }
    let was_leader = old_leader.as_deref() == Some(old_id.as_str());
    member.protocols = req.protocols.clone();
    member.member_id = member_id.clone();
    member.client_id = req.client_id.clone();
    member.client_host = req.client_host.clone();
    member.session_timeout_ms = req.session_timeout_ms;
    member.rebalance_timeout_ms = req.rebalance_timeout_ms;
    member.heartbeat(ctx.now);
    g.add(member);
    if was_leader {
        g.leader = Some(member_id.clone());
    }
    if g.is(GroupState::Stable) && g.select_protocol() == g.protocol_name {
        // Nothing changes for the others: the same generation and assignment.
        // The leader id from before the replacement is returned, so that
        // this member never takes itself for the leader and assigns.
        let write = ctx.write_group(g, None);
        let mut response = current_join_response(g, &member_id, false);
        response.leader = old_leader.unwrap_or_default();
        return JoinOutcome::AfterWrite(write, response);
    }
    let (tx, rx) = oneshot::channel();
    if let Some(m) = g.members.get_mut(&member_id) {
        m.awaiting_join = Some(tx);
    }
    maybe_prepare_rebalance(g, ctx);
    JoinOutcome::Wait(rx)
}

fn add_member_and_rebalance(
    g: &mut Group,
    req: &JoinGroup,
    member_id: String,
    ctx: &mut Ctx<'_>,
) -> JoinOutcome {
    let (tx, rx) = oneshot::channel();
    let member = Member {
        member_id,
        group_instance_id: req.group_instance_id.clone(),
        client_id: req.client_id.clone(),
        client_host: req.client_host.clone(),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type.clone(),
        protocols: req.protocols.clone(),
        assignment: Bytes::new(),
        awaiting_join: Some(tx),
        awaiting_sync: None,
        is_new: true,
        heartbeat_deadline: ctx.now.saturating_add(NEW_MEMBER_JOIN_TIMEOUT_MS),
    };
    if g.is(GroupState::PreparingRebalance) && g.generation_id == 0 {
        g.new_member_added = true;
    }
    g.add(member);
    maybe_prepare_rebalance(g, ctx);
    JoinOutcome::Wait(rx)
}

fn update_member_and_rebalance(g: &mut Group, req: &JoinGroup, ctx: &mut Ctx<'_>) -> JoinOutcome {
    let (tx, rx) = oneshot::channel();
    if let Some(m) = g.members.get_mut(&req.member_id) {
        m.protocols = req.protocols.clone();
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_timeout_ms = req.session_timeout_ms;
        // A retried join replaces the one still waiting (its client gave up on it).
        m.awaiting_join = Some(tx);
    }
    maybe_prepare_rebalance(g, ctx);
    JoinOutcome::Wait(rx)
}

fn maybe_prepare_rebalance(g: &mut Group, ctx: &mut Ctx<'_>) {
    if matches!(g.state, GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty) {
        prepare_rebalance(g, ctx);
    }
}

fn prepare_rebalance(g: &mut Group, ctx: &mut Ctx<'_>) {
    if g.is(GroupState::CompletingRebalance) {
        reset_and_propagate_assignment_error(g, REBALANCE_IN_PROGRESS);
    }
    let delay = i64::from(ctx.cfg.initial_rebalance_delay_ms);
    if g.is(GroupState::Empty) && delay > 0 {
        g.initial_delay = Some(InitialDelay {
            deadline: ctx.now.saturating_add(delay),
            remaining: (g.rebalance_timeout_ms() - delay).max(0),
        });
        g.join_deadline = None;
    } else {
        g.initial_delay = None;
        g.join_deadline = Some(ctx.now.saturating_add(g.rebalance_timeout_ms()));
    }
    g.new_member_added = false;
    g.transition(GroupState::PreparingRebalance, ctx.now);
}

/// Completes the join if it is due: all members rejoined, or its time ran out.
pub fn try_complete_join(g: &mut Group, ctx: &mut Ctx<'_>) {
    if !g.is(GroupState::PreparingRebalance) {
        return;
    }
    if let Some(delay) = g.initial_delay {
        if ctx.now < delay.deadline {
            return;
        }
        if g.new_member_added && delay.remaining > 0 {
            // Members kept arriving: wait once more for stragglers.
            g.new_member_added = false;
            let next = i64::from(ctx.cfg.initial_rebalance_delay_ms).min(delay.remaining);
            g.initial_delay = Some(InitialDelay {
                deadline: ctx.now.saturating_add(next),
                remaining: delay.remaining - next,
            });
            return;
        }
        g.initial_delay = None;
    } else if !g.all_members_joined() && g.join_deadline.is_none_or(|d| ctx.now < d) {
        return;
    }
    complete_join(g, ctx);
}

/// Kafka's `onCompleteJoin`: dynamic members that did not rejoin are dropped,
/// the generation moves on, a protocol is chosen and every waiting member
/// gets its answer (the leader with the members' metadata).
fn complete_join(g: &mut Group, ctx: &mut Ctx<'_>) {
    let gone: Vec<String> = g
        .members
        .values()
        .filter(|m| !m.is_awaiting_join() && !m.is_static())
        .map(|m| m.member_id.clone())
        .collect();
    for id in gone {
        g.remove(&id);
    }
    if !g.members.is_empty() {
        let leader_joined =
            g.leader.as_ref().and_then(|l| g.members.get(l)).is_some_and(Member::is_awaiting_join);
        if !leader_joined {
            match g.members.values().find(|m| m.is_awaiting_join()) {
                Some(m) => g.leader = Some(m.member_id.clone()),
                None => {
                    // Only static members that have not rejoined are left: wait
                    // another round for them to come back or expire.
                    g.join_deadline = Some(ctx.now.saturating_add(g.rebalance_timeout_ms()));
                    return;
                }
            }
        }
    }
    g.generation_id = g.generation_id.wrapping_add(1);
    g.join_deadline = None;
    if g.members.is_empty() {
        g.protocol_name = None;
        g.leader = None;
        g.transition(GroupState::Empty, ctx.now);
        let write = ctx.write_group(g, None);
        ctx.writes.push(write);
        return;
    }
    g.protocol_name = g.select_protocol();
    g.transition(GroupState::CompletingRebalance, ctx.now);
    let members = joined_members(g);
    let base = current_join_response(g, "", false);
    let leader = g.leader.clone();
    for m in g.members.values_mut() {
        if let Some(tx) = m.awaiting_join.take() {
            let mut r = base.clone();
            r.member_id = m.member_id.clone();
            if leader.as_deref() == Some(m.member_id.as_str()) {
                r.members = members.clone();
            }
            let _ = tx.send(r);
        }
        m.heartbeat(ctx.now);
        m.is_new = false;
    }
}

fn reset_and_propagate_assignment_error(g: &mut Group, code: i16) {
    for m in g.members.values_mut() {
        m.assignment = Bytes::new();
        if let Some(tx) = m.awaiting_sync.take() {
            let _ = tx.send(sync_error(code));
        }
    }
}

/// A member leaves or is dropped (Kafka's `removeMemberAndUpdateGroup`).
pub fn remove_member_and_update(g: &mut Group, member_id: &str, ctx: &mut Ctx<'_>) {
    let Some(mut m) = g.remove(member_id) else { return };
    if let Some(tx) = m.awaiting_join.take() {
        let _ = tx.send(JoinResponse::error(UNKNOWN_MEMBER_ID, member_id));
    }
    if let Some(tx) = m.awaiting_sync.take() {
        let _ = tx.send(sync_error(UNKNOWN_MEMBER_ID));
    }
    match g.state {
        GroupState::Stable | GroupState::CompletingRebalance => prepare_rebalance(g, ctx),
        _ => {}
    }
    try_complete_join(g, ctx);
}

pub fn sync(g: &mut Group, req: &SyncGroup, ctx: &mut Ctx<'_>) -> SyncOutcome {
    if g.is(GroupState::Dead) {
        return SyncOutcome::Ready(sync_error(COORDINATOR_NOT_AVAILABLE));
    }
    if let Err(code) = validate_member(g, &req.member_id, req.group_instance_id.as_deref()) {
        return SyncOutcome::Ready(sync_error(code));
    }
    if req.generation_id != g.generation_id {
        return SyncOutcome::Ready(sync_error(ILLEGAL_GENERATION));
    }
    if req.protocol_type.as_ref().is_some_and(|t| Some(t) != g.protocol_type.as_ref())
        || req.protocol_name.as_ref().is_some_and(|p| Some(p) != g.protocol_name.as_ref())
    {
        return SyncOutcome::Ready(sync_error(INCONSISTENT_GROUP_PROTOCOL));
    }
    match g.state {
        GroupState::Empty | GroupState::Dead => SyncOutcome::Ready(sync_error(UNKNOWN_MEMBER_ID)),
        GroupState::PreparingRebalance => SyncOutcome::Ready(sync_error(REBALANCE_IN_PROGRESS)),
        GroupState::Stable => {
            let Some(m) = g.members.get_mut(&req.member_id) else {
                return SyncOutcome::Ready(sync_error(UNKNOWN_MEMBER_ID));
            };
            m.heartbeat(ctx.now);
            SyncOutcome::Ready(SyncResponse {
                error: NONE,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol_name.clone(),
                assignment: m.assignment.clone(),
            })
        }
        GroupState::CompletingRebalance => {
            let (tx, rx) = oneshot::channel();
            if let Some(m) = g.members.get_mut(&req.member_id) {
                m.awaiting_sync = Some(tx);
            }
            if !g.is_leader(&req.member_id) {
                return SyncOutcome::Wait(rx);
            }
            // Members the leader left out get an empty assignment; ids it
            // named that are not members are ignored.
            let assignment: HashMap<String, Bytes> = g
                .members
                .keys()
                .map(|id| {
                    let a = req.assignments.iter().rev().find(|(m, _)| m == id).map(|(_, a)| a.clone());
                    (id.clone(), a.unwrap_or_default())
                })
                .collect();
            let write = ctx.write_group(g, Some(&assignment));
            SyncOutcome::LeaderWrite { write, generation: g.generation_id, assignment, rx }
        }
    }
}

/// The leader's assignment was written (or failed to be): the group becomes
/// Stable and every member waiting in SyncGroup gets its part, unless the
/// group moved on meanwhile.
pub fn assignment_stored(
    g: &mut Group,
    generation: i32,
    assignment: HashMap<String, Bytes>,
    result: Result<(), i16>,
    ctx: &mut Ctx<'_>,
) {
    if !g.is(GroupState::CompletingRebalance) || g.generation_id != generation {
        return;
    }
    match result {
        Ok(()) => {
            let (protocol_type, protocol_name) = (g.protocol_type.clone(), g.protocol_name.clone());
            for m in g.members.values_mut() {
                m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
                if let Some(tx) = m.awaiting_sync.take() {
                    let _ = tx.send(SyncResponse {
                        error: NONE,
                        protocol_type: protocol_type.clone(),
                        protocol_name: protocol_name.clone(),
                        assignment: m.assignment.clone(),
                    });
                }
                m.heartbeat(ctx.now);
            }
            g.transition(GroupState::Stable, ctx.now);
        }
        Err(code) => {
            reset_and_propagate_assignment_error(g, code);
            prepare_rebalance(g, ctx);
            try_complete_join(g, ctx);
        }
    }
}

pub fn heartbeat(g: &mut Group, member_id: &str, instance: Option<&str>, generation: i32, now: i64) -> i16 {
    if g.is(GroupState::Dead) {
        return COORDINATOR_NOT_AVAILABLE;
    }
    if let Err(code) = validate_member(g, member_id, instance) {
        return code;
    }
    if generation != g.generation_id {
        return ILLEGAL_GENERATION;
    }
    let state = g.state;
    let Some(m) = g.members.get_mut(member_id) else { return UNKNOWN_MEMBER_ID };
    match state {
        GroupState::Empty | GroupState::Dead => UNKNOWN_MEMBER_ID,
        GroupState::PreparingRebalance => {
            m.heartbeat(now);
            REBALANCE_IN_PROGRESS
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            m.heartbeat(now);
            NONE
        }
    }
}

/// One member of a LeaveGroup: by member id, or (static members) by instance
/// id with an empty member id.
pub fn leave(g: &mut Group, member_id: &str, instance: Option<&str>, ctx: &mut Ctx<'_>) -> i16 {
    if instance.is_none() && g.pending_members.remove(member_id).is_some() {
        try_complete_join(g, ctx);
        return NONE;
    }
    let id = match (member_id.is_empty(), instance) {
        (true, Some(i)) => match g.static_members.get(i) {
            Some(id) => id.clone(),
            None => return UNKNOWN_MEMBER_ID,
        },
        _ => member_id.to_string(),
    };
    if let Err(code) = validate_member(g, &id, instance) {
        return code;
    }
    remove_member_and_update(g, &id, ctx);
    NONE
}

/// Drops members whose session ran out and member ids never claimed, and
/// completes joins that are due.
pub fn expire(g: &mut Group, ctx: &mut Ctx<'_>) -> Vec<String> {
    let now = ctx.now;
    g.pending_members.retain(|_, deadline| now < *deadline);
    let dead: Vec<String> =
        g.members.values().filter(|m| !m.alive_at(now)).map(|m| m.member_id.clone()).collect();
    for id in &dead {
        remove_member_and_update(g, id, ctx);
    }
    try_complete_join(g, ctx);
    dead
}

/// Answers every waiting member: the coordinator is going away.
pub fn abandon(g: &mut Group, code: i16) {
    for m in g.members.values_mut() {
        if let Some(tx) = m.awaiting_join.take() {
            let _ = tx.send(JoinResponse::error(code, &m.member_id));
        }
        if let Some(tx) = m.awaiting_sync.take() {
            let _ = tx.send(sync_error(code));
        }
    }
}
