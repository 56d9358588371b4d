//! Dynamic broker configs: what an operator may change on a running broker
//! (`kafka-configs --alter --entity-type brokers`, IncrementalAlterConfigs on
//! a BROKER resource). These are Kafka's broker quota keys
//! (`DynamicConfig.Broker`), the replication throttles that
//! `kafka-reassign-partitions --throttle` sets and `--verify` clears. Each is
//! set per broker (entity `<id>`) or as the cluster's default (entity
//! `<default>`, the empty resource name on the wire); a broker runs with its
//! own value, else the default, else no limit. A cluster keeps them where
//! Kafka does (`/config/brokers/<entity>`); a single broker in a file of its
//! store directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use serde_json::{json, Value};

use crate::handlers::configs::{Described, Op, TYPE_LONG};
use crate::replication::znodes::{config_from_value, config_to_value};

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
/// Accepted and kept (the reassignment tool sets and clears it), without
/// effect: a seglog broker has one log directory, so no replica moves
/// between directories.
pub const ALTER_LOG_DIRS_RATE: &str = "replica.alter.log.dirs.io.max.bytes.per.second";
pub const KEYS: &[&str] = &[ALTER_LOG_DIRS_RATE, FOLLOWER_RATE, LEADER_RATE];

/// The entity of the cluster-wide defaults.
pub const DEFAULT_ENTITY: &str = "<default>";

/// Kafka's `ConfigSource` ids of dynamic values.
pub const SOURCE_DYNAMIC_BROKER_CONFIG: i8 = 2;
pub const SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;

/// Per entity (`<default>` or a broker id), its dynamic configs.
pub type Entities = BTreeMap<String, BTreeMap<String, String>>;

pub type Refusal = (i16, String);

/// The entity a BROKER resource names: `<default>` for the empty name.
pub fn entity(resource_name: &str) -> &str {
    if resource_name.is_empty() {
        DEFAULT_ENTITY
    } else {
        resource_name
    }
}

/// A value as Kafka checks these keys (a LONG, at least 0), with Kafka's
/// INVALID_REQUEST and its message; a key that is not dynamic is
/// INVALID_CONFIG.
pub fn validate(key: &str, value: &str) -> Result<(), Refusal> {
    if !KEYS.contains(&key) {
        return Err((
            ResponseError::InvalidConfig.code(),
            format!(
                "Cannot update these configs dynamically: {key} (a running broker changes only {}; set the \
                 others when starting it)",
                KEYS.join(", ")
            ),
        ));
    }
    let invalid = |why: &str| {
        (
            ResponseError::InvalidRequest.code(),
            format!("Invalid value {value} for configuration {key}: {why}"),
        )
    };
    match value.trim().parse::<i64>() {
        Ok(v) if v >= 0 => Ok(()),
        Ok(_) => Err(invalid("Value must be at least 0")),
        Err(_) => Err(invalid("Not a number of type LONG")),
    }
}

/// An entity's configs after IncrementalAlterConfigs `ops` (SET and DELETE:
/// none of these keys is a list), every op checked before any is applied.
/// Deleting a key that is not set changes nothing, as in Kafka.
pub fn incremental(
    current: &BTreeMap<String, String>,
    ops: &[(String, i8, Option<String>)],
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut wanted = current.clone();
    for (key, op, value) in ops {
        match Op::from_id(*op) {
            Some(Op::Set) => {
                let value = value.as_deref().unwrap_or("");
                validate(key, value)?;
                wanted.insert(key.clone(), value.trim().to_string());
            }
            Some(Op::Delete) => {
                wanted.remove(key);
            }
            Some(op) => {
                let name = if op == Op::Append { "APPEND" } else { "SUBTRACT" };
                return Err((
                    ResponseError::InvalidConfig.code(),
                    format!("Can't {name} to key {key} because its type is not LIST."),
                ));
            }
            None => {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("unknown config operation {op} for {key}"),
                ))
            }
        }
    }
    Ok(wanted)
}

/// An entity's configs as the legacy AlterConfigs gives them (the whole set;
/// a null value is no value).
pub fn replacement(given: &[(String, Option<String>)]) -> Result<BTreeMap<String, String>, Refusal> {
    let mut wanted = BTreeMap::new();
    for (key, value) in given {
        if let Some(v) = value {
            validate(key, v)?;
            wanted.insert(key.clone(), v.trim().to_string());
        }
    }
    Ok(wanted)
}

/// What broker `node` runs with for `key`: its own value, else the
/// cluster's default, else no limit.
pub fn value(entities: &Entities, node: i32, key: &str) -> i64 {
    let set = |entity: &str| entities.get(entity)?.get(key)?.trim().parse::<i64>().ok();
    set(&node.to_string()).or_else(|| set(DEFAULT_ENTITY)).unwrap_or(i64::MAX)
}

/// DescribeConfigs rows for the dynamic keys that are set: for a broker
/// (`Some(node)`) its own value then the default as synonyms, for the
/// cluster's default resource (`None`) the defaults alone. Unset keys have no
/// row, as in Kafka (they are not among its static broker configs).
pub fn describe(entities: &Entities, node: Option<i32>) -> Vec<Described> {
    let own = node.and_then(|n| entities.get(&n.to_string()));
    let default = entities.get(DEFAULT_ENTITY);
    KEYS.iter()
        .filter_map(|&key| {
            let mut synonyms = Vec::new();
            if let Some(v) = own.and_then(|c| c.get(key)) {
                synonyms.push((key.to_string(), Some(v.clone()), SOURCE_DYNAMIC_BROKER_CONFIG));
            }
            if let Some(v) = default.and_then(|c| c.get(key)) {
                synonyms.push((key.to_string(), Some(v.clone()), SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG));
            }
            let (_, value, source) = synonyms.first()?.clone();
            Some(Described {
                name: key.to_string(),
                value,
                source,
                config_type: TYPE_LONG,
                read_only: false,
                synonyms,
            })
        })
        .collect()
}

/// A single broker's configs of one entity type (its dynamic broker configs,
/// or its users): every entity in one JSON file of the store directory,
/// replaced atomically on each change.
pub struct LocalConfigs {
    path: PathBuf,
    entities: RwLock<Entities>,
}

pub const LOCAL_FILE: &str = ".broker-configs.json";
/// A single broker's users (their SCRAM credentials, as `/config/users/<user>`
/// holds them in a cluster). Readable only by the broker's own user.
pub const USERS_FILE: &str = ".user-configs.json";

/// A single broker's JSON file of `what` (its configs, users or ACLs);
/// `None` if there is none yet.
pub fn read_json(path: &Path, what: &str) -> seglog_core::Result<Option<Value>> {
    match std::fs::read(path) {
        Ok(data) => serde_json::from_slice(&data).map(Some).map_err(|e| seglog_core::Error::CorruptFile {
            path: path.to_path_buf(),
            reason: format!("unreadable {what}: {e}"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(seglog_core::Error::at(path)(e)),
    }
}

/// Replaces such a file atomically, readable by the broker's user alone
/// (it may hold credentials, as ZooKeeper's would).
pub fn write_json(path: &Path, value: &Value) -> seglog_core::Result<()> {
    seglog_core::checkpoint::write_atomic(path, value.to_string().as_bytes())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(seglog_core::Error::at(path))
}

impl LocalConfigs {
    pub fn open(dir: &Path, file: &str) -> seglog_core::Result<LocalConfigs> {
        let path = dir.join(file);
        let entities = read_json(&path, "broker configs")?
            .and_then(|v| {
                v["entities"]
                    .as_object()
                    .map(|m| m.iter().map(|(e, c)| (e.clone(), config_from_value(c))).collect())
            })
            .unwrap_or_default();
        Ok(LocalConfigs { path, entities: RwLock::new(entities) })
    }

    pub fn get(&self) -> Entities {
        self.entities.read().clone()
    }

    pub fn get_entity(&self, entity: &str) -> Option<BTreeMap<String, String>> {
        self.entities.read().get(entity).cloned()
    }

    /// Changes `entity`'s configs to what `change` makes of the current ones
    /// (`None`: no change; empty: the entity is dropped), under the lock, so that concurrent changes of
    /// one entity each see the other's.
    pub fn update(
        &self,
        entity: &str,
        change: impl FnOnce(&BTreeMap<String, String>) -> Option<BTreeMap<String, String>>,
    ) -> seglog_core::Result<()> {
        let mut entities = self.entities.write();
        let current = entities.get(entity).cloned().unwrap_or_default();
        let Some(config) = change(&current) else { return Ok(()) };
        let mut next = entities.clone();
        if config.is_empty() {
            next.remove(entity);
        } else {
            next.insert(entity.to_string(), config);
        }
        let body: serde_json::Map<String, Value> =
            next.iter().map(|(e, c)| (e.clone(), config_to_value(c))).collect();
        write_json(&self.path, &json!({"version": 1, "entities": body}))?;
        *entities = next;
        Ok(())
    }
}

#[cfg(test)]
#[path = "dynamic_config_test.rs"]
mod tests;
