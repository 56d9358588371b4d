//! The broker's own settings (Kafka's broker keys); store and topic keys pass
//! through to the store.

use std::collections::BTreeMap;

use seglog_core::error::{Error, Result};

use crate::security::acl::{Authorizer, AUTHORIZER_CLASSES};
use crate::security::listeners::{self, Listener, SecurityProtocol};

/// Settings of one broker.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerConfig {
    /// `node.id`: the broker's id in Metadata.
    pub node_id: i32,
    /// `listeners`: where to accept connections, each listener with its
    /// name and security protocol (port 0 picks one).
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`: what Metadata tells clients of a listener to
    /// connect to; a listener not named here advertises its bound address.
    pub advertised_listeners: Vec<Listener>,
    /// `inter.broker.listener.name` (or `security.inter.broker.protocol`):
    /// the listener other brokers reach this one on, for replication.
    pub inter_broker_listener: String,
    /// The security keys (`ssl.*`, `sasl.*`, `connections.max.reauth.ms`
    /// and their `listener.name.<listener>.` forms), read per listener by
    /// `security::ListenerSecurity`.
    pub security: BTreeMap<String, String>,
    /// `socket.request.max.bytes`: the largest request frame accepted.
    pub socket_request_max_bytes: usize,
    /// `queued.max.request.bytes`: the bytes of all requests read and not yet
    /// answered, broker-wide (None: unbounded, Kafka's -1). Connections stop
    /// being read from while it is used up.
    pub queued_max_request_bytes: Option<usize>,
    /// `queued.max.response.bytes`: the bytes of all responses built and not
    /// yet written, broker-wide (None: unbounded). Responses over 64 KiB wait
    /// for room; those of read-only requests are made again once there is
    /// room, holding nothing meanwhile. File bytes a Fetch sends are not in
    /// memory and not counted.
    pub queued_max_response_bytes: Option<usize>,
    /// `connections.max.idle.ms`: a connection silent this long is closed, and
    /// so is one whose client takes no bytes of its response this long.
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
    /// `offsets.topic.replication.factor`: replicas of each partition of
    /// `__consumer_offsets` when a cluster member creates it (refused while
    /// fewer brokers are live, as Kafka refuses it).
    pub offsets_topic_replication_factor: i16,
    /// `offsets.commit.timeout.ms`: how long a commit (or a group's record)
    /// waits for the in-sync replicas of its `__consumer_offsets` partition.
    pub offsets_commit_timeout_ms: u64,
    /// `offsets.retention.minutes`: how long an empty group's offsets are kept.
    pub offsets_retention_minutes: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are removed.
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`: the longest metadata string of a commit.
    pub offset_metadata_max_bytes: usize,
    /// `zookeeper.connect`: `host:port[,host:port...][/chroot]` of the
    /// ZooKeeper ensemble that makes this broker a member of a cluster; unset,
    /// it is a single broker leading every partition of its store.
    pub zookeeper_connect: Option<String>,
    /// `zookeeper.session.timeout.ms`: how long after its last heartbeat a
    /// broker's registration (and so its leaderships) is given up.
    pub zookeeper_session_timeout_ms: u64,
    /// `broker.rack`: the rack in `/brokers/ids/N` and Metadata, used by
    /// rack-aware replica placement.
    pub rack: Option<String>,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms`: how long a follower's fetch waits at the leader.
    pub replica_fetch_wait_max_ms: u64,
    /// `replica.fetch.max.bytes`: bytes per partition a follower asks for.
    pub replica_fetch_max_bytes: i32,
    /// `default.replication.factor`: for topics created without one.
    pub default_replication_factor: i32,
    /// `auto.leader.rebalance.enable`: the controller moves leadership back
    /// to each partition's preferred replica.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`: how often it looks.
    pub leader_imbalance_check_interval_seconds: u64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often the high
    /// watermarks are written to `replication-offset-checkpoint`.
    pub replica_high_watermark_checkpoint_interval_ms: u64,
    /// `controlled.shutdown.enable`: a clean stop first asks the controller
    /// to move this broker's leaderships away.
    pub controlled_shutdown_enable: bool,
    /// `controlled.shutdown.max.retries`: how many times it asks.
    pub controlled_shutdown_max_retries: u32,
    /// `controlled.shutdown.retry.backoff.ms`: how long it waits between asks
    /// (less when the controller changes meanwhile).
    pub controlled_shutdown_retry_backoff_ms: u64,
    /// `replica.selector.class`: with Kafka's `RackAwareReplicaSelector`, a
    /// leader sends a consumer that names its rack to an in-sync replica in
    /// that rack (KIP-392); unset, consumers read from leaders.
    pub rack_aware_reads: bool,
    /// `max.incremental.fetch.session.cache.slots`: fetch sessions kept at
    /// once (KIP-227); 0 makes none.
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `replication.quota.window.num` and
    /// `replication.quota.window.size.seconds`: the windows over which the
    /// replication throttles measure a rate.
    pub replication_quota_window_num: usize,
    pub replication_quota_window_size_seconds: u64,
    /// `quota.window.num` and `quota.window.size.seconds`: the windows over
    /// which client quotas (produce, fetch, request time) measure a rate.
    pub quota_window_num: usize,
    pub quota_window_size_seconds: u64,
    /// `controller.quota.window.num` and
    /// `controller.quota.window.size.seconds`: the controller mutation
    /// quota's burst is its rate over these windows.
    pub controller_quota_window_num: usize,
    pub controller_quota_window_size_seconds: u64,
    /// `max.connections`: open connections in all; while they are all
    /// taken, new ones wait to be accepted. `None`: three quarters of the
    /// process's file descriptors (see `connection_quotas`).
    pub max_connections: Option<usize>,
    /// `max.connections.per.ip`: open connections from one address; one
    /// more is closed as soon as it is accepted.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`: `host:n` pairs, each host's own limit.
    pub max_connections_per_ip_overrides: Vec<(String, usize)>,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: Authorizer,
    /// Store and topic keys, for a broker that opens its store itself.
    pub store: BTreeMap<String, String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            node_id: 0,
            listeners: vec![Listener {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                protocol: SecurityProtocol::Plaintext,
            }],
            advertised_listeners: Vec::new(),
            inter_broker_listener: "PLAINTEXT".into(),
            security: BTreeMap::new(),
            socket_request_max_bytes: 100 << 20,
            queued_max_request_bytes: Some(QUEUED_MAX_REQUEST_BYTES),
            queued_max_response_bytes: Some(QUEUED_MAX_RESPONSE_BYTES),
            connections_max_idle_ms: 600_000,
            sendfile: true,
            slow_request_ms: 1_000,
            network_threads: 2,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX,
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout_ms: 5_000,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_max_bytes: 4096,
            zookeeper_connect: None,
            zookeeper_session_timeout_ms: 18_000,
            rack: None,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_max_bytes: 1 << 20,
            default_replication_factor: 1,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            replica_high_watermark_checkpoint_interval_ms: 5_000,
            controlled_shutdown_enable: true,
            controlled_shutdown_max_retries: 3,
            controlled_shutdown_retry_backoff_ms: 5_000,
            rack_aware_reads: false,
            max_incremental_fetch_session_cache_slots: 1000,
            replication_quota_window_num: 11,
            replication_quota_window_size_seconds: 1,
            quota_window_num: 11,
            quota_window_size_seconds: 1,
            controller_quota_window_num: 11,
            controller_quota_window_size_seconds: 1,
            max_connections: None,
            max_connections_per_ip: i32::MAX as usize,
            max_connections_per_ip_overrides: Vec::new(),
            authorizer: Authorizer::default(),
            store: BTreeMap::new(),
        }
    }
}

/// The default of `queued.max.request.bytes`: bounded (Kafka's is -1), so
/// that clients together cannot make the broker hold more than this of
/// request bytes; room for several requests of the largest size.
pub const QUEUED_MAX_REQUEST_BYTES: usize = 512 << 20;

/// The default of `queued.max.response.bytes`.
pub const QUEUED_MAX_RESPONSE_BYTES: usize = 256 << 20;

/// Kafka's replica selectors (`replica.selector.class`): the rack-aware one
/// (KIP-392) and the default, which keeps consumers on leaders.
pub const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";
pub const LEADER_SELECTOR: &str = "org.apache.kafka.common.replica.LeaderSelector";

/// The broker keys `from_map` understands; everything else goes to the store.
pub const BROKER_KEYS: &[&str] = &[
    "node.id",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "connections.max.reauth.ms",
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "socket.request.max.bytes",
    "queued.max.request.bytes",
    "queued.max.response.bytes",
    "connections.max.idle.ms",
    "socket.sendfile.enable",
    "log.slow.request.ms",
    "num.network.threads",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.size",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.commit.timeout.ms",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offset.metadata.max.bytes",
    "zookeeper.connect",
    "zookeeper.session.timeout.ms",
    "broker.rack",
    "replica.lag.time.max.ms",
    "replica.fetch.wait.max.ms",
    "replica.fetch.max.bytes",
    "default.replication.factor",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
    "replica.high.watermark.checkpoint.interval.ms",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "replica.selector.class",
    "max.incremental.fetch.session.cache.slots",
    "replication.quota.window.num",
    "replication.quota.window.size.seconds",
    "quota.window.num",
    "quota.window.size.seconds",
    "controller.quota.window.num",
    "controller.quota.window.size.seconds",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
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

/// Beginnings of the broker's security keys, each also under a listener's
/// prefix (`listener.name.<listener>.`).
pub const BROKER_KEY_PREFIXES: &[&str] = &["ssl.", "sasl.", "listener.name."];

fn is_security_key(key: &str) -> bool {
    BROKER_KEY_PREFIXES.iter().any(|p| key.starts_with(p)) || key == "connections.max.reauth.ms"
}

/// `host:port[,host:port...][/chroot]`, checked for shape (each server a
/// host and a port; a chroot an absolute path).
pub fn parse_zookeeper(key: &str, value: &str) -> Result<String> {
    let v = value.trim();
    let (servers, chroot) = match v.find('/') {
        Some(i) => (&v[..i], Some(&v[i..])),
        None => (v, None),
    };
    let servers_ok = !servers.is_empty()
        && servers.split(',').all(|s| {
            matches!(s.trim().rsplit_once(':'), Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok())
        });
    let chroot_ok = chroot.is_none_or(|c| c.len() > 1 && !c.ends_with('/') && !c.contains("//"));
    if servers_ok && chroot_ok {
        Ok(v.to_string())
    } else {
        Err(Error::InvalidConfig(format!("{key}: expected HOST:PORT[,HOST:PORT...][/chroot], got {value:?}")))
    }
}

impl BrokerConfig {
    /// The broker keys of `map` applied to the defaults; the rest kept for the store.
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<BrokerConfig> {
        let mut c = BrokerConfig::default();
        for (key, value) in map {
            match key.as_str() {
                "node.id" | "broker.id" => c.node_id = int(key, value, 0, i32::MAX.into())? as i32,
                "listeners" | "advertised.listeners" | "listener.security.protocol.map" => {}
                "inter.broker.listener.name" => c.inter_broker_listener = value.trim().to_ascii_uppercase(),
                "security.inter.broker.protocol" => {}
                "authorizer.class.name" => {
                    c.authorizer.enabled = match value.trim() {
                        "" => false,
                        class if AUTHORIZER_CLASSES.contains(&class) => true,
                        other => {
                            return Err(Error::InvalidConfig(format!(
                                "authorizer.class.name: {other:?} is not an authorizer this broker has: {}",
                                AUTHORIZER_CLASSES.join(" or ")
                            )))
                        }
                    }
                }
                "super.users" => {
                    c.authorizer.super_users = value
                        .split(';')
                        .map(str::trim)
                        .filter(|u| !u.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                "allow.everyone.if.no.acl.found" => c.authorizer.allow_if_no_acl = boolean(key, value)?,
                k if is_security_key(k) => {
                    c.security.insert(key.clone(), value.trim().to_string());
                }
                "socket.request.max.bytes" => {
                    c.socket_request_max_bytes = int(key, value, 1024, i32::MAX.into())? as usize
                }
                "queued.max.request.bytes" => c.queued_max_request_bytes = bound(key, value)?,
                "queued.max.response.bytes" => c.queued_max_response_bytes = bound(key, value)?,
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
                "offsets.topic.replication.factor" => {
                    c.offsets_topic_replication_factor = int(key, value, 1, i16::MAX.into())? as i16
                }
                "offsets.commit.timeout.ms" => {
                    c.offsets_commit_timeout_ms = int(key, value, 1, i64::from(i32::MAX))? as u64
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
                "zookeeper.connect" => c.zookeeper_connect = Some(parse_zookeeper(key, value)?),
                "zookeeper.session.timeout.ms" => {
                    c.zookeeper_session_timeout_ms = int(key, value, 1_000, 600_000)? as u64
                }
                "broker.rack" => {
                    let rack = value.trim();
                    c.rack = (!rack.is_empty()).then(|| rack.to_string());
                }
                "replica.lag.time.max.ms" => c.replica_lag_time_max_ms = int(key, value, 1, i64::MAX)? as u64,
                "replica.fetch.wait.max.ms" => {
                    c.replica_fetch_wait_max_ms = int(key, value, 0, 60_000)? as u64
                }
                "replica.fetch.max.bytes" => {
                    c.replica_fetch_max_bytes = int(key, value, 1024, i32::MAX.into())? as i32
                }
                "default.replication.factor" => {
                    c.default_replication_factor = int(key, value, 1, i16::MAX.into())? as i32
                }
                "auto.leader.rebalance.enable" => c.auto_leader_rebalance_enable = boolean(key, value)?,
                "leader.imbalance.check.interval.seconds" => {
                    c.leader_imbalance_check_interval_seconds =
                        int(key, value, 1, i64::from(i32::MAX))? as u64
                }
                "replica.high.watermark.checkpoint.interval.ms" => {
                    c.replica_high_watermark_checkpoint_interval_ms = int(key, value, 1, i64::MAX)? as u64
                }
                "controlled.shutdown.enable" => c.controlled_shutdown_enable = boolean(key, value)?,
                "controlled.shutdown.max.retries" => {
                    c.controlled_shutdown_max_retries = int(key, value, 1, i64::from(i32::MAX))? as u32
                }
                "controlled.shutdown.retry.backoff.ms" => {
                    c.controlled_shutdown_retry_backoff_ms = int(key, value, 0, i64::MAX)? as u64
                }
                "max.incremental.fetch.session.cache.slots" => {
                    c.max_incremental_fetch_session_cache_slots =
                        int(key, value, 0, i32::MAX.into())? as usize
                }
                "replication.quota.window.num" => {
                    c.replication_quota_window_num = int(key, value, 1, i32::MAX.into())? as usize
                }
                "replication.quota.window.size.seconds" => {
                    c.replication_quota_window_size_seconds = int(key, value, 1, i32::MAX.into())? as u64
                }
                "quota.window.num" => c.quota_window_num = int(key, value, 1, i32::MAX.into())? as usize,
                "quota.window.size.seconds" => {
                    c.quota_window_size_seconds = int(key, value, 1, i32::MAX.into())? as u64
                }
                "controller.quota.window.num" => {
                    c.controller_quota_window_num = int(key, value, 1, i32::MAX.into())? as usize
                }
                "controller.quota.window.size.seconds" => {
                    c.controller_quota_window_size_seconds = int(key, value, 1, i32::MAX.into())? as u64
                }
                "max.connections" => c.max_connections = Some(int(key, value, 0, i32::MAX.into())? as usize),
                "max.connections.per.ip" => {
                    c.max_connections_per_ip = int(key, value, 0, i32::MAX.into())? as usize
                }
                "max.connections.per.ip.overrides" => {
                    c.max_connections_per_ip_overrides = parse_ip_overrides(key, value)?
                }
                "replica.selector.class" => {
                    c.rack_aware_reads = match value.trim() {
                        "" | LEADER_SELECTOR => false,
                        RACK_AWARE_SELECTOR => true,
                        other => {
                            return Err(Error::InvalidConfig(format!(
                                "replica.selector.class: {other:?} is not one this broker has: \
                                 {RACK_AWARE_SELECTOR} or {LEADER_SELECTOR}"
                            )))
                        }
                    }
                }
                _ => {
                    c.store.insert(key.clone(), value.clone());
                }
            }
        }
        c.resolve_listeners(map)?;
        if let Some(queued) = c.queued_max_request_bytes {
            if queued < c.socket_request_max_bytes {
                return Err(Error::InvalidConfig(format!(
                    "queued.max.request.bytes ({queued}) is below socket.request.max.bytes ({}): \
                     a request of the largest size could never be read",
                    c.socket_request_max_bytes
                )));
            }
        }
        if c.max_connections_per_ip == 0 && c.max_connections_per_ip_overrides.is_empty() {
            return Err(Error::InvalidConfig(
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides is set"
                    .into(),
            ));
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

impl BrokerConfig {
    /// `listeners`, `advertised.listeners` and the inter-broker listener,
    /// read together: each name's protocol comes from the protocol map.
    fn resolve_listeners(&mut self, map: &BTreeMap<String, String>) -> Result<()> {
        let protocols = match map.get("listener.security.protocol.map") {
            Some(v) => listeners::parse_protocol_map("listener.security.protocol.map", v)?,
            None => listeners::default_protocol_map(),
        };
        if let Some(v) = map.get("listeners") {
            self.listeners = listeners::parse_endpoints("listeners", v, &protocols)?;
        }
        if let Some(v) = map.get("advertised.listeners") {
            self.advertised_listeners = listeners::parse_endpoints("advertised.listeners", v, &protocols)?;
        }
        let named = map.contains_key("inter.broker.listener.name");
        if let Some(p) = map.get("security.inter.broker.protocol") {
            if named {
                return Err(Error::InvalidConfig(
                    "only one of inter.broker.listener.name and security.inter.broker.protocol should be set"
                        .into(),
                ));
            }
            let protocol = SecurityProtocol::from_name(p).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "security.inter.broker.protocol: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got {p:?}"
                ))
            })?;
            self.inter_broker_listener = protocol.name().to_string();
        } else if !named
            && self.zookeeper_connect.is_none()
            && !self.listeners.iter().any(|l| l.name == self.inter_broker_listener)
        {
            // A single broker has no broker to talk to: its first listener
            // stands in, so that one SASL_SSL listener alone is enough.
            self.inter_broker_listener = self.listeners[0].name.clone();
        }
        listeners::check(&self.listeners, &self.advertised_listeners, &self.inter_broker_listener)
    }

    /// The defaults with one PLAINTEXT listener on `address` (`host:port`,
    /// port 0 picks one).
    pub fn listening_on(address: &str) -> Result<BrokerConfig> {
        BrokerConfig::from_map(&BTreeMap::from([("listeners".to_string(), address.to_string())]))
    }

    /// The listener of `name`.
    pub fn listener(&self, name: &str) -> Option<&Listener> {
        self.listeners.iter().find(|l| l.name == name)
    }
}

/// `host:n[,host:n...]`: each host's limit (an IP address or a name).
fn parse_ip_overrides(key: &str, value: &str) -> Result<Vec<(String, usize)>> {
    let mut overrides = Vec::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match pair.rsplit_once(':') {
            Some((host, n)) if !host.trim().is_empty() => {
                let n = int(key, n, 0, i32::MAX.into())? as usize;
                overrides.push((host.trim().trim_matches(['[', ']']).to_string(), n));
            }
            _ => {
                return Err(Error::InvalidConfig(format!(
                    "{key}: expected HOST:COUNT[,HOST:COUNT...], got {value:?}"
                )))
            }
        }
    }
    Ok(overrides)
}

/// A memory bound: -1 for none, else a positive number of bytes.
fn bound(key: &str, value: &str) -> Result<Option<usize>> {
    match int(key, value, -1, i64::MAX)? {
        -1 => Ok(None),
        n if n >= 1 => Ok(Some(n as usize)),
        _ => Err(Error::InvalidConfig(format!(
            "{key}: expected -1 (unbounded) or a positive number of bytes, got {value:?}"
        ))),
    }
}

#[cfg(test)]
#[path = "config_test.rs"]
mod tests;
