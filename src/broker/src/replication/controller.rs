//! The controller (Kafka's ZooKeeper mode): one broker wins `/controller` by
//! a multi that also bumps `/controller_epoch`, and from then on every write
//! it makes is a multi that first checks that epoch's znode version, so a
//! deposed controller can write nothing. Its job here: give new partitions a
//! state, elect a leader when one dies (the first live ISR member in
//! assignment order, never outside the ISR unless unclean election is on),
//! drop dead brokers from ISRs, and move leadership back to preferred
//! replicas.

use std::collections::BTreeMap;

use zookeeper_client::{Client, CreateMode, Error as ZkError, MultiWriteError, MultiWriteResult};

use super::view::ClusterView;
use super::znodes::{self, PartitionState};
use crate::logline::log;

/// What the controller holds while it is one.
#[derive(Debug, Clone)]
pub struct ControllerState {
    pub epoch: i32,
    /// The version of `/controller_epoch` its writes are conditional on.
    pub epoch_zk_version: i32,
    /// Each live broker's registration zxid as last seen: a new one means the
    /// broker restarted or its session expired in between (a bounce).
    pub known: BTreeMap<i32, i64>,
    /// The brokers in a controlled shutdown, with the registration it was
    /// asked under: forgotten once that registration is gone.
    pub shutting_down: BTreeMap<i32, i64>,
}

/// Gives up `/controller` if this broker holds it (conditional on the
/// version read, so a successor's node is never deleted).
pub async fn resign(client: &Client, node_id: i32) -> Result<(), ZkError> {
    match client.get_data(znodes::CONTROLLER).await {
        Ok((d, stat)) if znodes::controller_from_json(&d) == Some(node_id) => {
            match client.delete(znodes::CONTROLLER, Some(stat.version)).await {
                Ok(()) | Err(ZkError::NoNode | ZkError::BadVersion) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Ok(_) | Err(ZkError::NoNode) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Tries to become the controller. `Ok(None)`: another broker is.
pub async fn try_elect(client: &Client, node_id: i32) -> Result<Option<ControllerState>, ZkError> {
    let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let (epoch, version) = loop {
        match client.get_data(znodes::CONTROLLER_EPOCH).await {
            Ok((d, stat)) => {
                let epoch =
                    std::str::from_utf8(&d).ok().and_then(|s| s.trim().parse::<i32>().ok()).unwrap_or(0);
                break (epoch, stat.version);
            }
            Err(ZkError::NoNode) => match client.create(znodes::CONTROLLER_EPOCH, b"0", &persistent).await {
                Ok(_) | Err(ZkError::NodeExists) => continue,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
    };
    let ephemeral = CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    let mut multi = client.new_multi_writer();
    multi.add_create(
        znodes::CONTROLLER,
        &znodes::controller_to_json(node_id, seglog_core::clock::now_ms()),
        &ephemeral,
    )?;
    multi.add_set_data(znodes::CONTROLLER_EPOCH, (epoch + 1).to_string().as_bytes(), Some(version))?;
    match multi.commit().await {
        Ok(results) => {
            let epoch_zk_version = results
                .iter()
                .find_map(|r| match r {
                    MultiWriteResult::SetData { stat } => Some(stat.version),
                    _ => None,
                })
                .unwrap_or(version + 1);
            log("info", "controller_elected", &[("node", &node_id), ("controller_epoch", &(epoch + 1))]);
            Ok(Some(ControllerState {
                epoch: epoch + 1,
                epoch_zk_version,
                known: BTreeMap::new(),
                shutting_down: BTreeMap::new(),
            }))
        }
        Err(MultiWriteError::OperationFailed {
            source: ZkError::NodeExists | ZkError::BadVersion, ..
        }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The new state of one partition, or `None` if it should stay as it is.
/// `live` says whether a broker counts as alive in this pass; `leaving`,
/// whether it is in a controlled shutdown: a leaving broker leads only where
/// no other ISR member is live, and leaves every ISR it is not the leader of.
pub fn decide(
    assignment: &[i32],
    current: Option<&PartitionState>,
    live: &dyn Fn(i32) -> bool,
    leaving: &dyn Fn(i32) -> bool,
    unclean: bool,
    prefer: bool,
    controller_epoch: i32,
) -> Option<PartitionState> {
    let staying = |r: i32| live(r) && !leaving(r);
    let Some(s) = current else {
        let replicas: Vec<i32> = assignment.iter().copied().filter(|&r| live(r)).collect();
        let leader = assignment.iter().copied().find(|&r| staying(r)).or(replicas.first().copied())?;
        return Some(PartitionState::new(controller_epoch, leader, 0, replicas));
    };
    let next = |leader: i32, isr: Vec<i32>| {
        Some(PartitionState::new(controller_epoch, leader, s.leader_epoch + 1, isr))
    };
    let in_isr = |r: &i32| s.isr.contains(r);
    // The ISR under a given leader: its live members, leaving ones dropped.
    let isr_under =
        |leader: i32| -> Vec<i32> { s.isr.iter().copied().filter(|&r| r == leader || staying(r)).collect() };
    let successor = assignment.iter().copied().find(|r| staying(*r) && in_isr(r));
    if s.leader < 0 || !live(s.leader) {
        if let Some(leader) = successor.or_else(|| assignment.iter().copied().find(|r| live(*r) && in_isr(r)))
        {
            return next(leader, isr_under(leader));
        }
        if unclean {
            let any = assignment.iter().copied().find(|&r| staying(r));
            if let Some(leader) = any.or_else(|| assignment.iter().copied().find(|&r| live(r))) {
                return next(leader, vec![leader]);
            }
        }
        // No one to elect: offline until an ISR member returns. The ISR keeps
        // its last members (it is never empty), so that one of them is chosen.
        return (s.leader != -1)
            .then(|| PartitionState::new(controller_epoch, -1, s.leader_epoch + 1, s.isr.clone()));
    }
    if leaving(s.leader) {
        if let Some(leader) = successor {
            return next(leader, isr_under(leader));
        }
    }
    let isr = isr_under(s.leader);
    if isr.len() < s.isr.len() {
        return next(s.leader, isr);
    }
    if prefer {
        if let Some(&preferred) = assignment.first() {
            if preferred != s.leader && staying(preferred) && in_isr(&preferred) {
                return next(preferred, s.isr.clone());
            }
        }
    }
    None
}

/// The elections an admin may ask for (ElectLeaders' election type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// The first assigned replica leads, if it is live and in the ISR.
    Preferred,
    /// A partition with no live leader gets one: an ISR member if one lives,
    /// else any live replica (what unclean.leader.election.enable would do).
    Unclean,
}

/// What an election an admin asks for makes of a partition: its new state,
/// or the Kafka code that says why there is none (ELECTION_NOT_NEEDED when
/// the partition already has the leader asked for).
pub fn elect(
    assignment: &[i32],
    current: &PartitionState,
    live: &dyn Fn(i32) -> bool,
    election: Election,
    controller_epoch: i32,
) -> Result<PartitionState, i16> {
    use kafka_protocol::ResponseError as E;
    match election {
        Election::Preferred => {
            let Some(&preferred) = assignment.first() else {
                return Err(E::PreferredLeaderNotAvailable.code());
            };
            if preferred == current.leader {
                return Err(E::ElectionNotNeeded.code());
            }
            if !live(preferred) || !current.isr.contains(&preferred) {
                return Err(E::PreferredLeaderNotAvailable.code());
            }
            Ok(PartitionState::new(
                controller_epoch,
                preferred,
                current.leader_epoch + 1,
                current.isr.clone(),
            ))
        }
        Election::Unclean => {
            if current.leader >= 0 && live(current.leader) {
                return Err(E::ElectionNotNeeded.code());
            }
            match decide(assignment, Some(current), live, &|_| false, true, false, controller_epoch) {
                Some(s) if s.leader >= 0 => Ok(s),
                _ => Err(E::EligibleLeadersNotAvailable.code()),
            }
        }
    }
}

/// Why a controller pass ended early.
pub enum Fenced {
    /// Another broker's controller epoch is newer: this one stops.
    Deposed,
    Zk(ZkError),
}

impl From<ZkError> for Fenced {
    fn from(e: ZkError) -> Self {
        Fenced::Zk(e)
    }
}

/// One pass over every partition; writes what `decide` says. Bounced brokers
/// count as dead for this pass (their ISR places and leaderships go, as for
/// a broker that died), and as alive from the next.
pub async fn reconcile(
    client: &Client,
    ctl: &mut ControllerState,
    view: &ClusterView,
    unclean_default: bool,
    prefer: bool,
) -> Result<usize, Fenced> {
    let bounced: Vec<i32> = view
        .brokers
        .iter()
        .filter(|(id, b)| ctl.known.get(id).is_some_and(|&epoch| epoch != b.epoch))
        .map(|(id, _)| *id)
        .collect();
    let live = |b: i32| view.is_live(b) && !bounced.contains(&b);
    ctl.shutting_down.retain(|id, epoch| view.brokers.get(id).is_some_and(|b| b.epoch == *epoch));
    let shutting_down = ctl.shutting_down.clone();
    let leaving = |b: i32| shutting_down.contains_key(&b);
    let mut written = 0;
    for (name, topic) in &view.topics {
        let unclean = topic
            .config
            .get("unclean.leader.election.enable")
            .map_or(unclean_default, |v| v.trim().eq_ignore_ascii_case("true"));
        for (p, assignment) in topic.assignment.iter().enumerate() {
            let p = p as i32;
            let current = topic.states.get(p as usize).and_then(Option::as_ref);
            let Some(new) =
                decide(assignment, current.map(|c| &c.state), &live, &leaving, unclean, prefer, ctl.epoch)
            else {
                continue;
            };
            let ok = write_state(client, ctl, name, p, &new, current.map(|c| c.zk_version)).await?;
            if ok {
                written += 1;
                log(
                    "info",
                    "partition_state",
                    &[
                        ("topic", name),
                        ("partition", &p),
                        ("leader", &new.leader),
                        ("leader_epoch", &new.leader_epoch),
                        ("isr", &format!("{:?}", new.isr)),
                    ],
                );
            }
        }
    }
    ctl.known = view.brokers.iter().map(|(id, b)| (*id, b.epoch)).collect();
    if written == 0 {
        // Reassignments finish on a view the pass above left as it was.
        written += super::reassignment::complete(client, ctl, view).await?;
    }
    Ok(written)
}

/// Writes one state under the controller epoch check: `Ok(false)` if the
/// state changed since it was read (a newer view will come).
pub(super) async fn write_state(
    client: &Client,
    ctl: &ControllerState,
    topic: &str,
    partition: i32,
    state: &PartitionState,
    version: Option<i32>,
) -> Result<bool, Fenced> {
    let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    if version.is_none() {
        for parent in [znodes::partitions_path(topic), znodes::partition_path(topic, partition)] {
            match client.create(&parent, b"", &persistent).await {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let mut multi = client.new_multi_writer();
    multi.add_check_version(znodes::CONTROLLER_EPOCH, ctl.epoch_zk_version)?;
    let path = znodes::state_path(topic, partition);
    match version {
        Some(v) => multi.add_set_data(&path, &state.to_json(), Some(v))?,
        None => multi.add_create(&path, &state.to_json(), &persistent)?,
    }
    match multi.commit().await {
        Ok(_) => Ok(true),
        Err(MultiWriteError::OperationFailed { index: 0, .. }) => Err(Fenced::Deposed),
        Err(MultiWriteError::OperationFailed {
            source: ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode,
            ..
        }) => Ok(false),
        Err(e) => Err(Fenced::Zk(e.into())),
    }
}

/// Sets `path` to `data` under the controller epoch check, conditional on
/// the znode's `version`: `Ok(false)` if it changed since it was read.
pub(super) async fn write_checked(
    client: &Client,
    ctl: &ControllerState,
    path: &str,
    data: &[u8],
    version: i32,
) -> Result<bool, Fenced> {
    let mut multi = client.new_multi_writer();
    multi.add_check_version(znodes::CONTROLLER_EPOCH, ctl.epoch_zk_version)?;
    multi.add_set_data(path, data, Some(version))?;
    match multi.commit().await {
        Ok(_) => Ok(true),
        Err(MultiWriteError::OperationFailed { index: 0, .. }) => Err(Fenced::Deposed),
        Err(MultiWriteError::OperationFailed { source: ZkError::BadVersion | ZkError::NoNode, .. }) => {
            Ok(false)
        }
        Err(e) => Err(Fenced::Zk(e.into())),
    }
}

#[cfg(test)]
#[path = "controller_test.rs"]
mod tests;
