//! The broker's own settings (Kafka's broker keys); store and topic keys pass
//! through to the store.

use std::collections::BTreeMap;

use seglog_core::error::{Error, Result};

/// Settings of one broker.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// `node.id`: the broker's id in Metadata.
    pub node_id: i32,
    /// Where to accept connections (`host:port`, port 0 picks one).
    pub listen: String,
    /// What Metadata tells clients to connect to; the bound address if unset.
    pub advertised_listener: Option<String>,
    /// `socket.request.max.bytes`: the largest request frame accepted.
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms`: a connection silent this long is closed.
    pub connections_max_idle_ms: u64,
    /// `socket.sendfile.enable`: Fetch sends log bytes with sendfile (else a copy).
    pub sendfile: bool,
    /// `log.slow.request.ms`: requests slower than this get a log line.
    pub slow_request_ms: u64,
    /// `num.network.threads`: tokio worker threads.
    pub network_threads: usize,
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`: the
    /// session timeouts a JoinGroup may ask for (else INVALID_SESSION_TIMEOUT).
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long an empty group's first
    /// rebalance waits for more members (0: none).
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members per group (else GROUP_MAX_SIZE_REACHED).
    pub group_max_size: i32,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets`
    /// when the coordinator creates it.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.retention.minutes`: how long an empty group's offsets are kept.
    pub offsets_retention_minutes: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are removed.
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`: the longest metadata string of a commit.
    pub offset_metadata_max_bytes: usize,
    /// Store and topic keys, for a broker that opens its store itself.
    pub store: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 0,
            listen: "127.0.0.1:9092".into(),
            advertised_listener: None,
            socket_request_max_bytes: 100 << 20,
            connections_max_idle_ms: 600_000,
            sendfile: true,
            slow_request_ms: 1_000,
            network_threads: 2,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX,
            offsets_topic_num_partitions: 50,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_max_bytes: 4096,
            store: BTreeMap::new(),
        }
    }
}

/// The broker keys `from_map` understands; everything else goes to the store.
pub const BROKER_KEYS: &[&str] = &[
    "node.id",
    "listeners",
    "advertised.listeners",
    "socket.request.max.bytes",
    "connections.max.idle.ms",
    "socket.sendfile.enable",
    "log.slow.request.ms",
    "num.network.threads",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.size",
    "offsets.topic.num.partitions",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes",
];

fn int(key: &str, value: &str, min: i64, max: i64) -> Result<i64> {
    match value.trim().parse::<i64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(Error::InvalidConfig(format!(
            "{key}: expected an integer from {min} to {max}, got {value:?}"
        ))),
    }
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InvalidConfig(format!("{key}: expected true or false, got {value:?}"))),
    }
}

/// `host:port` from a listener, with or without Kafka's `PLAINTEXT://` prefix.
pub fn parse_listener(key: &str, value: &str) -> Result<String> {
    let v = value.trim();
    let v = v.strip_prefix("PLAINTEXT://").unwrap_or(v);
    match v.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(v.to_string()),
        _ => Err(Error::InvalidConfig(format!("{key}: expected HOST:PORT, got {value:?}"))),
    }
}

impl BrokerConfig {
    /// The broker keys of `map` applied to the defaults; the rest kept for the store.
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<BrokerConfig> {
        let mut c = BrokerConfig::default();
        for (key, value) in map {
            match key.as_str() {
                "node.id" | "broker.id" => c.node_id = int(key, value, 0, i32::MAX.into())? as i32,
                "listeners" => c.listen = parse_listener(key, value)?,
                "advertised.listeners" => c.advertised_listener = Some(parse_listener(key, value)?),
                "socket.request.max.bytes" => {
                    c.socket_request_max_bytes = int(key, value, 1024, i32::MAX.into())? as usize
                }
                "connections.max.idle.ms" => c.connections_max_idle_ms = int(key, value, 1, i64::MAX)? as u64,
                "socket.sendfile.enable" => c.sendfile = boolean(key, value)?,
                "log.slow.request.ms" => c.slow_request_ms = int(key, value, 0, i64::MAX)? as u64,
                "num.network.threads" => c.network_threads = int(key, value, 1, 64)? as usize,
                "group.min.session.timeout.ms" => {
                    c.group_min_session_timeout_ms = int(key, value, 1, i32::MAX.into())? as i32
                }
                "group.max.session.timeout.ms" => {
                    c.group_max_session_timeout_ms = int(key, value, 1, i32::MAX.into())? as i32
                }
                "group.initial.rebalance.delay.ms" => {
                    c.group_initial_rebalance_delay_ms = int(key, value, 0, i32::MAX.into())? as i32
                }
                "group.max.size" => c.group_max_size = int(key, value, 1, i32::MAX.into())? as i32,
                "offsets.topic.num.partitions" => {
                    c.offsets_topic_num_partitions = int(key, value, 1, 10_000)? as i32
                }
                "offsets.retention.minutes" => {
                    c.offsets_retention_minutes = int(key, value, 1, i64::from(i32::MAX))?
                }
                "offsets.retention.check.interval.ms" => {
                    c.offsets_retention_check_interval_ms = int(key, value, 1, i64::MAX)? as u64
                }
                "offset.metadata.max.bytes" => {
                    c.offset_metadata_max_bytes = int(key, value, 0, i32::MAX.into())? as usize
                }
                _ => {
                    c.store.insert(key.clone(), value.clone());
                }
            }
        }
        if c.group_min_session_timeout_ms > c.group_max_session_timeout_ms {
            return Err(Error::InvalidConfig(format!(
                "group.min.session.timeout.ms ({}) is above group.max.session.timeout.ms ({})",
                c.group_min_session_timeout_ms, c.group_max_session_timeout_ms
            )));
        }
        Ok(c)
    }
}

#[cfg(test)]
#[path = "config_test.rs"]
mod tests;
