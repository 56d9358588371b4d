//! A member of a classic group (Kafka's `MemberMetadata`): the protocols it
//! supports with their metadata (opaque bytes its client's assignor reads),
//! what the leader assigned it, its timeouts, and the JoinGroup or SyncGroup
//! response it is waiting for.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::{JoinResponse, SyncResponse};

/// One protocol a member supports (an assignor's name) with its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The kind of protocol ("consumer" for consumers, "connect", ...).
    pub protocol_type: String,
    /// In the member's order of preference.
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub(super) awaiting_join: Option<oneshot::Sender<JoinResponse>>,
    pub(super) awaiting_sync: Option<oneshot::Sender<SyncResponse>>,
    /// Joined but not yet through a completed join: it can expire while it waits.
    pub(super) is_new: bool,
    /// When the member is dead unless it heartbeats (or is waiting in a rebalance).
    pub(super) heartbeat_deadline: i64,
}

impl Member {
    /// The member's metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols.iter().find(|p| p.name == protocol).map(|p| &p.metadata)
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }

    /// Its first choice among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols.iter().map(|p| p.name.as_str()).find(|n| candidates.contains(n))
    }

    pub fn is_awaiting_join(&self) -> bool {
        self.awaiting_join.is_some()
    }

    pub fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }

    /// Whether the member counts as alive at `now` (Kafka's
    /// `hasSatisfiedHeartbeat`): members waiting in a rebalance need no
    /// heartbeats, except new ones, which can expire while they wait.
    pub(super) fn alive_at(&self, now: i64) -> bool {
        if !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some()) {
            return true;
        }
        now < self.heartbeat_deadline
    }

    pub(super) fn heartbeat(&mut self, now: i64) {
        self.heartbeat_deadline = now.saturating_add(i64::from(self.session_timeout_ms));
    }
}
