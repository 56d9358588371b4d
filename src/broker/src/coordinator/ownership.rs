//! Which groups this coordinator serves, and how its writes are made safe.
//!
//! A single broker serves every group. A cluster member serves the groups
//! whose partition of `__consumer_offsets` it leads, as Kafka's
//! GroupMetadataManager does: when it becomes a partition's leader it loads
//! that partition's groups and offsets (answering COORDINATOR_LOAD_IN_PROGRESS
//! meanwhile, and already while ZooKeeper names it leader, or its view has
//! not read the partition's state yet, before it has taken the partition up), and when it stops leading it, it drops them (members waiting
//! on a join or a sync are told NOT_COORDINATOR). Every other group gets
//! NOT_COORDINATOR, which sends clients back to FindCoordinator. A cluster
//! member's writes are appended as the partition's leader and answered once
//! its in-sync replicas have them (`offsets.commit.timeout.ms`), so an
//! acknowledged commit outlives the coordinator.

use super::*;

use crate::replication::Replication;
use seglog_core::group::{offsets_partition, OFFSETS_TOPIC};
use seglog_core::log::PartitionLog;

/// A partition of `__consumer_offsets` this coordinator leads, in the
/// leadership it was taken up in (a new one each time it becomes leader).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owned {
    Loading(u64),
    Loaded(u64),
}

impl Owned {
    fn leadership(self) -> u64 {
        match self {
            Owned::Loading(l) | Owned::Loaded(l) => l,
        }
    }
}

/// A write appended to a replicated partition: to be answered once its
/// in-sync replicas have it.
pub(super) struct Replicated {
    log: Arc<PartitionLog>,
    leadership: u64,
    end: i64,
}

/// Kafka's answer to a group API whose write failed with `code` (its
/// GroupMetadataManager's mapping of the append's error).
pub(super) fn group_code(code: i16) -> i16 {
    match code {
        NOT_LEADER_OR_FOLLOWER | KAFKA_STORAGE_ERROR => NOT_COORDINATOR,
        UNKNOWN_TOPIC_OR_PARTITION | NOT_ENOUGH_REPLICAS | NOT_ENOUGH_REPLICAS_AFTER_APPEND => {
            COORDINATOR_NOT_AVAILABLE
        }
        MESSAGE_TOO_LARGE | RECORD_LIST_TOO_LARGE => INVALID_COMMIT_OFFSET_SIZE,
        other => other,
    }
}

impl Coordinator {
    /// Makes a cluster member's coordinator (see `new`) append through
    /// `replication`, as each partition's leader. Set once, before any request.
    pub fn set_replication(&self, replication: Arc<Replication>) {
        let _ = self.replication.set(replication);
    }

    /// Ok if this coordinator serves `group` now; Kafka's code otherwise.
    pub(super) fn serving(&self, group: &str) -> std::result::Result<(), i16> {
        if self.stopped() {
            return Err(COORDINATOR_NOT_AVAILABLE);
        }
        if self.serves_all {
            return Ok(());
        }
        let owned = self.partition_for(group).and_then(|p| self.owned.lock().get(&p).copied());
        match owned {
            Some(Owned::Loaded(_)) => Ok(()),
            Some(Owned::Loading(_)) => Err(COORDINATOR_LOAD_IN_PROGRESS),
            None if self.about_to_lead(group) => Err(COORDINATOR_LOAD_IN_PROGRESS),
            None => Err(NOT_COORDINATOR),
        }
    }

    /// Whether this broker may be `group`'s coordinator though it has not
    /// taken its partition up: ZooKeeper already names it the leader, or its
    /// view has not yet read the partition's state (or the topic) at all.
    /// Any broker's FindCoordinator answers from its own view, which can be a
    /// moment ahead of this one's; a client sent here then should wait for
    /// the load, not look for another coordinator.
    fn about_to_lead(&self, group: &str) -> bool {
        let Some(r) = self.replication.get() else { return false };
        let view = r.view();
        let Some(topic) = view.topics.get(OFFSETS_TOPIC) else { return true };
        let p = offsets_partition(group, topic.assignment.len() as i32);
        view.state(OFFSETS_TOPIC, p).is_none_or(|s| s.state.leader == r.node_id())
    }

    /// The partition of `__consumer_offsets` that holds `group`, if the store has the topic.
    fn partition_for(&self, group: &str) -> Option<i32> {
        let topic = self.store.topic(OFFSETS_TOPIC).ok()?;
        Some(offsets_partition(group, topic.partitions.len() as i32))
    }

    /// Takes up and drops partitions of `__consumer_offsets` as this broker
    /// comes to lead them and stops, until `stop`.
    pub async fn follow_leadership(self: Arc<Self>, r: Arc<Replication>, mut stop: watch::Receiver<bool>) {
        let mut changes = r.subscribe();
        loop {
            changes.borrow_and_update();
            self.take_partitions(r.led_partitions(OFFSETS_TOPIC)).await;
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
        }
    }

    /// Serves exactly the partitions in `led` (partition, leadership): drops
    /// those no longer led (or led anew since), then loads the new ones.
    pub(crate) async fn take_partitions(self: &Arc<Self>, led: Vec<(i32, u64)>) {
        let led: HashMap<i32, u64> = led.into_iter().collect();
        let (load, unload) = {
            let mut owned = self.owned.lock();
            let unload: Vec<i32> =
                owned.iter().filter(|(p, o)| led.get(p) != Some(&o.leadership())).map(|(p, _)| *p).collect();
            for p in &unload {
                owned.remove(p);
            }
            let load: Vec<(i32, u64)> = led.into_iter().filter(|(p, _)| !owned.contains_key(p)).collect();
            for &(p, leadership) in &load {
                owned.insert(p, Owned::Loading(leadership));
            }
            (load, unload)
        };
        for p in unload {
            self.unload(p);
        }
        for (p, leadership) in load {
            let me = self.clone();
            let loaded = blocking(move || me.load_partition(p)).await;
            let mut owned = self.owned.lock();
            match loaded {
                Ok(groups) if owned.get(&p) == Some(&Owned::Loading(leadership)) => {
                    owned.insert(p, Owned::Loaded(leadership));
                    log("info", "group_partition_loaded", &[("partition", &p), ("groups", &groups)]);
                }
                Ok(_) => {}
                Err(e) => {
                    // Not served (NOT_COORDINATOR) until the next leadership.
                    owned.remove(&p);
                    log("warn", "group_partition_load_failed", &[("partition", &p), ("error", &e)]);
                }
            }
        }
    }

    /// Reads partition `p` into the cache (blocking); the number of groups.
    fn load_partition(&self, p: i32) -> Result<usize> {
        let log = self.store.partition(OFFSETS_TOPIC, p)?;
        let (groups, cursor) = storage::load_partition(&log, now_ms())?;
        let n = groups.len();
        self.cursors.lock().insert(p, Arc::new(Mutex::new(cursor)));
        self.groups.lock().extend(groups);
        Ok(n)
    }

    /// Drops partition `p`'s groups: waiting members are told NOT_COORDINATOR.
    fn unload(&self, p: i32) {
        let Ok(topic) = self.store.topic(OFFSETS_TOPIC) else { return };
        let n = topic.partitions.len() as i32;
        let mut dropped = 0;
        self.groups.lock().retain(|id, g| {
            if offsets_partition(id, n) != p {
                return true;
            }
            rebalance::abandon(g, NOT_COORDINATOR);
            dropped += 1;
            false
        });
        self.cursors.lock().remove(&p);
        log("info", "group_partition_unloaded", &[("partition", &p), ("groups", &dropped)]);
    }

    /// Appends coordinator records durably; a cluster member's as the
    /// partition's leader (with every in-sync replica required, as for
    /// acks=all), returning what to wait on.
    pub(super) fn append(
        &self,
        log: &Arc<PartitionLog>,
        records: &[CoordinatorRecord],
    ) -> Result<Option<Replicated>> {
        let Some(r) = self.replication.get() else {
            seglog_core::group::append_records(log, records)?;
            return Ok(None);
        };
        let (info, leadership) = r
            .append_as_leader(log, -1, || seglog_core::group::append_records(log, records))
            .map_err(|code| Error::Kafka {
                code,
                message: format!("{}-{}: not appended as its leader", log.topic(), log.partition()),
            })?;
        let info = info?;
        Ok(Some(Replicated { log: log.clone(), leadership, end: info.last_offset + 1 }))
    }

    /// Waits until the in-sync replicas have a write (at once for one not
    /// replicated); the group APIs' code if they do not in time.
    pub(super) async fn replicated(&self, write: Option<Replicated>) -> std::result::Result<(), i16> {
        let (Some(w), Some(r)) = (write, self.replication.get()) else { return Ok(()) };
        let timeout = Duration::from_millis(self.cfg.commit_timeout_ms);
        match r.wait_committed(&w.log, w.leadership, w.end, timeout).await {
            NONE => Ok(()),
            code => Err(group_code(code)),
        }
    }
}
