//! Topic configuration with Kafka's names, defaults and bounds. Values arrive as
//! strings (as in Kafka's own config files); anything unknown or out of range is
//! refused with a message naming the key, the value and what was expected.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::record::TimestampType;

pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

/// Which replicas of a topic replicate under a throttle (Kafka's
/// `leader.replication.throttled.replicas` and
/// `follower.replication.throttled.replicas`): `*` for all, or
/// `partition:broker` pairs. The value is kept as given, as Kafka shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThrottledReplicas {
    pub value: String,
    all: bool,
    listed: Vec<(i32, i32)>,
}

impl ThrottledReplicas {
    pub fn parse(key: &str, value: &str) -> Result<ThrottledReplicas> {
        let entries: Vec<&str> = value.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
        let pair = |e: &str| {
            let (p, b) = e.split_once(':')?;
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            (digits(p) && digits(b)).then(|| Some((p.parse().ok()?, b.parse().ok()?)))?
        };
        // The value shown as Kafka shows a parsed list: `[a, b]`.
        let refused = || {
            Error::InvalidConfig(format!(
                "Invalid value [{}] for configuration {key}: {key} must be the literal '*' or a list of \
                 replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                entries.join(", ")
            ))
        };
        let (all, listed) = match entries.as_slice() {
            ["*"] => (true, Vec::new()),
            _ => (false, entries.iter().map(|e| pair(e).ok_or_else(refused)).collect::<Result<_>>()?),
        };
        Ok(ThrottledReplicas { value: value.to_string(), all, listed })
    }

    /// Whether `broker`'s replica of `partition` is throttled.
    pub fn covers(&self, partition: i32, broker: i32) -> bool {
        self.all || self.listed.contains(&(partition, broker))
    }

    pub fn is_empty(&self) -> bool {
        !self.all && self.listed.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_index_bytes: usize,
    pub index_interval_bytes: u64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub cleanup_policy: CleanupPolicy,
    pub message_timestamp_type: TimestampType,
    /// How far before / after the append time a CreateTime timestamp may be.
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub max_message_bytes: usize,
    pub file_delete_delay_ms: i64,
    pub delete_retention_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    /// How long a producer id stays known to the log after its last batch
    /// (Kafka's `producer.id.expiration.ms`). A broker-wide setting in Kafka,
    /// so here a store key (not a topic key) that every topic inherits.
    pub producer_id_expiration_ms: i64,
    /// Replicas that must be in sync for an acks=all write to be taken
    /// (Kafka's `min.insync.replicas`; used by a replicated broker).
    pub min_insync_replicas: i32,
    /// Whether a replica outside the ISR may become leader when no ISR member
    /// is alive, at the price of losing what only the ISR held.
    pub unclean_leader_election_enable: bool,
    /// Replicas whose leader holds back records from followers outside the
    /// ISR while its `leader.replication.throttled.rate` is exceeded.
    pub leader_replication_throttled_replicas: ThrottledReplicas,
    /// Replicas that, as followers outside the ISR, stop fetching while
    /// their broker's `follower.replication.throttled.rate` is exceeded.
    pub follower_replication_throttled_replicas: ThrottledReplicas,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_ms: 7 * DAY_MS,
            segment_index_bytes: 10 << 20,
            index_interval_bytes: 4096,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 7 * DAY_MS,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy { delete: true, compact: false },
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            file_delete_delay_ms: 60_000,
            delete_retention_ms: DAY_MS,
            min_cleanable_dirty_ratio: 0.5,
            producer_id_expiration_ms: crate::producer_state::DEFAULT_PRODUCER_ID_EXPIRATION_MS,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            leader_replication_throttled_replicas: ThrottledReplicas::default(),
            follower_replication_throttled_replicas: ThrottledReplicas::default(),
        }
    }
}

/// Every topic-level key seglog accepts, in Kafka's spelling.
pub const TOPIC_KEYS: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.ms",
    "unclean.leader.election.enable",
];

fn int(key: &str, value: &str, min: i64, max: i64) -> Result<i64> {
    let v: i64 = value
        .trim()
        .parse()
        .map_err(|_| Error::InvalidConfig(format!("{key}: expected an integer, got {value:?}")))?;
    if v < min || v > max {
        return Err(Error::InvalidConfig(format!("{key}: {v} is out of range [{min}, {max}]")));
    }
    Ok(v)
}

impl LogConfig {
    /// Applies `overrides` on top of `self`, refusing unknown keys and bad values.
    pub fn with_overrides(&self, overrides: &BTreeMap<String, String>) -> Result<LogConfig> {
        let mut c = self.clone();
        for (key, value) in overrides {
            c.set(key, value)?;
        }
        Ok(c)
    }

    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        const I32: i64 = i32::MAX as i64;
        match key {
            // Kafka's historic topic-level minimum (a v0 record's overhead): small
            // segments are what tests and retention experiments need.
            "segment.bytes" => self.segment_bytes = int(key, value, 14, I32)? as u64,
            "segment.ms" => self.segment_ms = int(key, value, 1, i64::MAX)?,
            "segment.index.bytes" => self.segment_index_bytes = int(key, value, 12, I32)? as usize,
            "index.interval.bytes" => self.index_interval_bytes = int(key, value, 0, I32)? as u64,
            "flush.messages" => self.flush_messages = int(key, value, 1, i64::MAX)?,
            "flush.ms" => self.flush_ms = int(key, value, 0, i64::MAX)?,
            "retention.ms" => self.retention_ms = int(key, value, -1, i64::MAX)?,
            "retention.bytes" => self.retention_bytes = int(key, value, -1, i64::MAX)?,
            "max.message.bytes" => self.max_message_bytes = int(key, value, 0, I32)? as usize,
            "message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = int(key, value, 0, i64::MAX)?
            }
            "message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = int(key, value, 0, i64::MAX)?
            }
            "file.delete.delay.ms" => self.file_delete_delay_ms = int(key, value, 0, i64::MAX)?,
            "delete.retention.ms" => self.delete_retention_ms = int(key, value, 0, i64::MAX)?,
            "min.insync.replicas" => self.min_insync_replicas = int(key, value, 1, I32)? as i32,
            "unclean.leader.election.enable" => self.unclean_leader_election_enable = boolean(key, value)?,
            "leader.replication.throttled.replicas" => {
                self.leader_replication_throttled_replicas = ThrottledReplicas::parse(key, value)?
            }
            "follower.replication.throttled.replicas" => {
                self.follower_replication_throttled_replicas = ThrottledReplicas::parse(key, value)?
            }
            "min.cleanable.dirty.ratio" => {
                let v: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| Error::InvalidConfig(format!("{key}: expected a number, got {value:?}")))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(Error::InvalidConfig(format!("{key}: {v} is out of range [0, 1]")));
                }
                self.min_cleanable_dirty_ratio = v;
            }
            // Batches are kept as each producer compressed them (Kafka's
            // default); a topic-wide codec that recompresses is not offered.
            "compression.type" => {
                if value.trim() != "producer" {
                    return Err(Error::InvalidConfig(format!(
                        "{key}: only \"producer\" (each batch kept as its producer compressed it) is \
                         supported, got {value:?}"
                    )));
                }
            }
            "cleanup.policy" => {
                let mut p = CleanupPolicy { delete: false, compact: false };
                for part in value.split(',').map(str::trim) {
                    match part {
                        "delete" => p.delete = true,
                        "compact" => p.compact = true,
                        _ => {
                            return Err(Error::InvalidConfig(format!(
                                "{key}: expected delete, compact or \"compact,delete\", got {value:?}"
                            )))
                        }
                    }
                }
                self.cleanup_policy = p;
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => {
                        return Err(Error::InvalidConfig(format!(
                            "{key}: expected CreateTime or LogAppendTime, got {value:?}"
                        )))
                    }
                }
            }
            _ => {
                return Err(Error::InvalidConfig(format!(
                    "unknown topic config key {key:?} (known: {})",
                    TOPIC_KEYS.join(", ")
                )))
            }
        }
        Ok(())
    }

    /// The full configuration as Kafka-named strings (what `describe` shows).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        let policy = match (self.cleanup_policy.compact, self.cleanup_policy.delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        };
        let ts = match self.message_timestamp_type {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        };
        [
            ("cleanup.policy", policy.to_string()),
            ("compression.type", "producer".to_string()),
            ("delete.retention.ms", self.delete_retention_ms.to_string()),
            ("file.delete.delay.ms", self.file_delete_delay_ms.to_string()),
            ("flush.messages", self.flush_messages.to_string()),
            ("flush.ms", self.flush_ms.to_string()),
            (
                "follower.replication.throttled.replicas",
                self.follower_replication_throttled_replicas.value.clone(),
            ),
            ("index.interval.bytes", self.index_interval_bytes.to_string()),
            (
                "leader.replication.throttled.replicas",
                self.leader_replication_throttled_replicas.value.clone(),
            ),
            ("max.message.bytes", self.max_message_bytes.to_string()),
            ("message.timestamp.after.max.ms", self.message_timestamp_after_max_ms.to_string()),
            ("message.timestamp.before.max.ms", self.message_timestamp_before_max_ms.to_string()),
            ("message.timestamp.type", ts.to_string()),
            ("min.cleanable.dirty.ratio", self.min_cleanable_dirty_ratio.to_string()),
            ("min.insync.replicas", self.min_insync_replicas.to_string()),
            ("retention.bytes", self.retention_bytes.to_string()),
            ("retention.ms", self.retention_ms.to_string()),
            ("segment.bytes", self.segment_bytes.to_string()),
            ("segment.index.bytes", self.segment_index_bytes.to_string()),
            ("segment.ms", self.segment_ms.to_string()),
            ("unclean.leader.election.enable", self.unclean_leader_election_enable.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }
}

/// The most partitions a topic may have (`create_topic`, `num.partitions`).
/// Every partition directory name (`<topic>-<partition>`) then fits the
/// 255-byte file name limit even for a topic name of the longest legal length,
/// and the files a topic keeps open (one per segment) stay within reach of a
/// process's limit.
pub const MAX_PARTITIONS: i32 = 10_000;

/// Store-wide settings: topic defaults (any topic key) plus the store's own keys.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    pub topic_defaults: LogConfig,
    pub auto_create_topics: bool,
    pub num_partitions: i32,
    /// How often the background thread applies retention and cleaning.
    pub retention_check_interval_ms: i64,
    /// Memory for the cleaner's key map (Kafka's dedupe buffer).
    pub cleaner_dedupe_buffer_size: usize,
    /// Memory for the cleaner's read and write buffers, half each (Kafka's
    /// `log.cleaner.io.buffer.size`); a larger batch grows the read buffer.
    pub cleaner_io_buffer_size: usize,
    pub cleaner_enable: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            topic_defaults: LogConfig::default(),
            auto_create_topics: true,
            num_partitions: 1,
            retention_check_interval_ms: 300_000,
            cleaner_dedupe_buffer_size: 128 << 20,
            cleaner_io_buffer_size: 512 << 10,
            cleaner_enable: true,
        }
    }
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InvalidConfig(format!("{key}: expected true or false, got {value:?}"))),
    }
}

impl StoreConfig {
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<StoreConfig> {
        let mut c = StoreConfig::default();
        for (key, value) in map {
            match key.as_str() {
                "auto.create.topics.enable" => c.auto_create_topics = boolean(key, value)?,
                "num.partitions" => c.num_partitions = int(key, value, 1, MAX_PARTITIONS.into())? as i32,
                "log.retention.check.interval.ms" => {
                    c.retention_check_interval_ms = int(key, value, 1, i64::MAX)?;
                }
                "log.cleaner.dedupe.buffer.size" => {
                    c.cleaner_dedupe_buffer_size = int(key, value, 1024, i64::MAX)? as usize;
                }
                "log.cleaner.io.buffer.size" => {
                    c.cleaner_io_buffer_size = int(key, value, 1024, i32::MAX as i64)? as usize;
                }
                "log.cleaner.enable" => c.cleaner_enable = boolean(key, value)?,
                "producer.id.expiration.ms" => {
                    c.topic_defaults.producer_id_expiration_ms = int(key, value, 1, i64::MAX)?;
                }
                _ if TOPIC_KEYS.contains(&key.as_str()) => c.topic_defaults.set(key, value)?,
                _ => {
                    return Err(Error::InvalidConfig(format!(
                        "unknown config key {key:?} (store keys: auto.create.topics.enable, num.partitions, \
                         log.retention.check.interval.ms, log.cleaner.dedupe.buffer.size, \
                         log.cleaner.io.buffer.size, log.cleaner.enable, producer.id.expiration.ms; topic keys: {})",
                        TOPIC_KEYS.join(", ")
                    )))
                }
            }
        }
        Ok(c)
    }
}

#[cfg(test)]
#[path = "config_test.rs"]
mod tests;
