//! Topic configuration with Kafka's names, defaults and bounds. Values arrive as
//! strings (as in Kafka's own config files); anything unknown or out of range is
//! refused with a message naming the key, the value and what was expected.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::record::compression::Compression;
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
    /// `compression.type`: `None` keeps each batch as its producer
    /// compressed it (`producer`); a codec has the log store batches in it.
    pub compression_type: Option<Compression>,
    /// The most a segment's roll time is brought forward at random, so that
    /// a topic's partitions do not all roll at once.
    pub segment_jitter_ms: i64,
    /// How long a record stays out of the cleaner's reach, and how long a
    /// record may stay uncompacted at most.
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    /// Reserve a new segment's `segment.bytes` on disk when it is made.
    pub preallocate: bool,
    /// Keys Kafka takes that change nothing in seglog's log (see `PASSIVE_KEYS`),
    /// by name: the value given, or Kafka's default.
    pub passive: BTreeMap<&'static str, String>,
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
            compression_type: None,
            segment_jitter_ms: 0,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            preallocate: false,
            passive: PASSIVE_KEYS.iter().map(|(k, d, _)| (*k, d.to_string())).collect(),
        }
    }
}

/// Every topic-level key seglog accepts: Kafka 3.9's, in Kafka's spelling.
pub const TOPIC_KEYS: &[&str] = &[
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

/// How a passive key's value is checked (Kafka's validator for it).
#[derive(Debug, Clone, Copy)]
pub enum Check {
    Bool,
    AtLeast(i64),
    Between(i64, i64),
    /// `compression.gzip.level`: 1 to 9, or -1 (the codec's default).
    GzipLevel,
    /// `message.format.version`: a Kafka release (`2.8`, `3.0-IV1`, ...).
    Version,
    /// `remote.storage.enable`: only false (there is no tiered storage).
    NoTieredStorage,
    /// `remote.log.copy.disable`, `remote.log.delete.on.disable`: only false,
    /// as in a ZooKeeper-mode Kafka broker.
    NotInZooKeeperMode,
}

/// The keys Kafka takes that change nothing here, with Kafka's default and
/// check. Compression levels: a recompressing topic uses fixed ones (gzip's
/// and zstd's defaults, lz4's one fast level). The record format is always v2 (`message.format.version`
/// is ignored for it by Kafka 3.x too) and nothing is down-converted
/// (`message.downconversion.enable`: only Fetch v4+, with v2 records, is
/// served). There is no tiered storage: `remote.storage.enable` is false,
/// and the `local.retention.*` limits are the whole log's.
/// `message.timestamp.difference.max.ms` is Kafka's deprecated predecessor
/// of `message.timestamp.before.max.ms`, kept for tools that still set it.
pub const PASSIVE_KEYS: &[(&str, &str, Check)] = &[
    ("compression.gzip.level", "-1", Check::GzipLevel),
    ("compression.lz4.level", "9", Check::Between(1, 17)),
    ("compression.zstd.level", "3", Check::Between(-131_072, 22)),
    ("local.retention.bytes", "-2", Check::AtLeast(-2)),
    ("local.retention.ms", "-2", Check::AtLeast(-2)),
    ("message.downconversion.enable", "true", Check::Bool),
    ("message.format.version", "3.0-IV1", Check::Version),
    ("message.timestamp.difference.max.ms", "9223372036854775807", Check::AtLeast(0)),
    ("remote.log.copy.disable", "false", Check::NotInZooKeeperMode),
    ("remote.log.delete.on.disable", "false", Check::NotInZooKeeperMode),
    ("remote.storage.enable", "false", Check::NoTieredStorage),
];

/// Kafka's message for a value a key does not take.
fn refused(key: &str, value: &str, why: &str) -> Error {
    Error::InvalidConfig(format!("Invalid value {value} for configuration {key}: {why}"))
}

fn passive(key: &str, value: &str, check: Check) -> Result<String> {
    let value = value.trim();
    match check {
        Check::Bool => Ok(boolean(key, value)?.to_string()),
        Check::AtLeast(min) => Ok(int(key, value, min, i64::MAX)?.to_string()),
        Check::Between(min, max) => Ok(int(key, value, min, max)?.to_string()),
        Check::GzipLevel => match value.parse::<i32>() {
            Ok(v) if v == -1 || (1..=9).contains(&v) => Ok(v.to_string()),
            Ok(_) => Err(refused(key, value, "Value must be between 1 and 9 or equal to -1")),
            Err(_) => Err(refused(key, value, "Not a number of type INT")),
        },
        Check::Version => {
            let release = value.split_once("-IV").map_or(value, |(r, iv)| {
                if !iv.is_empty() && iv.bytes().all(|c| c.is_ascii_digit()) {
                    r
                } else {
                    ""
                }
            });
            let parts: Vec<&str> = release.split('.').collect();
            let number = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
            let known = parts.iter().all(|p| number(p))
                && match parts.as_slice() {
                    ["0", minor, ..] => matches!(*minor, "8" | "9" | "10" | "11") && parts.len() <= 4,
                    [major, minor, ..] => {
                        matches!(*major, "1" | "2" | "3") && minor.len() <= 2 && parts.len() <= 3
                    }
                    _ => false,
                };
            if known {
                Ok(value.to_string())
            } else {
                Err(refused(key, value, &format!("Version {value} is not a valid version")))
            }
        }
        Check::NotInZooKeeperMode => match boolean(key, value)? {
            false => Ok("false".to_string()),
            true => Err(Error::InvalidConfig(
                "It is invalid to set `remote.log.delete.on.disable` or `remote.log.copy.disable` under \
                 Zookeeper's mode."
                    .into(),
            )),
        },
        Check::NoTieredStorage => match boolean(key, value)? {
            false => Ok("false".to_string()),
            true => Err(Error::InvalidConfig(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote \
                 log storage."
                    .into(),
            )),
        },
    }
}

/// An INT (a bound within i32) or LONG key's value, with Kafka's messages.
fn int(key: &str, value: &str, min: i64, max: i64) -> Result<i64> {
    let value = value.trim();
    let kind = if max <= i64::from(i32::MAX) { "INT" } else { "LONG" };
    let v: i64 = value.parse().map_err(|_| refused(key, value, &format!("Not a number of type {kind}")))?;
    if v < min {
        return Err(refused(key, value, &format!("Value must be at least {min}")));
    }
    if v > max {
        return Err(refused(key, value, &format!("Value must be no more than {max}")));
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
        if c.min_compaction_lag_ms > c.max_compaction_lag_ms {
            return Err(Error::InvalidConfig(format!(
                "conflict topic config setting min.compaction.lag.ms ({}) > max.compaction.lag.ms ({})",
                c.min_compaction_lag_ms, c.max_compaction_lag_ms
            )));
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
                let value = value.trim();
                let v: f64 = value.parse().map_err(|_| refused(key, value, "Not a number of type DOUBLE"))?;
                // Shown parsed, as Java prints a double (`2.0`).
                if v < 0.0 {
                    return Err(refused(key, &format!("{v:?}"), "Value must be at least 0"));
                }
                if v > 1.0 {
                    return Err(refused(key, &format!("{v:?}"), "Value must be no more than 1"));
                }
                self.min_cleanable_dirty_ratio = v;
            }
            "compression.type" => {
                // Kafka's topic names: "producer" keeps each batch's codec,
                // "uncompressed" (not "none") stores batches without one.
                self.compression_type = match value.trim() {
                    "producer" => None,
                    other if other != "none" && Compression::from_name(other).is_some() => {
                        Compression::from_name(other)
                    }
                    other => {
                        return Err(refused(
                            key,
                            other,
                            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
                        ))
                    }
                }
            }
            "segment.jitter.ms" => self.segment_jitter_ms = int(key, value, 0, i64::MAX)?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = int(key, value, 0, i64::MAX)?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = int(key, value, 1, i64::MAX)?,
            "preallocate" => self.preallocate = boolean(key, value)?,
            "cleanup.policy" => {
                let mut p = CleanupPolicy { delete: false, compact: false };
                for part in value.split(',').map(str::trim) {
                    match part {
                        "delete" => p.delete = true,
                        "compact" => p.compact = true,
                        _ => {
                            return Err(refused(key, value.trim(), "String must be one of: compact, delete"))
                        }
                    }
                }
                self.cleanup_policy = p;
            }
            "message.timestamp.type" => {
                self.message_timestamp_type = match value.trim() {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    other => {
                        return Err(refused(key, other, "String must be one of: CreateTime, LogAppendTime"))
                    }
                }
            }
            _ => match PASSIVE_KEYS.iter().find(|(k, _, _)| *k == key) {
                Some((name, _, check)) => {
                    let v = passive(key, value, *check)?;
                    self.passive.insert(name, v);
                }
                None => return Err(Error::InvalidConfig(format!("Unknown topic config name: {key}"))),
            },
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
            ("compression.type", compression_name(self.compression_type).to_string()),
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
            ("segment.jitter.ms", self.segment_jitter_ms.to_string()),
            ("min.compaction.lag.ms", self.min_compaction_lag_ms.to_string()),
            ("max.compaction.lag.ms", self.max_compaction_lag_ms.to_string()),
            ("preallocate", self.preallocate.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain(self.passive.iter().map(|(k, v)| (k.to_string(), v.clone())))
        .collect()
    }
}

/// Kafka's name of a topic's `compression.type`.
pub fn compression_name(c: Option<Compression>) -> &'static str {
    match c {
        None => "producer",
        Some(Compression::None) => "uncompressed",
        Some(codec) => codec.name(),
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
        _ => Err(refused(key, value.trim(), "Expected value to be either true or false")),
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
