//! A consumer's group: where its offsets are committed and, through a broker,
//! which partitions it is assigned. On a store with no broker the group's
//! offsets live in the store's `__consumer_offsets` (the caller holds the
//! lock that keeps the group to one member); through a broker, the member
//! joins with Kafka's classic protocol.

use std::sync::Arc;

use seglog_core::error::{kafka_codes, Error, Result};
use seglog_core::group::{self, CommittedOffsets};
use seglog_core::store::Store;

use crate::group::{Assignment, GroupMember};

use super::source::TopicPartition;

/// The codes with which a coordinator refuses a commit of a generation the
/// group has left behind.
const MOVED_ON: [i16; 3] =
    [kafka_codes::ILLEGAL_GENERATION, kafka_codes::UNKNOWN_MEMBER_ID, kafka_codes::REBALANCE_IN_PROGRESS];

pub enum Membership {
    /// Offsets in a store's `__consumer_offsets`, cached as committed.
    Store { store: Arc<Store>, group: String, committed: CommittedOffsets },
    /// A member through a broker's group coordinator.
    Coordinated(GroupMember),
}

impl Membership {
    /// The group on a store with no broker, its offsets loaded. Records of
    /// `__consumer_offsets` that cannot be parsed are skipped (their count is
    /// the second value).
    pub fn on_store(store: Arc<Store>, group: &str) -> Result<(Membership, usize)> {
        let (committed, skipped) = group::load_committed(&store, group)?;
        Ok((Membership::Store { store, group: group.to_string(), committed }, skipped))
    }

    pub fn coordinated(&self) -> Option<&GroupMember> {
        match self {
            Membership::Coordinated(m) => Some(m),
            Membership::Store { .. } => None,
        }
    }

    /// The committed offsets of `partitions` (all the group's, for None).
    /// Through a broker they are asked afresh: other members commit too.
    pub fn committed(&self, partitions: Option<&[TopicPartition]>) -> Result<CommittedOffsets> {
        match self {
            Membership::Store { committed, .. } => Ok(match partitions {
                None => committed.clone(),
                Some(tps) => {
                    tps.iter().filter_map(|tp| committed.get(tp).map(|c| (tp.clone(), c.clone()))).collect()
                }
            }),
            Membership::Coordinated(member) => member.committed(partitions),
        }
    }

    /// Commits durably. Through a broker, a commit refused because the group
    /// rebalanced since this member joined is `CommitFailed`.
    pub fn commit(&mut self, offsets: &CommittedOffsets) -> Result<()> {
        match self {
            Membership::Store { store, group, committed } => {
                if store.is_read_only() {
                    return Err(Error::ReadOnly("commit"));
                }
                group::commit(store, group, offsets)?;
                committed.extend(offsets.iter().map(|(k, v)| (k.clone(), v.clone())));
                Ok(())
            }
            Membership::Coordinated(member) => {
                let list: Vec<(String, i32, i64, String)> =
                    offsets.iter().map(|((t, p), (o, m))| (t.clone(), *p, *o, m.clone())).collect();
                member.commit(&list).map_err(|e| match e {
                    Error::Kafka { code, message } if MOVED_ON.contains(&code) => Error::CommitFailed {
                        code,
                        message: format!(
                            "commit of group {:?} failed: the group rebalanced since this member joined; \
                             its partitions may be another member's now ({message})",
                            member.config().group_id
                        ),
                    },
                    e => e,
                })
            }
        }
    }

    /// Through a broker: the member's partitions, rejoining first if the
    /// group rebalances. None on a store (the consumer assigns them all).
    pub fn poll_assignment(&self) -> Result<Option<Assignment>> {
        self.coordinated().map(GroupMember::poll_assignment).transpose()
    }

    /// Leaves the group (a static member only stops heart-beating, so that
    /// a restart within its session keeps its partitions, as in Kafka).
    pub fn close(&self, leave: bool) -> Result<()> {
        match self {
            Membership::Store { .. } => Ok(()),
            Membership::Coordinated(member) => {
                if leave && member.config().instance_id.is_none() {
                    let left = member.leave();
                    if left.is_err() {
                        member.close();
                    }
                    left
                } else {
                    member.close();
                    Ok(())
                }
            }
        }
    }
}
