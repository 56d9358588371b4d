//! A classic group (Kafka's `GroupMetadata`): its state, generation, chosen
//! protocol, leader, members and committed offsets, and the record that keeps
//! it across restarts.
//!
//! States, as Kafka's: Empty (no members; offsets only), PreparingRebalance
//! (members are asked to rejoin), CompletingRebalance (joined; waiting for the
//! leader's assignment), Stable, and Dead (being deleted).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use seglog_client::consumer_protocol::decode_subscription;
use seglog_core::group::{GroupMetadataValue, MemberMetadata};

use super::member::{Member, Protocol};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka's DescribeGroups and ListGroups give the state.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A committed offset as the coordinator serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// The initial rebalance delay of an empty group (Kafka's `InitialDelayedJoin`):
/// the join completes at `deadline`, or is put off again (up to `remaining`)
/// if members kept arriving.
#[derive(Debug, Clone, Copy)]
pub(super) struct InitialDelay {
    pub deadline: i64,
    pub remaining: i64,
}

#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    /// When the group entered its state (None if unknown, e.g. loaded from an
    /// old record): an empty group's offsets expire relative to it.
    pub state_timestamp: Option<i64>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with the time each
    /// expires unless it rejoins (KIP-394).
    pub(super) pending_members: HashMap<String, i64>,
    /// group.instance.id -> member id.
    pub(super) static_members: HashMap<String, String>,
    pub(super) join_deadline: Option<i64>,
    pub(super) initial_delay: Option<InitialDelay>,
    pub(super) new_member_added: bool,
    pub offsets: BTreeMap<(String, i32), CommittedOffset>,
}

impl Group {
    pub fn new(id: &str, now: i64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            state_timestamp: Some(now),
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            join_deadline: None,
            initial_delay: None,
            new_member_added: false,
            offsets: BTreeMap::new(),
        }
    }

    pub fn is(&self, state: GroupState) -> bool {
        self.state == state
    }

    pub(super) fn transition(&mut self, state: GroupState, now: i64) {
        self.state = state;
        self.state_timestamp = Some(now);
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    pub(super) fn add(&mut self, member: Member) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members.insert(instance.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        self.members.insert(member.member_id.clone(), member);
    }

    pub(super) fn remove(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader = self.members.keys().next().cloned();
        }
        Some(member)
    }

    /// Every member has rejoined and no member id handed out is still to come back.
    pub(super) fn all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(Member::is_awaiting_join)
    }

    /// The longest rebalance timeout of the members: how long a join may take.
    pub(super) fn rebalance_timeout_ms(&self) -> i64 {
        self.members.values().map(|m| i64::from(m.rebalance_timeout_ms)).max().unwrap_or(0)
    }

    /// The protocols every member supports, in the first member's order.
    pub(super) fn candidate_protocols(&self) -> Vec<&str> {
        let Some(first) = self.members.values().next() else { return Vec::new() };
        first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect()
    }

    /// The protocol the members vote for (each its first choice among those
    /// all support); ties go to the earlier candidate.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes = vec![0usize; candidates.len()];
        for m in self.members.values() {
            if let Some(choice) = m.vote(&candidates) {
                if let Some(i) = candidates.iter().position(|c| *c == choice) {
                    votes[i] += 1;
                }
            }
        }
        let best = votes.iter().enumerate().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))?.0;
        candidates.get(best).map(|s| s.to_string())
    }

    /// Whether a member with these protocols may join (Kafka's
    /// `supportsProtocols`): an empty group takes any non-empty list; otherwise
    /// the type must match and one protocol must be supported by all the
    /// others.
    pub(super) fn supports_protocols(
        &self,
        protocol_type: &str,
        protocols: &[Protocol],
        member_id: &str,
    ) -> bool {
        if protocols.is_empty() || protocol_type.is_empty() {
            return false;
        }
        let others: Vec<&Member> = self.members.values().filter(|m| m.member_id != member_id).collect();
        if others.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|p| others.iter().all(|m| m.supports(&p.name)))
    }

    /// The group as its metadata record keeps it, with `assignment` (the one
    /// being stored) in place of the members' current ones if given.
    pub(super) fn snapshot(&self, assignment: Option<&HashMap<String, Bytes>>) -> GroupMetadataValue {
        let protocol = self.protocol_name.clone();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp.unwrap_or(-1),
            members: self
                .members
                .values()
                .map(|m| MemberMetadata {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout: m.rebalance_timeout_ms,
                    session_timeout: m.session_timeout_ms,
                    subscription: protocol
                        .as_deref()
                        .and_then(|p| m.metadata(p))
                        .map(|b| b.to_vec())
                        .unwrap_or_default(),
                    assignment: assignment
                        .and_then(|a| a.get(&m.member_id))
                        .unwrap_or(&m.assignment)
                        .to_vec(),
                })
                .collect(),
        }
    }

    /// A group from its metadata record (Kafka's `GroupMetadata.loadGroup`):
    /// Stable if it had members, else Empty; its members' heartbeats are due
    /// a session from `now`.
    pub(super) fn restore(id: &str, v: GroupMetadataValue, now: i64) -> Group {
        let mut g = Group::new(id, now);
        g.state = if v.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
        g.state_timestamp = (v.current_state_timestamp >= 0).then_some(v.current_state_timestamp);
        g.generation_id = v.generation;
        g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        g.protocol_name = v.protocol.clone();
        g.leader = v.leader;
        for m in v.members {
            let mut member = Member {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout,
                session_timeout_ms: m.session_timeout,
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                protocols: v
                    .protocol
                    .iter()
                    .map(|p| Protocol { name: p.clone(), metadata: Bytes::from(m.subscription.clone()) })
                    .collect(),
                assignment: Bytes::from(m.assignment),
                awaiting_join: None,
                awaiting_sync: None,
                is_new: false,
                heartbeat_deadline: 0,
            };
            member.heartbeat(now);
            if let Some(instance) = &m.group_instance_id {
                g.static_members.insert(instance.clone(), m.member_id.clone());
            }
            g.members.insert(m.member_id, member);
        }
        if g.leader.as_ref().is_some_and(|l| !g.members.contains_key(l)) {
            g.leader = g.members.keys().next().cloned();
        }
        g
    }

    /// The topics the members subscribe to, for a group of protocol type
    /// "consumer" (Kafka's ConsumerProtocolSubscription, read by the same
    /// codec as the group member's); None if any member's metadata does not parse.
    /// Only OffsetDelete needs this; assignments stay opaque.
    pub(super) fn subscribed_topics(&self) -> Option<Vec<String>> {
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = Vec::new();
        for m in self.members.values() {
            topics.extend(decode_subscription(m.metadata(protocol)?).ok()?);
        }
        Some(topics)
    }
}
