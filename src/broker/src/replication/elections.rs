//! Leader elections an admin asks for (ElectLeaders, `kafka-leader-election`),
//! made by the controller as it makes its own: each new state written under
//! the controller epoch, conditional on the state it was decided from.

use std::time::{Duration, Instant};

use kafka_protocol::ResponseError as E;

use super::controller::{self, Election, Fenced};
use super::znodes::PartitionState;
use super::{refusal, view, ClusterView, Controlling, Replication};

/// One partition's outcome: its Kafka code and, for a refusal, why.
pub type Elected = ((String, i32), i16, Option<String>);

/// A refused election: its Kafka code and, unless none was needed, why.
type Refused = (i16, Option<String>);

/// How often a partition's election is decided again after its state changed
/// under it (a concurrent ISR change), before the answer says so.
const ATTEMPTS: usize = 3;

impl Replication {
    /// Runs `election` for `partitions` (`None`: every partition) on the
    /// controller, then waits up to `timeout` until this broker's view shows
    /// the new leaders (Kafka's DelayedElectLeader), so that a client's next
    /// Metadata here sees them. `Err`: this broker is not the controller, or
    /// has no ZooKeeper session.
    pub async fn elect_leaders(
        &self,
        election: Election,
        partitions: Option<Vec<(String, i32)>>,
        timeout: Duration,
    ) -> Result<Vec<Elected>, (i16, String)> {
        let Controlling { client, mut guard } = self.controlling().await?;
        let Some(ctl) = guard.as_mut() else { return Err(self.not_controller()) };
        let mut view = view::read(&client).await.map_err(refusal)?;
        let wanted = partitions.unwrap_or_else(|| {
            view.topics
                .iter()
                .flat_map(|(name, t)| (0..t.assignment.len() as i32).map(move |p| (name.clone(), p)))
                .collect()
        });
        let mut results = Vec::with_capacity(wanted.len());
        let mut elected = Vec::new();
        for (topic, p) in wanted {
            let mut outcome = None;
            for _ in 0..ATTEMPTS {
                let decided = decide_election(&view, &topic, p, election, ctl.epoch);
                let (new, version) = match decided {
                    Ok(d) => d,
                    Err(refused) => {
                        outcome = Some(refused);
                        break;
                    }
                };
                match controller::write_state(&client, ctl, &topic, p, &new, Some(version)).await {
                    Ok(true) => {
                        crate::logline::log(
                            "info",
                            "leader_elected",
                            &[
                                ("topic", &topic),
                                ("partition", &p),
                                ("leader", &new.leader),
                                ("leader_epoch", &new.leader_epoch),
                                ("election", &format!("{election:?}")),
                            ],
                        );
                        elected.push((topic.clone(), p, new.leader, new.leader_epoch));
                        outcome = Some((0, None));
                        break;
                    }
                    // Changed since it was read: decide again on a fresh view.
                    Ok(false) => view = view::read(&client).await.map_err(refusal)?,
                    Err(Fenced::Deposed) => {
                        *guard = None;
                        return Err(self.not_controller());
                    }
                    Err(Fenced::Zk(e)) => {
                        outcome = Some((E::UnknownServerError.code(), Some(format!("ZooKeeper: {e}"))));
                        break;
                    }
                }
            }
            let (code, message) = outcome.unwrap_or_else(|| {
                let why = format!("the state of {topic}-{p} kept changing while it was elected: try again");
                (E::UnknownServerError.code(), Some(why))
            });
            results.push(((topic, p), code, message));
        }
        drop(guard);
        self.wait_until_leading(&elected, timeout).await;
        Ok(results)
    }

    /// Waits up to `timeout` until this broker's view shows each elected
    /// partition at its new leader epoch or a later one.
    async fn wait_until_leading(&self, elected: &[(String, i32, i32, i32)], timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut changed = self.changed.subscribe();
        loop {
            let view = self.view();
            let seen = elected.iter().all(|(topic, p, _, epoch)| {
                view.state(topic, *p).is_some_and(|s| s.state.leader_epoch >= *epoch)
            });
            if seen || Instant::now() >= deadline {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), changed.changed()).await;
        }
    }
}

/// The new state of one partition and the znode version it was decided
/// from, or the code and message that refuse it.
fn decide_election(
    view: &ClusterView,
    topic: &str,
    p: i32,
    election: Election,
    controller_epoch: i32,
) -> Result<(PartitionState, i32), Refused> {
    let unknown =
        || (E::UnknownTopicOrPartition.code(), Some(format!("The partition {topic}-{p} does not exist.")));
    let assignment = view.replicas(topic, p).ok_or_else(unknown)?;
    let current = view.state(topic, p).ok_or_else(unknown)?;
    let live = |b: i32| view.is_live(b);
    controller::elect(assignment, &current.state, &live, election, controller_epoch)
        .map(|new| (new, current.zk_version))
        .map_err(|code| {
            let why = match election {
                Election::Preferred => format!(
                    "the preferred replica {} of {topic}-{p} is not live and in the ISR {:?}",
                    assignment.first().copied().unwrap_or(-1),
                    current.state.isr
                ),
                Election::Unclean => format!("no live replica of {topic}-{p} in {assignment:?} to elect"),
            };
            (code, (code != E::ElectionNotNeeded.code()).then_some(why))
        })
}
