//! Offsets on the group side: who may commit (Kafka's `validateOffsetCommit`)
//! and which offsets have expired (KIP-211: an empty group's offsets are kept
//! `offsets.retention.minutes` from when it became empty; a group that only
//! stores offsets keeps each that long from its commit).

use super::group::{Group, GroupState};
use super::rebalance::validate_member;
use seglog_core::error::kafka_codes::*;

/// Whether a commit with this generation and member may go ahead in `g`.
pub fn validate_commit(
    g: &mut Group,
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
    now: i64,
) -> Result<(), i16> {
    if g.is(GroupState::Dead) {
        return Err(COORDINATOR_NOT_AVAILABLE);
    }
    if generation >= 0 || !member_id.is_empty() || instance.is_some() {
        validate_member(g, member_id, instance)?;
        if generation != g.generation_id {
            return Err(ILLEGAL_GENERATION);
        }
    } else if !g.is(GroupState::Empty) {
        // A group with members takes commits only from its members.
        return Err(UNKNOWN_MEMBER_ID);
    }
    match g.state {
        GroupState::CompletingRebalance => Err(REBALANCE_IN_PROGRESS),
        _ => {
            // A commit is as good as a heartbeat.
            if let Some(m) = g.members.get_mut(member_id) {
                m.heartbeat(now);
            }
            Ok(())
        }
    }
}

/// The offsets of `g` that have expired at `now`.
pub fn expired_offsets(g: &Group, now: i64, retention_ms: i64) -> Vec<(String, i32)> {
    let base: Box<dyn Fn(i64) -> i64> = match (&g.protocol_type, g.state) {
        (Some(_), GroupState::Empty) => {
            let since = g.state_timestamp;
            Box::new(move |commit_ts| since.unwrap_or(commit_ts))
        }
        (None, _) => Box::new(|commit_ts| commit_ts),
        // Groups with members keep their offsets (Kafka also expires those of
        // topics a Stable consumer group no longer subscribes to; this one does not).
        _ => return Vec::new(),
    };
    g.offsets
        .iter()
        .filter(|(_, o)| now.saturating_sub(base(o.commit_timestamp)) >= retention_ms)
        .map(|(tp, _)| tp.clone())
        .collect()
}
