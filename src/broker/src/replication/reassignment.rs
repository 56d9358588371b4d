//! Partition reassignment (KIP-455, as Kafka's ZooKeeper-mode controller
//! makes it). AlterPartitionReassignments names a target replica list (TRS)
//! for a partition whose replicas are ORS; the controller writes the topic
//! znode with the assignment TRS + (ORS - TRS) and, in Kafka's JSON,
//! `adding_replicas` TRS - ORS and `removing_replicas` ORS - TRS, then bumps
//! the partition's leader epoch so that every replica applies the new set:
//! the adding ones create the partition and follow, the leader counts them
//! as followers. Once every TRS member is in the ISR, the controller's pass
//! finishes it: leadership moves into TRS if it is outside, the ISR loses
//! the removed replicas (one state write), then the assignment becomes TRS
//! and the sets are emptied (one topic write). A removed replica stops and
//! empties its copy of the partition. Cancelling (a null target) goes back to
//! ORS at once. ListPartitionReassignments reads the sets.

use kafka_protocol::ResponseError as E;
use zookeeper_client::{Client, Error as ZkError};

use super::controller::{self, ControllerState, Fenced};
use super::view::ClusterView;
use super::znodes::{self, PartitionState, ReplicaSets};
use super::{refusal, view, Controlling, Replication};
use crate::logline::log;

/// One partition's outcome: its Kafka code and, for a refusal, why.
pub type Reassigned = ((String, i32), i16, Option<String>);

/// A partition and the replicas it is to move to (`None`: cancel its move).
pub type Target = ((String, i32), Option<Vec<i32>>);

/// An ongoing reassignment: the partition, its replicas, adding, removing.
pub type Ongoing = ((String, i32), Vec<i32>, Vec<i32>, Vec<i32>);

/// How often a partition's change is tried again after a znode changed under it.
const ATTEMPTS: usize = 3;

impl Replication {
    /// Starts (a target) or cancels (`None`) the reassignment of each
    /// partition, on the controller.
    pub async fn alter_reassignments(
        &self,
        wanted: Vec<Target>,
        allow_replication_factor_change: bool,
    ) -> Result<Vec<Reassigned>, (i16, String)> {
        let Controlling { client, mut guard } = self.controlling().await?;
        let Some(ctl) = guard.as_mut() else { return Err(self.not_controller()) };
        let mut results = Vec::with_capacity(wanted.len());
        for ((topic, p), target) in wanted {
            let mut outcome = Err((E::UnknownServerError.code(), Some(format!("{topic}-{p} kept changing"))));
            for _ in 0..ATTEMPTS {
                let view = view::read(&client).await.map_err(refusal)?;
                let step = match &target {
                    Some(trs) => {
                        start(&client, ctl, &view, &topic, p, trs, allow_replication_factor_change).await
                    }
                    None => cancel(&client, ctl, &view, &topic, p).await,
                };
                match step {
                    Ok(Some(done)) => {
                        outcome = done;
                        break;
                    }
                    Ok(None) => continue,
                    Err(Fenced::Deposed) => {
                        *guard = None;
                        return Err(self.not_controller());
                    }
                    Err(Fenced::Zk(e)) => {
                        outcome = Err((E::UnknownServerError.code(), Some(format!("ZooKeeper: {e}"))));
                        break;
                    }
                }
            }
            let (code, message) = match outcome {
                Ok(()) => (0, None),
                Err(refused) => refused,
            };
            results.push(((topic, p), code, message));
        }
        Ok(results)
    }

    /// `/admin/reassign_partitions`, on the controller: its moves not yet
    /// started are started; once each of its partitions has its target as
    /// its replicas (or its topic is gone), the znode is deleted, as Kafka's
    /// controller deletes it. A znode that is not Kafka's JSON is deleted
    /// with a log line.
    pub(super) async fn legacy_reassignments(&self, client: &Client) {
        let view = self.view();
        if view.controller != Some(self.node_id) {
            return;
        }
        let (data, stat) = match client.get_data(znodes::REASSIGN_PARTITIONS).await {
            Ok(found) => found,
            Err(ZkError::NoNode) => return,
            Err(e) => return log("warn", "reassign_partitions_read_failed", &[("error", &e)]),
        };
        let Some(targets) = znodes::legacy_reassignment_from_json(&data) else {
            log("warn", "reassign_partitions_invalid", &[("path", &znodes::REASSIGN_PARTITIONS)]);
            let _ = client.delete(znodes::REASSIGN_PARTITIONS, Some(stat.version)).await;
            return;
        };
        let replicas = |(t, p): &(String, i32)| view.replicas(t, *p).map(<[i32]>::to_vec);
        let reassigning = |(t, p): &(String, i32)| view.topics.get(t).is_some_and(|tv| tv.reassigning(*p));
        let to_start: Vec<Target> = targets
            .iter()
            .filter(|(key, rs)| replicas(key).is_some_and(|now| now != *rs) && !reassigning(key))
            .map(|(key, rs)| (key.clone(), Some(rs.clone())))
            .collect();
        if !to_start.is_empty() {
            match self.alter_reassignments(to_start, true).await {
                Ok(results) => {
                    for ((topic, p), code, message) in results.into_iter().filter(|r| r.1 != 0) {
                        let why = message.unwrap_or_default();
                        let fields: [(&str, &dyn std::fmt::Display); 4] =
                            [("topic", &topic), ("partition", &p), ("error", &code), ("why", &why)];
                        log("warn", "reassign_partitions_refused", &fields);
                    }
                }
                Err((code, message)) => {
                    log("warn", "reassign_partitions_failed", &[("error", &code), ("why", &message)])
                }
            }
            return;
        }
        let done =
            targets.iter().all(|(key, rs)| replicas(key).is_none_or(|now| now == *rs && !reassigning(key)));
        if done && client.delete(znodes::REASSIGN_PARTITIONS, Some(stat.version)).await.is_ok() {
            log("info", "reassign_partitions_completed", &[("partitions", &targets.len())]);
        }
    }

    /// The ongoing reassignments of `partitions` (`None`: all), on the controller.
    pub fn list_reassignments(
        &self,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<Ongoing>, (i16, String)> {
        let view = self.view();
        if view.controller != Some(self.node_id) {
            return Err(self.not_controller());
        }
        let wanted: Vec<(String, i32)> = partitions.unwrap_or_else(|| {
            view.topics
                .iter()
                .flat_map(|(name, t)| {
                    t.adding.keys().chain(t.removing.keys()).map(move |&p| (name.clone(), p))
                })
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect()
        });
        Ok(wanted
            .into_iter()
            .filter_map(|(name, p)| {
                let t = view.topics.get(&name)?;
                let replicas = t.assignment.get(usize::try_from(p).ok()?)?.clone();
                t.reassigning(p).then(|| {
                    let set = |s: &ReplicaSets| s.get(&p).cloned().unwrap_or_default();
                    ((name.clone(), p), replicas, set(&t.adding), set(&t.removing))
                })
            })
            .collect())
    }
}

/// A refusal: Kafka's code and why.
type Refused = (i16, Option<String>);

/// `Ok(None)`: a znode changed under the write; decide again on a new view.
type Step = Result<Option<Result<(), Refused>>, Fenced>;

fn refused(code: E, why: String) -> Step {
    Ok(Some(Err((code.code(), Some(why)))))
}

/// The partition's original replicas (its assignment less those being added)
/// and its state, as the view has them.
fn partition<'a>(
    view: &'a ClusterView,
    topic: &str,
    p: i32,
) -> Result<(Vec<i32>, &'a view::VersionedState), (E, String)> {
    let unknown = || (E::UnknownTopicOrPartition, format!("The partition {topic}-{p} does not exist."));
    let t = view.topics.get(topic).ok_or_else(unknown)?;
    let rs = t.assignment.get(usize::try_from(p).map_err(|_| unknown())?).ok_or_else(unknown)?;
    let adding = t.adding.get(&p);
    let ors = rs.iter().copied().filter(|r| !adding.is_some_and(|a| a.contains(r))).collect();
    let state = view
        .state(topic, p)
        .ok_or_else(|| (E::LeaderNotAvailable, format!("{topic}-{p} has no leader yet")))?;
    Ok((ors, state))
}

async fn start(
    client: &Client,
    ctl: &ControllerState,
    view: &ClusterView,
    topic: &str,
    p: i32,
    trs: &[i32],
    allow_replication_factor_change: bool,
) -> Step {
    let (ors, current) = match partition(view, topic, p) {
        Ok(found) => found,
        Err((code, why)) => return refused(code, why),
    };
    let invalid = |why: String| refused(E::InvalidReplicaAssignment, why);
    if trs.is_empty() {
        return invalid("Empty replica list specified in partition reassignment.".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = trs.iter().find(|r| !seen.insert(**r)) {
        return invalid(format!(
            "Duplicate replica ids in partition reassignment replica list: {trs:?} ({dup})"
        ));
    }
    let dead: Vec<i32> = trs.iter().copied().filter(|&r| !view.is_live(r)).collect();
    if !dead.is_empty() {
        return invalid(format!("Replica assignment has brokers that are not alive. Replica list: {trs:?}, dead brokers: {dead:?}"));
    }
    if !allow_replication_factor_change && trs.len() != ors.len() {
        return refused(
            E::InvalidReplicationFactor,
            format!(
                "The replication factor is changed from {} to {} but that is not allowed.",
                ors.len(),
                trs.len()
            ),
        );
    }
    let t = &view.topics[topic];
    let mut assignment = t.assignment.clone();
    let rs: Vec<i32> = trs.iter().copied().chain(ors.iter().copied().filter(|r| !trs.contains(r))).collect();
    assignment[p as usize] = rs.clone();
    let (mut adding, mut removing) = (t.adding.clone(), t.removing.clone());
    let add: Vec<i32> = trs.iter().copied().filter(|r| !ors.contains(r)).collect();
    let remove: Vec<i32> = ors.iter().copied().filter(|r| !trs.contains(r)).collect();
    for (sets, wanted) in [(&mut adding, add), (&mut removing, remove)] {
        if wanted.is_empty() {
            sets.remove(&p);
        } else {
            sets.insert(p, wanted);
        }
    }
    if !write_topic(client, ctl, topic, t.zk_version, &assignment, &adding, &removing).await? {
        return Ok(None);
    }
    log(
        "info",
        "reassignment_started",
        &[
            ("topic", &topic),
            ("partition", &p),
            ("replicas", &format!("{rs:?}")),
            ("target", &format!("{trs:?}")),
        ],
    );
    // Every replica applies the new set at the next leader epoch: the leader
    // counts the new ones as followers, they create the partition and fetch.
    let s = &current.state;
    let bumped = PartitionState::new(ctl.epoch, s.leader, s.leader_epoch + 1, s.isr.clone());
    controller::write_state(client, ctl, topic, p, &bumped, Some(current.zk_version)).await?;
    Ok(Some(Ok(())))
}

async fn cancel(client: &Client, ctl: &ControllerState, view: &ClusterView, topic: &str, p: i32) -> Step {
    let (ors, _) = match partition(view, topic, p) {
        Ok(found) => found,
        Err((code, why)) => return refused(code, why),
    };
    if !view.topics[topic].reassigning(p) {
        return refused(
            E::NoReassignmentInProgress,
            format!("no reassignment of {topic}-{p} is in progress"),
        );
    }
    Ok(finish(client, ctl, view, topic, p, &ors).await?.then_some(Ok(())))
}

/// Ends the reassignment of `topic`-`p` at `target`: leadership moved into
/// it if outside, the ISR cut to it (one state write), then the assignment
/// made `target` and the sets emptied. `Ok(false)`: a znode changed meanwhile.
pub(super) async fn finish(
    client: &Client,
    ctl: &ControllerState,
    view: &ClusterView,
    topic: &str,
    p: i32,
    target: &[i32],
) -> Result<bool, Fenced> {
    let Some(t) = view.topics.get(topic) else { return Ok(false) };
    let Some(current) = view.state(topic, p) else { return Ok(false) };
    let s = &current.state;
    let in_target = |r: &i32| target.contains(r);
    let leader = if in_target(&s.leader) && view.is_live(s.leader) {
        s.leader
    } else {
        target.iter().copied().find(|r| view.is_live(*r) && s.isr.contains(r)).unwrap_or(s.leader)
    };
    let isr: Vec<i32> = s.isr.iter().copied().filter(|r| *r == leader || in_target(r)).collect();
    if leader != s.leader || isr != s.isr {
        let new = PartitionState::new(ctl.epoch, leader, s.leader_epoch + 1, isr);
        if !controller::write_state(client, ctl, topic, p, &new, Some(current.zk_version)).await? {
            return Ok(false);
        }
    }
    let mut assignment = t.assignment.clone();
    assignment[p as usize] = target.to_vec();
    let (mut adding, mut removing) = (t.adding.clone(), t.removing.clone());
    adding.remove(&p);
    removing.remove(&p);
    if !write_topic(client, ctl, topic, t.zk_version, &assignment, &adding, &removing).await? {
        return Ok(false);
    }
    log(
        "info",
        "reassignment_completed",
        &[("topic", &topic), ("partition", &p), ("replicas", &format!("{target:?}")), ("leader", &leader)],
    );
    Ok(true)
}

/// The controller's pass over ongoing reassignments: each whose target is
/// all in the ISR is finished. How many were.
pub(super) async fn complete(
    client: &Client,
    ctl: &ControllerState,
    view: &ClusterView,
) -> Result<usize, Fenced> {
    let mut done = 0;
    for (name, t) in &view.topics {
        let ongoing: Vec<i32> = t.adding.keys().chain(t.removing.keys()).copied().collect();
        for p in ongoing.into_iter().collect::<std::collections::BTreeSet<_>>() {
            let target = t.target(p);
            let Some(s) = view.state(name, p) else { continue };
            if !target.is_empty() && target.iter().all(|r| s.state.isr.contains(r)) {
                // A later pass reads the topic znode this one changed.
                if finish(client, ctl, view, name, p, &target).await? {
                    done += 1;
                    break;
                }
            }
        }
    }
    Ok(done)
}

/// Writes a topic znode's assignment and reassignment sets under the
/// controller epoch check, conditional on `version`. `Ok(false)`: changed.
async fn write_topic(
    client: &Client,
    ctl: &ControllerState,
    topic: &str,
    version: i32,
    assignment: &[Vec<i32>],
    adding: &ReplicaSets,
    removing: &ReplicaSets,
) -> Result<bool, Fenced> {
    let path = znodes::topic_path(topic);
    let (data, stat) = match client.get_data(&path).await {
        Ok(d) => d,
        Err(ZkError::NoNode) => return Ok(false),
        Err(e) => return Err(Fenced::Zk(e)),
    };
    if stat.version != version {
        return Ok(false);
    }
    let Some(json) = znodes::reassignment_replaced(&data, assignment, adding, removing) else {
        return Ok(false);
    };
    controller::write_checked(client, ctl, &path, &json, version).await
}
