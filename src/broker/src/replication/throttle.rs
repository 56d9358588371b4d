//! Replication throttles, Kafka's `ReplicationQuotaManager`: a byte rate for
//! each side of replication (`leader.replication.throttled.rate`,
//! `follower.replication.throttled.rate`, dynamic broker configs), applied
//! only to the replicas a topic names (`leader.replication.throttled.replicas`,
//! `follower.replication.throttled.replicas`, or `*`) and only while they are
//! outside the ISR, so that catching up a new replica cannot starve the
//! replication that keeps the ISR, nor the clients. Every byte of a throttled
//! replica's replication counts against the rate, in sync or not.
//!
//! - The leader, answering a follower outside the ISR while its rate is over
//!   the bound, holds back that partition's records (the fetch then waits as
//!   one with no data does).
//! - The follower, outside the ISR while its rate is over the bound, leaves
//!   the partition out of its fetch (in a fetch session it is forgotten and
//!   named again later, as Kafka's fetcher does).

use std::time::Duration;

use seglog_core::log::PartitionLog;

use super::Replication;
use crate::config::BrokerConfig;
use crate::dynamic_config::{self, Entities};
use crate::quota::Quota;
use crate::replica_manager::TopicData;

pub struct ReplicationQuotas {
    pub leader: Quota,
    pub follower: Quota,
}

impl ReplicationQuotas {
    pub fn new(config: &BrokerConfig) -> ReplicationQuotas {
        let window = Duration::from_secs(config.replication_quota_window_size_seconds);
        let windows = config.replication_quota_window_num;
        ReplicationQuotas { leader: Quota::new(window, windows), follower: Quota::new(window, windows) }
    }

    /// Takes the bounds broker `node` runs with from the dynamic configs.
    pub fn update(&self, entities: &Entities, node: i32) {
        self.leader.set_bound(dynamic_config::value(entities, node, dynamic_config::LEADER_RATE));
        self.follower.set_bound(dynamic_config::value(entities, node, dynamic_config::FOLLOWER_RATE));
    }
}

impl Replication {
    /// Whether, as `log`'s leader, this broker throttles what it sends the
    /// followers of `log`.
    pub fn leader_throttled(&self, log: &PartitionLog) -> bool {
        log.config().leader_replication_throttled_replicas.covers(log.partition(), self.node_id)
    }

    /// Whether the leader's rate is over its bound now.
    pub fn leader_over_rate(&self) -> bool {
        self.quotas.leader.exceeded()
    }

    /// After a follower's fetch was answered: its throttled replicas' bytes
    /// count against the leader's rate.
    pub fn leader_answered(&self, topics: &[TopicData]) {
        let mut bytes = 0u64;
        for p in topics.iter().flat_map(|t| &t.partitions) {
            if p.held_back {
                self.metrics.leader_held_back.inc();
            }
            if let Some(records) = p.records.as_ref().filter(|_| p.throttled) {
                bytes += records.length;
            }
        }
        if bytes > 0 {
            self.quotas.leader.record(bytes);
            self.metrics.leader_throttled_bytes.inc_by(bytes);
        }
    }

    fn follower_throttled(&self, log: &PartitionLog) -> bool {
        log.config().follower_replication_throttled_replicas.covers(log.partition(), self.node_id)
    }

    /// Whether, as a follower of `log` outside its ISR, this broker leaves it
    /// out of its next fetch.
    pub(super) fn follower_throttles(&self, log: &PartitionLog) -> bool {
        if !self.follower_throttled(log) || !self.quotas.follower.exceeded() {
            return false;
        }
        let in_sync = self
            .view()
            .state(log.topic(), log.partition())
            .is_some_and(|s| s.state.isr.contains(&self.node_id));
        if !in_sync {
            self.metrics.follower_held_back.inc();
        }
        !in_sync
    }

    /// After a fetch brought `bytes` of `log`'s records.
    pub(super) fn follower_fetched_bytes(&self, log: &PartitionLog, bytes: u64) {
        if bytes > 0 && self.follower_throttled(log) {
            self.quotas.follower.record(bytes);
            self.metrics.follower_throttled_bytes.inc_by(bytes);
        }
    }
}
