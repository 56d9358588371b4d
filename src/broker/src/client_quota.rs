//! Client quotas, Kafka's model: a produce byte rate, a fetch byte rate and a
//! share of request-handling time per user, client id or user and client id
//! (each name or `<default>`), looked up in Kafka's order of precedence; and
//! the controller mutation rate (KIP-599), partitions created or deleted a
//! second, kept in a token bucket. A client over a quota is told to wait
//! (`throttle_time_ms`) and its connection is not read from meanwhile.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::dynamic_config::{Entities, LocalConfigs};
use crate::quota::Rate;

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

/// The quota keys of a user or client entity, and whether each is a whole
/// number (Kafka's LONG) or not (DOUBLE).
pub const KEYS: &[(&str, bool)] = &[
    (PRODUCER_BYTE_RATE, true),
    (CONSUMER_BYTE_RATE, true),
    (REQUEST_PERCENTAGE, false),
    (CONTROLLER_MUTATION_RATE, false),
];

pub fn is_quota_key(key: &str) -> bool {
    KEYS.iter().any(|(k, _)| *k == key)
}

/// The name that stands for every user or client id without its own entity.
pub const DEFAULT: &str = "<default>";

/// A user's or client id's part of an entity: a name, or the default.
pub type EntityName = Option<String>;

/// A quota entity: a user, a client id, or both; `Some(None)` is `<default>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

fn path_name(name: &EntityName) -> String {
    name.as_deref().map_or_else(|| DEFAULT.to_string(), sanitize)
}

fn from_path_name(name: &str) -> Option<EntityName> {
    if name == DEFAULT {
        return Some(None);
    }
    desanitize(name).map(Some)
}

impl QuotaEntity {
    /// Kafka's entity path under `/config`: `users/U`, `clients/C` or
    /// `users/U/clients/C`, names sanitized; `None` for an empty entity.
    pub fn path(&self) -> Option<String> {
        match (&self.user, &self.client_id) {
            (Some(u), Some(c)) => Some(format!("users/{}/clients/{}", path_name(u), path_name(c))),
            (Some(u), None) => Some(format!("users/{}", path_name(u))),
            (None, Some(c)) => Some(format!("clients/{}", path_name(c))),
            (None, None) => None,
        }
    }

    pub fn from_path(path: &str) -> Option<QuotaEntity> {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["users", u] => Some(QuotaEntity { user: Some(from_path_name(u)?), client_id: None }),
            ["clients", c] => Some(QuotaEntity { user: None, client_id: Some(from_path_name(c)?) }),
            ["users", u, "clients", c] => {
                Some(QuotaEntity { user: Some(from_path_name(u)?), client_id: Some(from_path_name(c)?) })
            }
            _ => None,
        }
    }
}

/// A name as Kafka writes it into a znode's path: URL-encoded, with `*` and
/// spaces as `%2A` and `%20`.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The name a sanitized path component stands for (`None` if it is not
/// valid percent-encoded UTF-8).
pub fn desanitize(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Every entity's quotas.
pub type QuotaConfigs = BTreeMap<QuotaEntity, BTreeMap<String, f64>>;

/// The quota keys of a stored config, as numbers (values that do not parse
/// are left out: Kafka's brokers would not have written them).
pub fn quota_values(config: &BTreeMap<String, String>) -> BTreeMap<String, f64> {
    config
        .iter()
        .filter(|(k, _)| is_quota_key(k))
        .filter_map(|(k, v)| v.trim().parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| (k.clone(), v)))
        .collect()
}

/// The quota `key` that applies to `user` connecting as `client_id`, in
/// Kafka's order: user and client id, user and default client id, user,
/// default user and client id, default user and default client id, default
/// user, client id, default client id. With it, the measurement it is taken
/// against: one per user and client id where the quota names both, per user
/// or per client id where it names one.
pub fn quota_for(configs: &QuotaConfigs, key: &str, user: &str, client_id: &str) -> Option<(f64, SensorKey)> {
    if configs.is_empty() {
        return None;
    }
    let named = |s: &str| Some(Some(s.to_string()));
    let both = || SensorKey { user: user.to_string(), client_id: client_id.to_string() };
    let user_only = || SensorKey { user: user.to_string(), client_id: String::new() };
    let client_only = || SensorKey { user: String::new(), client_id: client_id.to_string() };
    let order: [(Option<EntityName>, Option<EntityName>, u8); 8] = [
        (named(user), named(client_id), 0),
        (named(user), Some(None), 0),
        (named(user), None, 1),
        (Some(None), named(client_id), 0),
        (Some(None), Some(None), 0),
        (Some(None), None, 1),
        (None, named(client_id), 2),
        (None, Some(None), 2),
    ];
    order.into_iter().find_map(|(u, c, tags)| {
        let bound = *configs.get(&QuotaEntity { user: u, client_id: c })?.get(key)?;
        let sensor = match tags {
            0 => both(),
            1 => user_only(),
            _ => client_only(),
        };
        Some((bound, sensor))
    })
}

/// The longest wait a client is told: `throttle_time_ms` is an int32.
const LONGEST_WAIT: Duration = Duration::from_millis(i32::MAX as u64);

/// `seconds` as a wait, at most `LONGEST_WAIT` (and that for a quota so
/// small that the division overflows).
fn wait_of(seconds: f64) -> Duration {
    match seconds {
        s if s.is_nan() || s >= LONGEST_WAIT.as_secs_f64() => LONGEST_WAIT,
        s if s <= 0.0 => Duration::ZERO,
        s => Duration::from_secs_f64(s),
    }
}

/// What a quota's measurement is kept per (Kafka's metric tags).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SensorKey {
    pub user: String,
    pub client_id: String,
}

/// Measurements idle this long are dropped (Kafka expires its quota
/// sensors after an hour), once there are many of them.
const SENSOR_EXPIRY: Duration = Duration::from_secs(3600);
const SENSORS_BEFORE_EXPIRY: usize = 1024;

/// One kind of rate quota (produce bytes, fetch bytes or request time): each
/// client's rate over `quota.window.num` windows of `quota.window.size.seconds`.
pub struct ClientQuotaManager {
    key: &'static str,
    window: Duration,
    windows: usize,
    /// The longest a client is told to wait (`None`: no bound; Kafka bounds
    /// only the request-time quota's, at one window).
    max_throttle: Option<Duration>,
    sensors: Mutex<HashMap<SensorKey, Rate>>,
}

impl ClientQuotaManager {
    pub fn new(key: &'static str, window: Duration, windows: usize, max_throttle: Option<Duration>) -> Self {
        ClientQuotaManager { key, window, windows, max_throttle, sensors: Mutex::new(HashMap::new()) }
    }

    /// The quota of `user` as `client_id`, if one applies.
    pub fn bound(&self, configs: &QuotaConfigs, user: &str, client_id: &str) -> Option<f64> {
        quota_for(configs, self.key, user, client_id).map(|(b, _)| b)
    }

    /// Records `amount` for the client at `now`, and answers how long it must
    /// wait for its rate to come back to its quota: `(rate - quota) / quota`
    /// of the span the rate is taken over, as Kafka computes it.
    pub fn record(
        &self,
        configs: &QuotaConfigs,
        user: &str,
        client_id: &str,
        amount: f64,
        now: Instant,
    ) -> Duration {
        let Some((bound, key)) = quota_for(configs, self.key, user, client_id) else { return Duration::ZERO };
        let mut sensors = self.sensors.lock();
        if sensors.len() >= SENSORS_BEFORE_EXPIRY && !sensors.contains_key(&key) {
            sensors.retain(|_, r| r.idle(now).is_some_and(|idle| idle < SENSOR_EXPIRY));
        }
        let rate = sensors.entry(key).or_insert_with(|| Rate::new(self.window, self.windows));
        rate.record(now, amount);
        let measured = rate.measure(now);
        if bound <= 0.0 {
            // A quota of zero lets nothing through: wait as long as any wait.
            return self.max_throttle.unwrap_or(self.window * self.windows as u32);
        }
        if measured <= bound {
            return Duration::ZERO;
        }
        let wait = wait_of(rate.span(now).as_secs_f64() * (measured - bound) / bound);
        self.max_throttle.map_or(wait, |max| wait.min(max))
    }

    /// Takes back an amount recorded for something that was not done after
    /// all (a throttled Fetch's response, which is not sent).
    pub fn unrecord(&self, configs: &QuotaConfigs, user: &str, client_id: &str, amount: f64, now: Instant) {
        let Some((_, key)) = quota_for(configs, self.key, user, client_id) else { return };
        if let Some(rate) = self.sensors.lock().get_mut(&key) {
            rate.record(now, -amount);
        }
    }

    /// The most that one request may take without exceeding the quota by
    /// itself: the quota over all windows but one (what Kafka caps a Fetch's
    /// `max_bytes` at, so that a large fetch is not refused for ever).
    pub fn most_per_request(&self, configs: &QuotaConfigs, user: &str, client_id: &str) -> Option<f64> {
        let bound = self.bound(configs, user, client_id)?;
        Some(bound * (self.windows.saturating_sub(1).max(1)) as f64 * self.window.as_secs_f64())
    }
}

/// The controller mutation quota (KIP-599): per client, a bucket of
/// `quota × windows × window` partition mutations that refills at the quota.
pub struct ControllerMutationQuota {
    window: Duration,
    windows: usize,
    buckets: Mutex<HashMap<SensorKey, (f64, Instant)>>,
}

/// A mutation refused: the bucket is empty until this long from now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exhausted(pub Duration);

impl ControllerMutationQuota {
    pub fn new(window: Duration, windows: usize) -> Self {
        ControllerMutationQuota { window, windows, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes `permits` from the client's bucket. Strictly (CreateTopics v6+,
    /// CreatePartitions v3+, DeleteTopics v5+), a bucket already in debt
    /// refuses; otherwise the permits are taken, the bucket may go into
    /// debt, and the answer is how long the client must then wait.
    pub fn record(
        &self,
        configs: &QuotaConfigs,
        user: &str,
        client_id: &str,
        permits: f64,
        strict: bool,
        now: Instant,
    ) -> Result<Duration, Exhausted> {
        let Some((quota, key)) = quota_for(configs, CONTROLLER_MUTATION_RATE, user, client_id) else {
            return Ok(Duration::ZERO);
        };
        let longest = self.window * self.windows as u32;
        let wait = |tokens: f64| if quota <= 0.0 { longest } else { wait_of(-tokens / quota) };
        let burst = quota.max(0.0) * self.windows as f64 * self.window.as_secs_f64();
        let mut buckets = self.buckets.lock();
        if buckets.len() >= SENSORS_BEFORE_EXPIRY && !buckets.contains_key(&key) {
            buckets.retain(|_, (_, last)| now.saturating_duration_since(*last) < SENSOR_EXPIRY);
        }
        let (tokens, last) = buckets.entry(key).or_insert((burst, now));
        *tokens = (*tokens + quota.max(0.0) * now.saturating_duration_since(*last).as_secs_f64()).min(burst);
        *last = now;
        if strict && (*tokens < 0.0 || quota <= 0.0) {
            return Err(Exhausted(wait(*tokens)));
        }
        *tokens = (*tokens - permits).min(burst);
        Ok(if *tokens < 0.0 { wait(*tokens) } else { Duration::ZERO })
    }
}

/// Quotas kept by entity path (`users/alice`, `clients/<default>`, ...), as
/// a single broker's store keeps them; paths that name no entity are left out.
pub fn from_entities(entities: &Entities) -> QuotaConfigs {
    entities
        .iter()
        .filter_map(|(path, config)| {
            let values = quota_values(config);
            (!values.is_empty()).then_some((QuotaEntity::from_path(path)?, values))
        })
        .collect()
}

/// A single broker's quotas, in one file of its store (a cluster member's
/// are ZooKeeper's `/config/users` and `/config/clients`).
pub struct LocalQuotas {
    file: LocalConfigs,
    parsed: RwLock<Arc<QuotaConfigs>>,
}

pub const QUOTAS_FILE: &str = ".client-quotas.json";

impl LocalQuotas {
    pub fn open(dir: &Path) -> seglog_core::Result<LocalQuotas> {
        let file = LocalConfigs::open(dir, QUOTAS_FILE)?;
        let parsed = RwLock::new(Arc::new(from_entities(&file.get())));
        Ok(LocalQuotas { file, parsed })
    }

    pub fn get(&self) -> Arc<QuotaConfigs> {
        self.parsed.read().clone()
    }

    /// Changes one entity's quotas to what `change` makes of them (all of
    /// its keys, as strings).
    pub fn update(
        &self,
        entity: &QuotaEntity,
        change: impl FnOnce(&BTreeMap<String, String>) -> BTreeMap<String, String>,
    ) -> seglog_core::Result<()> {
        let Some(path) = entity.path() else { return Ok(()) };
        // Held across the write and the reparse, so that concurrent changes
        // leave the parsed quotas as the file has them.
        let mut parsed = self.parsed.write();
        self.file.update(&path, |current| Some(change(current)))?;
        *parsed = Arc::new(from_entities(&self.file.get()));
        Ok(())
    }
}

/// The broker's client quotas, each kind measured apart.
pub struct ClientQuotas {
    pub produce: ClientQuotaManager,
    pub fetch: ClientQuotaManager,
    pub request: ClientQuotaManager,
    pub mutation: ControllerMutationQuota,
}

impl ClientQuotas {
    pub fn new(config: &crate::config::BrokerConfig) -> ClientQuotas {
        let window = Duration::from_secs(config.quota_window_size_seconds);
        let windows = config.quota_window_num;
        ClientQuotas {
            produce: ClientQuotaManager::new(PRODUCER_BYTE_RATE, window, windows, None),
            fetch: ClientQuotaManager::new(CONSUMER_BYTE_RATE, window, windows, None),
            request: ClientQuotaManager::new(REQUEST_PERCENTAGE, window, windows, Some(window)),
            mutation: ControllerMutationQuota::new(
                Duration::from_secs(config.controller_quota_window_size_seconds),
                config.controller_quota_window_num,
            ),
        }
    }
}

#[cfg(test)]
#[path = "client_quota_test.rs"]
mod tests;
