//! The local partitions (Kafka's `Partition`): each one's role as the view
//! assigns it, and a leader's bookkeeping: its followers (Kafka's `Replica`:
//! log end and when each was last caught up), the ISR with its conditional
//! ZooKeeper writes, the high watermark, and the acks=all wait.
//!
//! Each partition has its own read-write lock, as Kafka's
//! `leaderIsrUpdateLock`: an append holds it shared from the leader check to
//! the high watermark's move, so a role change (which takes it exclusively)
//! never lands between them; a follower's fetch also holds it shared, its
//! bookkeeping under the leader's own small locks (its followers' progress,
//! the pending ISR write), which are never held together.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use kafka_protocol::ResponseError as E;
use seglog_core::log::PartitionLog;
use zookeeper_client::{Client, CreateMode, Error as ZkError};

use super::view::{ClusterView, TopicView};
use super::znodes::{self, PartitionState};
use super::Replication;
use crate::logline::log as note;

/// Makes a local topic's overrides ZooKeeper's (`/config/topics/T`), if it
/// holds the topic and they differ.
pub(super) fn sync_overrides(
    store: &seglog_core::store::Store,
    name: &str,
    wanted: &BTreeMap<String, String>,
) -> seglog_core::Result<()> {
    let Ok(topic) = store.topic(name) else { return Ok(()) };
    if &topic.overrides == wanted {
        return Ok(());
    }
    let mut changes: BTreeMap<String, Option<String>> =
        topic.overrides.keys().filter(|k| !wanted.contains_key(*k)).map(|k| (k.clone(), None)).collect();
    for (k, v) in wanted {
        if topic.overrides.get(k) != Some(v) {
            changes.insert(k.clone(), Some(v.clone()));
        }
    }
    store.alter_topic_config(name, &changes)
}

/// Numbers each leadership a broker takes up.
static LEADERSHIPS: AtomicU64 = AtomicU64::new(1);

/// What this broker is for one partition.
#[derive(Debug, Default)]
pub struct Partition {
    /// The (leader epoch, znode version) of the state last applied.
    applied: Option<(i32, i32)>,
    role: Role,
}

#[derive(Debug, Default)]
enum Role {
    #[default]
    None,
    Leader(LeaderState),
    Follower(FollowerState),
}

#[derive(Debug)]
struct LeaderState {
    /// Which unbroken leadership of this broker this is: kept when only the
    /// epoch moves (the controller dropped a dead follower), new after any
    /// time as a follower. An acks=all write waits within one.
    leadership: u64,
    epoch: i32,
    /// The ISR as ZooKeeper holds it.
    isr: Vec<i32>,
    zk_version: i32,
    controller_epoch: i32,
    /// Where this leader's epoch began: a follower joins the ISR only once
    /// it has reached it (it then holds nothing a past leader wrote alone).
    epoch_start: i64,
    followers: Mutex<BTreeMap<i32, Replica>>,
    /// An ISR write in flight (only one at a time, as in Kafka); an
    /// expansion counts toward the high watermark at once.
    pending: Mutex<Option<Vec<i32>>>,
    min_insync: usize,
}

#[derive(Debug, Clone, Copy)]
struct Replica {
    /// The follower's log end as its last fetch said; -1 until it fetched
    /// from this leader.
    leo: i64,
    last_caught_up: Instant,
    last_fetch_leader_leo: i64,
    last_fetch: Instant,
}

#[derive(Debug, Clone)]
pub struct FollowerState {
    pub leader: i32,
    pub epoch: i32,
    /// Whether the log was cut back to where it agrees with this leader.
    pub truncated: bool,
}

/// One partition a fetcher follows.
#[derive(Clone)]
pub struct Followed {
    pub topic: String,
    pub partition: i32,
    pub epoch: i32,
    pub truncated: bool,
    pub log: Arc<PartitionLog>,
}

impl LeaderState {
    /// The ISR the high watermark counts: with a pending expansion, the larger one.
    fn maximal_isr(&self) -> Vec<i32> {
        match &*self.pending.lock() {
            Some(p) if p.len() > self.isr.len() => p.clone(),
            _ => self.isr.clone(),
        }
    }
}

/// What an append as the leader hands back besides its own result: the
/// leadership it was made in (what an acks=all wait waits within).
pub type Leadership = u64;

/// A local partition behind its own lock, by (topic, partition).
pub(super) type SharedPartition = Arc<RwLock<Partition>>;
pub(super) type PartitionKey = (String, i32);

impl Replication {
    /// The local partition, if this broker has a role (or had one) for it.
    fn partition(&self, topic: &str, partition: i32) -> Option<SharedPartition> {
        self.partitions.read().get(&(topic.to_string(), partition)).cloned()
    }

    /// The local partitions with their keys, the map's lock released.
    fn all_partitions(&self) -> Vec<(PartitionKey, SharedPartition)> {
        self.partitions.read().iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Runs `append` as the partition's leader: the leader check, with
    /// `acks` = -1 the `min.insync.replicas` check, the append and the high
    /// watermark's move all under the partition's lock held shared, so no
    /// role change comes between them. Kafka's code when refused.
    pub fn append_as_leader<T>(
        &self,
        log: &PartitionLog,
        acks: i16,
        append: impl FnOnce() -> T,
    ) -> Result<(T, Leadership), i16> {
        let (topic, partition) = (log.topic(), log.partition());
        let Some(p) = self.partition(topic, partition) else {
            return Err(self.not_here(topic, partition));
        };
        let p = p.read();
        let Role::Leader(l) = &p.role else { return Err(E::NotLeaderOrFollower.code()) };
        if acks == -1 && l.isr.len() < l.min_insync {
            return Err(E::NotEnoughReplicas.code());
        }
        let out = append();
        self.advance_high_watermark(log, l);
        Ok((out, l.leadership))
    }

    /// The code for a partition this broker has no role for.
    fn not_here(&self, topic: &str, partition: i32) -> i16 {
        let known = self.view().replicas(topic, partition).is_some();
        if known {
            E::NotLeaderOrFollower.code()
        } else {
            E::UnknownTopicOrPartition.code()
        }
    }
}

impl Replication {
    /// Makes the local replicas follow `view`: topics this broker holds a
    /// replica of are created in the store, and each partition's newer state
    /// (a newer leader epoch, or the same epoch with a newer ISR) applied.
    pub(super) fn apply(self: &Arc<Self>, view: &ClusterView) {
        // Partitions reassigned away from this broker (also a topic's last one
        // here) stop being replicated and are emptied.
        let moved: Vec<PartitionKey> = self
            .partitions
            .read()
            .keys()
            .filter(|(t, p)| {
                view.topics.get(t).is_some_and(|topic| {
                    !topic.assignment.get(*p as usize).is_some_and(|r| r.contains(&self.node_id))
                })
            })
            .cloned()
            .collect();
        for (topic, p) in moved {
            self.drop_replica(&topic, p);
        }
        for (name, topic) in &view.topics {
            if !topic.assignment.iter().any(|r| r.contains(&self.node_id)) {
                continue;
            }
            if let Err(e) = self.ensure_local_topic(name, topic) {
                note("warn", "replica_create_failed", &[("topic", name), ("error", &e)]);
                continue;
            }
            for (p, replicas) in topic.assignment.iter().enumerate() {
                if !replicas.contains(&self.node_id) {
                    continue;
                }
                if let Some(Some(s)) = topic.states.get(p) {
                    self.apply_state(name, p as i32, replicas, &s.state, s.zk_version);
                }
            }
        }
        // Topics deleted from the cluster go from this broker too.
        let gone: BTreeSet<String> = self
            .partitions
            .read()
            .keys()
            .filter(|(t, _)| !view.topics.contains_key(t))
            .map(|(t, _)| t.clone())
            .collect();
        for name in gone {
            self.partitions.write().retain(|(t, _), _| *t != name);
            match self.store.delete_topic(&name) {
                Ok(()) | Err(seglog_core::Error::UnknownTopic(_)) => {
                    note("info", "replica_deleted", &[("topic", &name)])
                }
                Err(e) => note("warn", "replica_delete_failed", &[("topic", &name), ("error", &e)]),
            }
        }
        self.bump();
    }

    /// A partition reassigned away from this broker: it stops leading or
    /// following it, and empties its copy (Kafka's StopReplica with delete).
    fn drop_replica(&self, topic: &str, partition: i32) {
        let key = (topic.to_string(), partition);
        let Some(shared) = self.partitions.write().remove(&key) else { return };
        shared.write().role = Role::None;
        let emptied =
            self.store.partition(topic, partition).and_then(|log| log.truncate_fully_and_start_at(0));
        match emptied {
            Ok(()) => note("info", "replica_removed", &[("topic", &topic), ("partition", &partition)]),
            Err(e) => note(
                "warn",
                "replica_remove_failed",
                &[("topic", &topic), ("partition", &partition), ("error", &e)],
            ),
        }
    }

    /// Creates (or grows) the local topic `view` describes, under its
    /// cluster-wide topic id: a partition directory holding that topic id's
    /// records (a Kafka broker's, in the log directory it shared) is adopted.
    fn ensure_local_topic(&self, name: &str, view: &TopicView) -> seglog_core::Result<()> {
        let (partitions, config, config_version) =
            (view.assignment.len() as i32, &view.config, view.config_version);
        match self.store.topic(name) {
            Ok(t) if t.partitions.len() as i32 >= partitions => {
                self.apply_config(name, config, config_version)
            }
            Ok(_) => {
                self.store.create_partitions(name, partitions)?;
                self.apply_config(name, config, config_version)
            }
            Err(seglog_core::Error::UnknownTopic(_)) => {
                match self.store.create_cluster_topic(name, partitions, config, view.topic_id.as_deref()) {
                    Ok(_) | Err(seglog_core::Error::TopicExists(_)) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Makes the local topic's overrides `config`, read at znode version
    /// `version`, unless a newer version was applied already.
    pub(super) fn apply_config(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
        version: i32,
    ) -> seglog_core::Result<()> {
        let mut applied = self.config_versions.lock();
        if applied.get(name).is_some_and(|&v| v > version) {
            return Ok(());
        }
        sync_overrides(&self.store, name, config)?;
        applied.insert(name.to_string(), version);
        Ok(())
    }

    fn apply_state(
        self: &Arc<Self>,
        topic: &str,
        partition: i32,
        replicas: &[i32],
        s: &PartitionState,
        version: i32,
    ) {
        let key = (topic.to_string(), partition);
        let log = match self.store.partition(topic, partition) {
            Ok(l) => l,
            Err(e) => {
                note(
                    "warn",
                    "replica_missing",
                    &[("topic", &topic), ("partition", &partition), ("error", &e)],
                );
                return;
            }
        };
        let shared = self.partitions.write().entry(key).or_default().clone();
        let mut r = shared.write();
        if let Role::Leader(l) = &r.role {
            // A reassignment adds followers, or removes them, with or
            // without a new state.
            let now = Instant::now();
            let mut followers = l.followers.lock();
            followers.retain(|b, _| replicas.contains(b));
            for &b in replicas.iter().filter(|&&b| b != self.node_id) {
                followers.entry(b).or_insert(Replica {
                    leo: -1,
                    last_caught_up: now,
                    last_fetch_leader_leo: -1,
                    last_fetch: now,
                });
            }
        }
        let newer = match r.applied {
            None => true,
            Some((epoch, v)) => s.leader_epoch > epoch || (s.leader_epoch == epoch && version > v),
        };
        if !newer {
            return;
        }
        let same_epoch = r.applied.is_some_and(|(e, _)| e == s.leader_epoch);
        r.applied = Some((s.leader_epoch, version));
        log.set_replicated(true);
        if s.leader == self.node_id {
            if let Role::Leader(l) = &mut r.role {
                // Still the leader: a new ISR (ours, or the controller's), and
                // perhaps a new epoch (the controller bumps it when it drops a
                // dead follower). Followers' progress and waiting writes stay.
                if !same_epoch {
                    if let Err(e) = log.set_leader_epoch(s.leader_epoch) {
                        note(
                            "error",
                            "leader_epoch_failed",
                            &[("topic", &topic), ("partition", &partition), ("error", &e)],
                        );
                        r.role = Role::None;
                        return;
                    }
                    l.epoch = s.leader_epoch;
                    l.epoch_start = log.log_end_offset();
                }
                l.isr = s.isr.clone();
                l.zk_version = version;
                l.controller_epoch = s.controller_epoch;
                *l.pending.lock() = None;
                self.advance_high_watermark(&log, l);
                return;
            }
            if let Err(e) = log.set_leader_epoch(s.leader_epoch) {
                note(
                    "error",
                    "become_leader_failed",
                    &[("topic", &topic), ("partition", &partition), ("error", &e)],
                );
                r.role = Role::None;
                return;
            }
            let now = Instant::now();
            let followers = replicas
                .iter()
                .filter(|&&b| b != self.node_id)
                .map(|&b| {
                    (b, Replica { leo: -1, last_caught_up: now, last_fetch_leader_leo: -1, last_fetch: now })
                })
                .collect();
            let l = LeaderState {
                leadership: LEADERSHIPS.fetch_add(1, Ordering::Relaxed),
                epoch: s.leader_epoch,
                isr: s.isr.clone(),
                zk_version: version,
                controller_epoch: s.controller_epoch,
                epoch_start: log.log_end_offset(),
                followers: Mutex::new(followers),
                pending: Mutex::new(None),
                min_insync: log.config().min_insync_replicas.max(1) as usize,
            };
            self.advance_high_watermark(&log, &l);
            note(
                "info",
                "became_leader",
                &[
                    ("topic", &topic),
                    ("partition", &partition),
                    ("leader_epoch", &s.leader_epoch),
                    ("isr", &format!("{:?}", s.isr)),
                    ("log_end", &log.log_end_offset()),
                ],
            );
            r.role = Role::Leader(l);
        } else if self.leaving.load(Ordering::SeqCst) {
            // In a controlled shutdown: no fetching (Kafka's StopReplica), so
            // that no leader takes this broker back into its ISR.
            r.role = Role::None;
        } else {
            let was = match &r.role {
                Role::Follower(f) if f.leader == s.leader && same_epoch => Some(f.truncated),
                _ => None,
            };
            r.role = Role::Follower(FollowerState {
                leader: s.leader,
                epoch: s.leader_epoch,
                truncated: was.unwrap_or(false),
            });
            if was.is_none() {
                note(
                    "info",
                    "became_follower",
                    &[
                        ("topic", &topic),
                        ("partition", &partition),
                        ("leader", &s.leader),
                        ("leader_epoch", &s.leader_epoch),
                    ],
                );
            }
            if s.leader >= 0 && self.fetchers.lock().insert(s.leader) {
                tokio::spawn(super::fetcher::run(self.clone(), s.leader));
            }
        }
    }

    /// Stops following every partition (a controlled shutdown's first step).
    pub(super) fn stop_following(&self) {
        for (_, p) in self.all_partitions() {
            let mut r = p.write();
            if matches!(r.role, Role::Follower(_)) {
                r.role = Role::None;
            }
        }
        self.bump();
    }

    /// After a session ended: this broker leads and follows nothing until a
    /// new session reads the state again (a broker whose session expired may
    /// have lost any leadership meanwhile, so it takes no write). Its last view
    /// stays, as Kafka keeps its metadata cache: clients asking it for
    /// Metadata still find every topic, and their retries of the fenced
    /// writes go on until the view names the new leaders.
    pub(super) fn lose_everything(&self) {
        for (_, p) in self.all_partitions() {
            let mut r = p.write();
            r.role = Role::None;
            r.applied = None;
        }
        *self.client.lock() = None;
        self.bump();
    }

    /// The partitions this broker follows from `leader`.
    pub(super) fn followed_from(&self, leader: i32) -> Vec<Followed> {
        let mut out = Vec::new();
        for ((topic, partition), p) in self.all_partitions() {
            let r = p.read();
            if let Role::Follower(f) = &r.role {
                if f.leader == leader {
                    if let Ok(log) = self.store.partition(&topic, partition) {
                        out.push(Followed {
                            topic: topic.clone(),
                            partition,
                            epoch: f.epoch,
                            truncated: f.truncated,
                            log,
                        });
                    }
                }
            }
        }
        out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        out
    }

    /// Records that a followed partition's log agrees with its leader of `epoch`.
    pub(super) fn set_truncated(&self, topic: &str, partition: i32, epoch: i32, truncated: bool) {
        let Some(p) = self.partition(topic, partition) else { return };
        let mut r = p.write();
        if let Role::Follower(f) = &mut r.role {
            if f.epoch == epoch {
                f.truncated = truncated;
            }
        }
    }

    pub(super) fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Ticks on every change of this broker's roles or cluster view.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The partitions of `topic` this broker leads, each with its leadership
    /// (a new one each time it becomes leader).
    pub fn led_partitions(&self, topic: &str) -> Vec<(i32, u64)> {
        let mut out: Vec<(i32, u64)> = self
            .all_partitions()
            .into_iter()
            .filter(|((t, _), _)| t == topic)
            .filter_map(|((_, p), shared)| match &shared.read().role {
                Role::Leader(l) => Some((p, l.leadership)),
                _ => None,
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether this broker leads the partition, in the epoch the client
    /// names (-1: any). Kafka's codes otherwise.
    pub fn leader_check(&self, topic: &str, partition: i32, current_epoch: i32) -> Result<(), i16> {
        let Some(p) = self.partition(topic, partition) else { return Err(self.not_here(topic, partition)) };
        let r = p.read();
        match &r.role {
            Role::Leader(l) => epoch_check(current_epoch, l.epoch),
            _ => Err(E::NotLeaderOrFollower.code()),
        }
    }

    /// Ok if a consumer may read the partition here in `current_epoch`: at
    /// its leader, or (KIP-392) at a follower whose log was cut back to where
    /// it agrees with its leader of that epoch.
    pub fn read_check(&self, topic: &str, partition: i32, current_epoch: i32) -> Result<(), i16> {
        let Some(p) = self.partition(topic, partition) else { return Err(self.not_here(topic, partition)) };
        let r = p.read();
        match &r.role {
            Role::Leader(l) => epoch_check(current_epoch, l.epoch),
            Role::Follower(f) if f.truncated => epoch_check(current_epoch, f.epoch),
            _ => Err(E::NotLeaderOrFollower.code()),
        }
    }

    /// KIP-392's `RackAwareReplicaSelector`, at the leader, with
    /// `replica.selector.class` set: for a consumer in rack `rack` other than
    /// this broker's, the in-sync follower in that rack with the most of the
    /// log (at least to `fetch_offset`); `None` to read here.
    pub fn preferred_read_replica(
        &self,
        topic: &str,
        partition: i32,
        rack: &str,
        fetch_offset: i64,
    ) -> Option<i32> {
        if !self.config.rack_aware_reads {
            return None;
        }
        let view = self.view();
        let rack_of = |b: i32| view.brokers.get(&b).and_then(|r| r.rack.as_deref());
        if rack_of(self.node_id) == Some(rack) {
            return None;
        }
        let shared = self.partition(topic, partition)?;
        let r = shared.read();
        let Role::Leader(l) = &r.role else { return None };
        let followers = l.followers.lock();
        l.isr
            .iter()
            .filter(|&&b| b != self.node_id && rack_of(b) == Some(rack))
            .filter_map(|b| followers.get(b).filter(|f| f.leo >= fetch_offset).map(|f| (f.leo, *b)))
            .max()
            .map(|(_, b)| b)
    }

    /// The leader's side of a follower's fetch from `fetch_offset` (its log
    /// end): Kafka's caught-up tracking, the high watermark, and an ISR
    /// expansion once the follower reached the high watermark in this epoch.
    /// Returns `None` unless `replica` is one of the partition's followers
    /// (which read up to the log end), else whether it was in the ISR.
    pub fn follower_fetched(
        self: &Arc<Self>,
        log: &PartitionLog,
        replica: i32,
        fetch_offset: i64,
    ) -> Option<bool> {
        let key = (log.topic().to_string(), log.partition());
        let shared = self.partition(&key.0, key.1)?;
        let r = shared.read();
        let Role::Leader(l) = &r.role else { return None };
        let in_sync = l.isr.contains(&replica);
        {
            let mut followers = l.followers.lock();
            let p = followers.get_mut(&replica)?;
            let now = Instant::now();
            let leo = log.log_end_offset();
            if fetch_offset >= leo {
                p.last_caught_up = now;
            } else if fetch_offset >= p.last_fetch_leader_leo {
                p.last_caught_up = p.last_fetch;
            }
            p.leo = fetch_offset;
            p.last_fetch_leader_leo = leo;
            p.last_fetch = now;
        }
        self.advance_high_watermark(log, l);
        let hw = log.high_watermark();
        let joins =
            !l.maximal_isr().contains(&replica) && fetch_offset >= hw && fetch_offset >= l.epoch_start;
        let mut pending = l.pending.lock();
        if joins && pending.is_none() {
            let mut isr = l.isr.clone();
            isr.push(replica);
            *pending = Some(isr.clone());
            let state = PartitionState::new(l.controller_epoch, self.node_id, l.epoch, isr);
            let (version, epoch) = (l.zk_version, l.epoch);
            drop(pending);
            drop(r);
            let me = self.clone();
            tokio::spawn(async move { me.write_isr(key, epoch, state, version, "expand").await });
        }
        Some(in_sync)
    }

    /// Kafka's `maybeIncrementLeaderHW`: the smallest log end among the
    /// leader and its (maximal) ISR; unknown follower log ends hold it.
    fn advance_high_watermark(&self, log: &PartitionLog, l: &LeaderState) {
        let mut hw = log.log_end_offset();
        // The leader's two small locks are never held together.
        let isr = l.maximal_isr();
        let followers = l.followers.lock();
        for r in isr {
            if r == self.node_id {
                continue;
            }
            match followers.get(&r) {
                Some(p) if p.leo >= 0 => hw = hw.min(p.leo),
                _ => return,
            }
        }
        let before = log.high_watermark();
        if let Ok(after) = log.set_high_watermark(hw) {
            if after > before {
                self.purgatory.changed(log.topic(), log.partition());
            }
        }
    }

    /// NOT_ENOUGH_REPLICAS before an acks=all append when the ISR is smaller
    /// than `min.insync.replicas`.
    /// Waits until the high watermark covers `end` (the offset after the
    /// append) in the leadership that appended it. 0 when committed;
    /// NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum;
    /// NOT_LEADER_OR_FOLLOWER if leadership moved; REQUEST_TIMED_OUT.
    pub async fn wait_committed(
        &self,
        log: &PartitionLog,
        leadership: u64,
        end: i64,
        timeout: Duration,
    ) -> i16 {
        let deadline = Instant::now() + timeout;
        // Woken by this partition's high watermark (its watch) or by a role
        // change anywhere (the cluster's changes), never by other partitions.
        let watch = self.purgatory.watch([(log.topic(), log.partition())]);
        let mut changes = self.changes();
        let key = (log.topic().to_string(), log.partition());
        loop {
            changes.borrow_and_update();
            {
                let Some(p) = self.partition(&key.0, key.1) else { return E::NotLeaderOrFollower.code() };
                let r = p.read();
                let Role::Leader(l) = &r.role else {
                    return E::NotLeaderOrFollower.code();
                };
                if l.leadership != leadership {
                    return E::NotLeaderOrFollower.code();
                }
                if log.high_watermark() >= end {
                    return if l.maximal_isr().len() < l.min_insync {
                        E::NotEnoughReplicasAfterAppend.code()
                    } else {
                        0
                    };
                }
            }
            let now = Instant::now();
            if now >= deadline {
                return E::RequestTimedOut.code();
            }
            let mut stop = self.stopping.clone();
            tokio::select! {
                _ = tokio::time::timeout(deadline - now, watch.changed()) => {}
                _ = changes.changed() => {}
                _ = async { let _ = stop.wait_for(|s| *s).await; } => return E::NotLeaderOrFollower.code(),
            }
        }
    }

    /// The leader epoch a partition this broker leads is in.
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> Option<i32> {
        match &self.partition(topic, partition)?.read().role {
            Role::Leader(l) => Some(l.epoch),
            _ => None,
        }
    }

    /// Drops followers not caught up within `replica.lag.time.max.ms` from
    /// the ISR of every partition this broker leads (one write each).
    pub(super) async fn shrink_isrs(self: &Arc<Self>, _client: &Client) {
        let lag = Duration::from_millis(self.config.replica_lag_time_max_ms);
        let mut writes = Vec::new();
        for ((topic, partition), p) in self.all_partitions() {
            let r = p.read();
            let Role::Leader(l) = &r.role else { continue };
            if l.pending.lock().is_some() {
                continue;
            }
            let Ok(log) = self.store.partition(&topic, partition) else { continue };
            let leo = log.log_end_offset();
            let out: BTreeSet<i32> = {
                let followers = l.followers.lock();
                l.isr
                    .iter()
                    .filter(|&&b| b != self.node_id)
                    .filter(|b| {
                        followers.get(b).is_some_and(|p| p.leo != leo && p.last_caught_up.elapsed() > lag)
                    })
                    .copied()
                    .collect()
            };
            if out.is_empty() {
                continue;
            }
            let isr: Vec<i32> = l.isr.iter().copied().filter(|b| !out.contains(b)).collect();
            let mut pending = l.pending.lock();
            if pending.is_some() {
                continue; // an expansion started meanwhile: its write goes first
            }
            *pending = Some(isr.clone());
            let state = PartitionState::new(l.controller_epoch, self.node_id, l.epoch, isr);
            writes.push(((topic.clone(), partition), l.epoch, state, l.zk_version));
        }
        for (key, epoch, state, version) in writes {
            self.write_isr(key, epoch, state, version, "shrink").await;
        }
    }

    /// Writes a leader's new ISR to its state znode, conditional on the
    /// version it last read (the legacy ZooKeeper path). On success it
    /// counts; on a version mismatch the change is dropped and the newer
    /// state, when the watch brings it, decides.
    async fn write_isr(
        &self,
        key: (String, i32),
        epoch: i32,
        state: PartitionState,
        version: i32,
        why: &str,
    ) {
        let Some(client) = self.client() else { return self.clear_pending(&key, epoch) };
        let path = znodes::state_path(&key.0, key.1);
        match client.set_data(&path, &state.to_json(), Some(version)).await {
            Ok(stat) => {
                let counter =
                    if why == "shrink" { &self.metrics.isr_shrinks } else { &self.metrics.isr_expands };
                counter.inc();
                note(
                    "info",
                    "isr_changed",
                    &[
                        ("topic", &key.0),
                        ("partition", &key.1),
                        ("why", &why),
                        ("isr", &format!("{:?}", state.isr)),
                    ],
                );
                if self.view().has_kafka_broker() {
                    notify_isr_change(&client, &key).await;
                }
                let Ok(log) = self.store.partition(&key.0, key.1) else { return };
                if let Some(p) = self.partition(&key.0, key.1) {
                    let mut r = p.write();
                    let r = &mut *r;
                    if let Role::Leader(l) = &mut r.role {
                        if l.epoch == epoch {
                            l.isr = state.isr.clone();
                            l.zk_version = stat.version;
                            *l.pending.lock() = None;
                            r.applied = Some((epoch, stat.version));
                            self.advance_high_watermark(&log, l);
                        }
                    }
                }
                self.bump();
            }
            Err(ZkError::BadVersion | ZkError::NoNode) => {
                note(
                    "info",
                    "isr_change_refused",
                    &[("topic", &key.0), ("partition", &key.1), ("why", &why)],
                );
                self.clear_pending(&key, epoch);
                // The state moved on without this broker seeing it: read it again
                // (as Kafka's leader does) instead of retrying on a stale version.
                self.stale.store(true, std::sync::atomic::Ordering::Release);
            }
            Err(e) => {
                note("warn", "isr_change_failed", &[("topic", &key.0), ("partition", &key.1), ("error", &e)]);
                self.clear_pending(&key, epoch);
            }
        }
    }

    /// The leader and under-replicated partition gauges.
    pub(super) fn count_partitions(&self) {
        let view = self.view();
        let (mut leading, mut under) = (0, 0);
        for ((topic, partition), p) in self.all_partitions() {
            if let Role::Leader(l) = &p.read().role {
                leading += 1;
                if view.replicas(&topic, partition).is_some_and(|rs| l.isr.len() < rs.len()) {
                    under += 1;
                }
            }
        }
        self.metrics.leader_partitions.set(leading);
        self.metrics.under_replicated_partitions.set(under);
    }

    fn clear_pending(&self, key: &(String, i32), epoch: i32) {
        let Some(p) = self.partition(&key.0, key.1) else { return };
        let r = p.read();
        if let Role::Leader(l) = &r.role {
            if l.epoch == epoch {
                *l.pending.lock() = None;
            }
        }
    }
}

/// Tells a Kafka controller that partition `key`'s ISR changed, as a Kafka
/// leader at inter.broker.protocol.version < 2.7 does: a sequential znode
/// under `/isr_change_notification`, which the controller reads, answers
/// with UpdateMetadata to every broker, and deletes. Without it a Kafka
/// controller's cache, and its brokers' metadata, keep the old ISR.
async fn notify_isr_change(client: &Client, key: &(String, i32)) {
    let persistent = CreateMode::PersistentSequential.with_acls(zookeeper_client::Acls::anyone_all());
    let path = format!("{}/isr_change_", znodes::ISR_CHANGE_NOTIFICATION);
    let data = znodes::isr_change_to_json(std::slice::from_ref(key));
    let mut made = client.create(&path, &data, &persistent).await.map(|_| ());
    if matches!(made, Err(ZkError::NoNode)) {
        let parent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        made = match client.mkdir(znodes::ISR_CHANGE_NOTIFICATION, &parent).await {
            Ok(()) | Err(ZkError::NodeExists) => client.create(&path, &data, &persistent).await.map(|_| ()),
            Err(e) => Err(e),
        };
    }
    if let Err(e) = made {
        note(
            "warn",
            "isr_change_notification_failed",
            &[("topic", &key.0), ("partition", &key.1), ("error", &e)],
        );
    }
}

/// Kafka's check of a request's `current_leader_epoch` against the epoch this
/// replica knows: -1 (not said) passes, an older one is fenced, a newer one
/// unknown here yet.
fn epoch_check(current_epoch: i32, epoch: i32) -> Result<(), i16> {
    if current_epoch >= 0 && current_epoch < epoch {
        Err(E::FencedLeaderEpoch.code())
    } else if current_epoch > epoch {
        Err(E::UnknownLeaderEpoch.code())
    } else {
        Ok(())
    }
}
