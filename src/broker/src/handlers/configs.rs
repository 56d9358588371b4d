//! What the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)
//! share: Kafka's resource types and config sources, each topic key's type and
//! broker-level synonym, where a value comes from, and the incremental
//! operations applied to a topic's overrides. Pure, so it is tested alone.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use seglog_core::config::{LogConfig, StoreConfig, TOPIC_KEYS};

use crate::config::BrokerConfig;

/// Kafka 4's lower bound on `segment.bytes` (KIP-1030): a topic of tiny
/// segments takes a file descriptor or more per few records. The embedded
/// store keeps the old bound; only what comes over the wire is held to it.
pub const MIN_SEGMENT_BYTES: i64 = 1 << 20;

/// Kafka 4.1's topic key for segments below that bound, meant for tests:
/// given at creation, it is the topic's `segment.bytes`.
pub const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";

/// Checks the values `wanted` sets or changes (those equal to `current`'s
/// are left as they are) against Kafka 4's bounds, with its message.
pub fn within_bounds(
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Result<(), (i16, String)> {
    for (key, value) in wanted {
        if current.get(key) == Some(value) || key != "segment.bytes" {
            continue;
        }
        if value.trim().parse::<i64>().is_ok_and(|v| v < MIN_SEGMENT_BYTES) {
            return Err((
                ResponseError::InvalidConfig.code(),
                format!(
                    "Invalid value {value} for configuration segment.bytes: Value must be at least {MIN_SEGMENT_BYTES}"
                ),
            ));
        }
    }
    Ok(())
}

/// Kafka's `ConfigResource.Type` ids.
pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

/// Kafka's `ConfigSource` ids (DescribeConfigs v1+).
pub const SOURCE_TOPIC_CONFIG: i8 = 1;
pub const SOURCE_STATIC_BROKER_CONFIG: i8 = 4;
pub const SOURCE_DEFAULT_CONFIG: i8 = 5;

/// Kafka's `ConfigType` ids (DescribeConfigs v3+).
pub const TYPE_BOOLEAN: i8 = 1;
pub const TYPE_STRING: i8 = 2;
pub const TYPE_INT: i8 = 3;
pub const TYPE_LONG: i8 = 5;
pub const TYPE_DOUBLE: i8 = 6;
pub const TYPE_LIST: i8 = 7;

/// A topic key as DescribeConfigs describes it: its broker-level synonym
/// (Kafka's `ServerTopicConfigSynonyms`, the first one; none for keys that
/// exist only per topic), its type, and whether Kafka's broker config has a
/// default for that synonym (some, like `log.retention.ms`, default to null,
/// and Kafka then lists no DEFAULT_CONFIG synonym).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicKey {
    pub synonym: Option<&'static str>,
    pub config_type: i8,
    pub broker_default: bool,
}

pub fn topic_key(key: &str) -> Option<TopicKey> {
    let (synonym, config_type, broker_default) = match key {
        "cleanup.policy" => (Some("log.cleanup.policy"), TYPE_LIST, true),
        "compression.gzip.level" => (Some("compression.gzip.level"), TYPE_INT, true),
        "compression.lz4.level" => (Some("compression.lz4.level"), TYPE_INT, true),
        "compression.type" => (Some("compression.type"), TYPE_STRING, true),
        "compression.zstd.level" => (Some("compression.zstd.level"), TYPE_INT, true),
        "delete.retention.ms" => (Some("log.cleaner.delete.retention.ms"), TYPE_LONG, true),
        "file.delete.delay.ms" => (Some("log.segment.delete.delay.ms"), TYPE_LONG, true),
        "flush.messages" => (Some("log.flush.interval.messages"), TYPE_LONG, true),
        "flush.ms" => (Some("log.flush.interval.ms"), TYPE_LONG, false),
        "follower.replication.throttled.replicas" => (None, TYPE_LIST, false),
        "index.interval.bytes" => (Some("log.index.interval.bytes"), TYPE_INT, true),
        "leader.replication.throttled.replicas" => (None, TYPE_LIST, false),
        "local.retention.bytes" => (Some("log.local.retention.bytes"), TYPE_LONG, true),
        "local.retention.ms" => (Some("log.local.retention.ms"), TYPE_LONG, true),
        "max.compaction.lag.ms" => (Some("log.cleaner.max.compaction.lag.ms"), TYPE_LONG, true),
        "max.message.bytes" => (Some("message.max.bytes"), TYPE_INT, true),
        "message.downconversion.enable" => (Some("log.message.downconversion.enable"), TYPE_BOOLEAN, true),
        "message.format.version" => (Some("log.message.format.version"), TYPE_STRING, true),
        "message.timestamp.after.max.ms" => (Some("log.message.timestamp.after.max.ms"), TYPE_LONG, true),
        "message.timestamp.before.max.ms" => (Some("log.message.timestamp.before.max.ms"), TYPE_LONG, true),
        "message.timestamp.difference.max.ms" => {
            (Some("log.message.timestamp.difference.max.ms"), TYPE_LONG, true)
        }
        "message.timestamp.type" => (Some("log.message.timestamp.type"), TYPE_STRING, true),
        "min.cleanable.dirty.ratio" => (Some("log.cleaner.min.cleanable.ratio"), TYPE_DOUBLE, true),
        "min.compaction.lag.ms" => (Some("log.cleaner.min.compaction.lag.ms"), TYPE_LONG, true),
        "min.insync.replicas" => (Some("min.insync.replicas"), TYPE_INT, true),
        "preallocate" => (Some("log.preallocate"), TYPE_BOOLEAN, true),
        "remote.log.copy.disable" | "remote.log.delete.on.disable" | "remote.storage.enable" => {
            (None, TYPE_BOOLEAN, false)
        }
        "retention.bytes" => (Some("log.retention.bytes"), TYPE_LONG, true),
        "retention.ms" => (Some("log.retention.ms"), TYPE_LONG, false),
        "segment.bytes" => (Some("log.segment.bytes"), TYPE_INT, true),
        "segment.index.bytes" => (Some("log.index.size.max.bytes"), TYPE_INT, true),
        "segment.jitter.ms" => (Some("log.roll.jitter.ms"), TYPE_LONG, false),
        "segment.ms" => (Some("log.roll.ms"), TYPE_LONG, false),
        "unclean.leader.election.enable" => (Some("unclean.leader.election.enable"), TYPE_BOOLEAN, true),
        _ => return None,
    };
    Some(TopicKey { synonym, config_type, broker_default })
}

/// One config as DescribeConfigs reports it: its value, where that value
/// comes from, and the chain of synonyms (highest precedence first) that
/// explains it, as Kafka's `ConfigHelper` builds them.
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub name: String,
    pub value: Option<String>,
    pub source: i8,
    pub config_type: i8,
    pub read_only: bool,
    /// `(name, value, source)`.
    pub synonyms: Vec<(String, Option<String>, i8)>,
}

/// Every topic key of a topic: an override is TOPIC_CONFIG; otherwise the
/// store's default is STATIC_BROKER_CONFIG where it was set (it differs from
/// Kafka's default), else DEFAULT_CONFIG.
pub fn describe_topic(
    effective: &LogConfig,
    overrides: &BTreeMap<String, String>,
    store: &StoreConfig,
) -> Vec<Described> {
    let values = effective.to_map();
    let set = store.topic_defaults.to_map();
    let kafka = LogConfig::default().to_map();
    TOPIC_KEYS
        .iter()
        .filter_map(|&key| {
            let TopicKey { synonym: broker_name, config_type, broker_default } = topic_key(key)?;
            let mut synonyms = Vec::new();
            if let Some(v) = overrides.get(key) {
                // The value as the store reads it (normalised), not as typed.
                synonyms.push((
                    key.to_string(),
                    values.get(key).cloned().or(Some(v.clone())),
                    SOURCE_TOPIC_CONFIG,
                ));
            }
            // A key with no broker synonym has only its topic override (Kafka's
            // `ConfigHelper` then calls an unset one DEFAULT_CONFIG with no synonyms).
            if let Some(broker_name) = broker_name {
                if set.get(key) != kafka.get(key) {
                    synonyms.push((
                        broker_name.to_string(),
                        set.get(key).cloned(),
                        SOURCE_STATIC_BROKER_CONFIG,
                    ));
                }
                if broker_default {
                    synonyms.push((broker_name.to_string(), kafka.get(key).cloned(), SOURCE_DEFAULT_CONFIG));
                }
            }
            Some(Described {
                name: key.to_string(),
                value: values.get(key).cloned(),
                source: synonyms.first().map_or(SOURCE_DEFAULT_CONFIG, |s| s.2),
                config_type,
                read_only: false,
                synonyms,
            })
        })
        .collect()
}

/// The broker's own keys and the store's, under Kafka's broker names. None can
/// be changed while the broker runs (no dynamic broker configs), so all are
/// read-only; a value other than Kafka's default is STATIC_BROKER_CONFIG.
pub fn describe_broker(broker: &BrokerConfig, store: &StoreConfig) -> Vec<Described> {
    let bd = BrokerConfig::default();
    let sd = StoreConfig::default();
    let endpoints = |ls: &[crate::security::listeners::Listener]| {
        ls.iter().map(|l| l.endpoint()).collect::<Vec<_>>().join(",")
    };
    let mut rows: Vec<(&str, Option<String>, Option<String>, i8)> = vec![
        ("broker.id", Some(broker.node_id.to_string()), Some(bd.node_id.to_string()), TYPE_INT),
        ("node.id", Some(broker.node_id.to_string()), Some(bd.node_id.to_string()), TYPE_INT),
        ("listeners", Some(endpoints(&broker.listeners)), Some(endpoints(&bd.listeners)), TYPE_LIST),
        (
            "advertised.listeners",
            (!broker.advertised_listeners.is_empty()).then(|| endpoints(&broker.advertised_listeners)),
            None,
            TYPE_LIST,
        ),
        (
            "inter.broker.listener.name",
            Some(broker.inter_broker_listener.clone()),
            Some(bd.inter_broker_listener.clone()),
            TYPE_STRING,
        ),
        (
            "socket.request.max.bytes",
            Some(broker.socket_request_max_bytes.to_string()),
            Some(bd.socket_request_max_bytes.to_string()),
            TYPE_INT,
        ),
        (
            "connections.max.idle.ms",
            Some(broker.connections_max_idle_ms.to_string()),
            Some(bd.connections_max_idle_ms.to_string()),
            TYPE_LONG,
        ),
        (
            "num.network.threads",
            Some(broker.network_threads.to_string()),
            Some(bd.network_threads.to_string()),
            TYPE_INT,
        ),
        (
            "socket.sendfile.enable",
            Some(broker.sendfile.to_string()),
            Some(bd.sendfile.to_string()),
            TYPE_BOOLEAN,
        ),
        (
            "log.slow.request.ms",
            Some(broker.slow_request_ms.to_string()),
            Some(bd.slow_request_ms.to_string()),
            TYPE_LONG,
        ),
        (
            "auto.create.topics.enable",
            Some(store.auto_create_topics.to_string()),
            Some(sd.auto_create_topics.to_string()),
            TYPE_BOOLEAN,
        ),
        (
            "num.partitions",
            Some(store.num_partitions.to_string()),
            Some(sd.num_partitions.to_string()),
            TYPE_INT,
        ),
        (
            "log.retention.check.interval.ms",
            Some(store.retention_check_interval_ms.to_string()),
            Some(sd.retention_check_interval_ms.to_string()),
            TYPE_LONG,
        ),
        (
            "log.cleaner.dedupe.buffer.size",
            Some(store.cleaner_dedupe_buffer_size.to_string()),
            Some(sd.cleaner_dedupe_buffer_size.to_string()),
            TYPE_LONG,
        ),
        (
            "log.cleaner.io.buffer.size",
            Some(store.cleaner_io_buffer_size.to_string()),
            Some(sd.cleaner_io_buffer_size.to_string()),
            TYPE_INT,
        ),
        (
            "log.cleaner.enable",
            Some(store.cleaner_enable.to_string()),
            Some(sd.cleaner_enable.to_string()),
            TYPE_BOOLEAN,
        ),
    ];
    let set = store.topic_defaults.to_map();
    let kafka = LogConfig::default().to_map();
    for key in TOPIC_KEYS {
        if let Some(TopicKey { synonym: Some(broker_name), config_type, .. }) = topic_key(key) {
            rows.push((broker_name, set.get(*key).cloned(), kafka.get(*key).cloned(), config_type));
        }
    }
    rows.sort_by(|a, b| a.0.cmp(b.0));
    rows.into_iter()
        .map(|(name, value, default, config_type)| {
            let mut synonyms = Vec::new();
            if value != default {
                synonyms.push((name.to_string(), value.clone(), SOURCE_STATIC_BROKER_CONFIG));
            }
            if default.is_some() {
                synonyms.push((name.to_string(), default, SOURCE_DEFAULT_CONFIG));
            }
            Described {
                name: name.to_string(),
                value,
                source: synonyms.first().map_or(SOURCE_DEFAULT_CONFIG, |s| s.2),
                config_type,
                read_only: true,
                synonyms,
            }
        })
        .collect()
}

/// A broker resource's name: this node's id, or "" for the cluster-wide
/// defaults (Kafka's `ConfigHelper`); anything else is INVALID_REQUEST.
pub fn broker_resource(name: &str, node_id: i32) -> Result<bool, (i16, String)> {
    if name.is_empty() {
        return Ok(false);
    }
    match name.parse::<i32>() {
        Ok(id) if id == node_id => Ok(true),
        Ok(_) => Err((
            ResponseError::InvalidRequest.code(),
            format!("Unexpected broker id, expected {node_id} or empty string, but received {name}"),
        )),
        Err(_) => Err((
            ResponseError::InvalidRequest.code(),
            format!("Broker id must be an integer, but it is: {name}"),
        )),
    }
}

/// Kafka's `AlterConfigOp.OpType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Set,
    Delete,
    Append,
    Subtract,
}

impl Op {
    pub fn from_id(id: i8) -> Option<Op> {
        Some(match id {
            0 => Op::Set,
            1 => Op::Delete,
            2 => Op::Append,
            3 => Op::Subtract,
            _ => return None,
        })
    }
}

fn parts(value: &str) -> Vec<String> {
    value.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// The override changes (`None` removes an override) that IncrementalAlterConfigs
/// `ops` make to a topic, as Kafka's `ConfigurationControlManager` computes
/// them: APPEND and SUBTRACT only for LIST keys, starting from the override or,
/// without one, from the default (`defaults`, the store's topic defaults).
/// Values are not validated here: the store does that.
pub fn incremental_changes(
    overrides: &BTreeMap<String, String>,
    defaults: &BTreeMap<String, String>,
    ops: &[(String, i8, Option<String>)],
) -> Result<BTreeMap<String, Option<String>>, (i16, String)> {
    let mut changes: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (key, op, value) in ops {
        let Some(op) = Op::from_id(*op) else {
            return Err((
                ResponseError::InvalidRequest.code(),
                format!("unknown config operation {op} for {key}"),
            ));
        };
        let current = match changes.get(key) {
            Some(v) => v.clone(),
            None => overrides.get(key).cloned(),
        };
        let new = match op {
            Op::Set => value.clone(),
            Op::Delete => None,
            Op::Append | Op::Subtract => {
                if topic_key(key).map(|k| k.config_type) != Some(TYPE_LIST) {
                    let name = if op == Op::Append { "APPEND" } else { "SUBTRACT" };
                    return Err((
                        ResponseError::InvalidConfig.code(),
                        format!("Can't {name} to key {key} because its type is not LIST."),
                    ));
                }
                let mut list =
                    parts(current.as_deref().or(defaults.get(key).map(String::as_str)).unwrap_or(""));
                let given = value.as_deref().unwrap_or("");
                if op == Op::Append {
                    for v in given.split(',') {
                        if !list.iter().any(|x| x == v) {
                            list.push(v.to_string());
                        }
                    }
                } else {
                    for v in given.split(',') {
                        if let Some(i) = list.iter().position(|x| x == v) {
                            list.remove(i);
                        }
                    }
                }
                Some(list.join(","))
            }
        };
        changes.insert(key.clone(), new);
    }
    Ok(changes)
}

/// The changes that make `wanted` a topic's whole override set (the legacy
/// AlterConfigs: a key left out returns to its default).
pub fn replacement_changes(
    overrides: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> BTreeMap<String, Option<String>> {
    let mut changes: BTreeMap<String, Option<String>> =
        overrides.keys().filter(|k| !wanted.contains_key(*k)).map(|k| (k.clone(), None)).collect();
    for (k, v) in wanted {
        changes.insert(k.clone(), Some(v.clone()));
    }
    changes
}

/// `overrides` with `changes` applied.
pub fn applied(
    overrides: &BTreeMap<String, String>,
    changes: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, String> {
    let mut out = overrides.clone();
    for (k, v) in changes {
        match v {
            Some(v) => out.insert(k.clone(), v.clone()),
            None => out.remove(k),
        };
    }
    out
}

#[cfg(test)]
#[path = "configs_test.rs"]
mod tests;
