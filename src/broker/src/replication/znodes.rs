//! Kafka's ZooKeeper layout: the paths and the JSON each znode holds, so that
//! `zkCli`, kazoo and what one knows of Kafka carry over.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub const BROKER_IDS: &str = "/brokers/ids";
pub const BROKER_TOPICS: &str = "/brokers/topics";
pub const CONFIG_TOPICS: &str = "/config/topics";
pub const CONFIG_BROKERS: &str = "/config/brokers";
pub const CONFIG_USERS: &str = "/config/users";
pub const CONFIG_CLIENTS: &str = "/config/clients";
/// Where a config change is announced to Kafka brokers (sequential
/// `config_change_` znodes naming the entity changed).
pub const CONFIG_CHANGES: &str = "/config/changes";
pub const CONTROLLER: &str = "/controller";
pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
pub const CLUSTER_ID: &str = "/cluster/id";
pub const PRODUCER_ID_BLOCK: &str = "/latest_producer_id_block";
/// Reassignments asked the old way (before AlterPartitionReassignments):
/// `{"version":1,"partitions":[{"topic","partition","replicas"}]}`, deleted by
/// the controller once every one of them is complete.
pub const REASSIGN_PARTITIONS: &str = "/admin/reassign_partitions";
/// Where a topic's deletion is asked of a Kafka controller.
pub const DELETE_TOPICS: &str = "/admin/delete_topics";
/// Where a leader that changed ISRs tells a Kafka controller to read them.
pub const ISR_CHANGE_NOTIFICATION: &str = "/isr_change_notification";

/// The persistent parents every member expects to exist.
pub const PARENTS: &[&str] =
    &["/brokers/ids", "/brokers/topics", "/config/topics", "/config/brokers", "/config/changes", "/cluster"];

pub fn broker_path(id: i32) -> String {
    format!("{BROKER_IDS}/{id}")
}
pub fn topic_path(topic: &str) -> String {
    format!("{BROKER_TOPICS}/{topic}")
}
pub fn partitions_path(topic: &str) -> String {
    format!("{BROKER_TOPICS}/{topic}/partitions")
}
pub fn partition_path(topic: &str, partition: i32) -> String {
    format!("{BROKER_TOPICS}/{topic}/partitions/{partition}")
}
pub fn state_path(topic: &str, partition: i32) -> String {
    format!("{BROKER_TOPICS}/{topic}/partitions/{partition}/state")
}
pub fn topic_config_path(topic: &str) -> String {
    format!("{CONFIG_TOPICS}/{topic}")
}

/// `/config/brokers/<entity>` (a broker id or `<default>`).
pub fn broker_config_path(entity: &str) -> String {
    format!("{CONFIG_BROKERS}/{entity}")
}

/// `/config/users/<user>`: a user's SCRAM credentials (and quotas), the
/// name sanitized as Kafka writes it.
pub fn user_config_path(user: &str) -> String {
    format!("{CONFIG_USERS}/{}", crate::client_quota::sanitize(user))
}

/// A `/config/changes/config_change_` notification: `entity_path` is
/// `topics/T` or `brokers/<entity>`.
pub fn config_change_to_json(entity_path: &str) -> Vec<u8> {
    json!({"version": 2, "entity_path": entity_path}).to_string().into_bytes()
}

/// One listener of a registered broker: `NAME://host:port` and its protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: i32,
    pub protocol: String,
}

/// `/brokers/ids/N` (version 5 of Kafka's registration). The broker epoch is
/// the znode's creation zxid, not a field.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerRegistration {
    pub id: i32,
    /// Every listener, as advertised.
    pub endpoints: Vec<Endpoint>,
    pub rack: Option<String>,
    /// The zxid that created the registration: a new one after every restart
    /// or expired session.
    pub epoch: i64,
    /// A seglog broker (its registration carries `seglog_version`, a field
    /// Kafka's decoder ignores); `false` for a Kafka broker.
    pub seglog: bool,
}

fn address(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

impl BrokerRegistration {
    /// The endpoint of `listener`, where clients of that listener (or, for
    /// the inter-broker listener, other brokers) connect.
    pub fn endpoint(&self, listener: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }

    /// `host:port` of `listener`.
    pub fn address(&self, listener: &str) -> Option<String> {
        self.endpoint(listener).map(|e| address(&e.host, e.port))
    }

    pub fn to_json(&self, now_ms: i64) -> Vec<u8> {
        // `host` and `port` are the PLAINTEXT endpoint's, as Kafka writes them.
        let plaintext = self.endpoints.iter().find(|e| e.protocol == "PLAINTEXT");
        let map: serde_json::Map<String, Value> =
            self.endpoints.iter().map(|e| (e.listener.clone(), Value::String(e.protocol.clone()))).collect();
        let mut v = json!({
            "version": 5,
            "host": plaintext.map(|e| e.host.clone()),
            "port": plaintext.map_or(-1, |e| e.port),
            "endpoints": self.endpoints.iter().map(|e| format!("{}://{}", e.listener, address(&e.host, e.port))).collect::<Vec<_>>(),
            "listener_security_protocol_map": map,
            "jmx_port": -1,
            "timestamp": now_ms.to_string(),
            "features": {},
            "seglog_version": env!("CARGO_PKG_VERSION"),
        });
        if let Some(rack) = &self.rack {
            v["rack"] = Value::String(rack.clone());
        }
        v.to_string().into_bytes()
    }

    pub fn from_json(id: i32, data: &[u8], epoch: i64) -> Option<BrokerRegistration> {
        let v: Value = serde_json::from_slice(data).ok()?;
        let map = v["listener_security_protocol_map"].as_object();
        let mut endpoints = Vec::new();
        for ep in v["endpoints"].as_array().into_iter().flatten() {
            let (listener, hp) = ep.as_str()?.split_once("://")?;
            let (h, p) = hp.rsplit_once(':')?;
            let protocol = map.and_then(|m| m.get(listener)?.as_str()).unwrap_or(listener);
            endpoints.push(Endpoint {
                listener: listener.to_string(),
                host: h.trim_start_matches('[').trim_end_matches(']').to_string(),
                port: p.parse().ok()?,
                protocol: protocol.to_string(),
            });
        }
        // Version 1 has host and port alone: a PLAINTEXT listener.
        if endpoints.is_empty() {
            endpoints.push(Endpoint {
                listener: "PLAINTEXT".into(),
                host: v["host"].as_str()?.to_string(),
                port: i32::try_from(v["port"].as_i64()?).ok()?,
                protocol: "PLAINTEXT".into(),
            });
        }
        Some(BrokerRegistration {
            id,
            endpoints,
            rack: v["rack"].as_str().map(str::to_string),
            epoch,
            seglog: v["seglog_version"].is_string(),
        })
    }
}

/// `/brokers/topics/T/partitions/P/state`: Kafka's LeaderAndIsr as the
/// controller (or the leader, for its ISR) last wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    pub controller_epoch: i32,
    pub leader: i32,
    pub version: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
}

impl PartitionState {
    pub fn new(controller_epoch: i32, leader: i32, leader_epoch: i32, isr: Vec<i32>) -> Self {
        PartitionState { controller_epoch, leader, version: 1, leader_epoch, isr }
    }
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
    pub fn from_json(data: &[u8]) -> Option<PartitionState> {
        serde_json::from_slice(data).ok()
    }
}

/// A new topic id in Kafka's text form (`Uuid.toString()`): the 16 bytes of a
/// random UUID in URL-safe base64 without padding, 22 characters.
pub fn new_topic_id() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

/// `/brokers/topics/T`: the replica assignment, preferred replica first,
/// under a new topic id.
pub fn assignment_to_json(assignment: &[Vec<i32>]) -> Vec<u8> {
    assignment_with_id_to_json(assignment, &new_topic_id())
}

/// `/brokers/topics/T` under topic id `id`.
pub fn assignment_with_id_to_json(assignment: &[Vec<i32>], id: &str) -> Vec<u8> {
    let partitions: BTreeMap<String, &Vec<i32>> =
        assignment.iter().enumerate().map(|(p, r)| (p.to_string(), r)).collect();
    json!({
        "version": 3,
        "partitions": partitions,
        "adding_replicas": {},
        "removing_replicas": {},
        "topic_id": id,
    })
    .to_string()
    .into_bytes()
}

/// A topic znode's JSON with its partitions replaced by `assignment` (more
/// partitions), everything else (the topic id) kept.
pub fn assignment_replaced(existing: &[u8], assignment: &[Vec<i32>]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(existing).ok()?;
    let partitions: serde_json::Map<String, Value> =
        assignment.iter().enumerate().map(|(p, r)| (p.to_string(), json!(r))).collect();
    *v.get_mut("partitions")? = Value::Object(partitions);
    Some(v.to_string().into_bytes())
}

/// The assignment in partition order; `None` if the JSON is not Kafka's or a
/// partition number is missing.
pub fn assignment_from_json(data: &[u8]) -> Option<Vec<Vec<i32>>> {
    let v: Value = serde_json::from_slice(data).ok()?;
    let map = v["partitions"].as_object()?;
    let mut out = vec![Vec::new(); map.len()];
    for (p, replicas) in map {
        let p: usize = p.parse().ok()?;
        let slot = out.get_mut(p)?;
        *slot = replicas
            .as_array()?
            .iter()
            .map(|r| r.as_i64().and_then(|r| i32::try_from(r).ok()))
            .collect::<Option<_>>()?;
    }
    Some(out)
}

/// Per partition, replicas: what a topic znode's `adding_replicas` or
/// `removing_replicas` holds during a reassignment.
pub type ReplicaSets = BTreeMap<i32, Vec<i32>>;

/// A topic znode's ongoing reassignments: (`adding_replicas`,
/// `removing_replicas`), empty without any (or in JSON older than version 2).
pub fn reassignment_from_json(data: &[u8]) -> (ReplicaSets, ReplicaSets) {
    let parse = |v: &Value| -> ReplicaSets {
        v.as_object()
            .into_iter()
            .flatten()
            .filter_map(|(p, rs)| {
                let p: i32 = p.parse().ok()?;
                let rs: Vec<i32> = rs
                    .as_array()?
                    .iter()
                    .map(|r| r.as_i64().and_then(|r| i32::try_from(r).ok()))
                    .collect::<Option<_>>()?;
                (!rs.is_empty()).then_some((p, rs))
            })
            .collect()
    };
    let Ok(v) = serde_json::from_slice::<Value>(data) else { return Default::default() };
    (parse(&v["adding_replicas"]), parse(&v["removing_replicas"]))
}

/// A topic znode's JSON with its partitions, `adding_replicas` and
/// `removing_replicas` replaced, everything else (the topic id) kept.
pub fn reassignment_replaced(
    existing: &[u8],
    assignment: &[Vec<i32>],
    adding: &ReplicaSets,
    removing: &ReplicaSets,
) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(&assignment_replaced(existing, assignment)?).ok()?;
    let sets = |s: &ReplicaSets| -> Value {
        Value::Object(s.iter().map(|(p, rs)| (p.to_string(), json!(rs))).collect())
    };
    let map = v.as_object_mut()?;
    map.insert("version".into(), json!(3));
    map.insert("adding_replicas".into(), sets(adding));
    map.insert("removing_replicas".into(), sets(removing));
    Some(v.to_string().into_bytes())
}

/// The topic id a topic znode carries (Kafka's since 2.8), if any.
pub fn topic_id_from_json(data: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(data).ok()?;
    v["topic_id"].as_str().filter(|id| !id.is_empty()).map(str::to_string)
}

/// An entity's config znode: `/config/topics/T`, `/config/brokers/<entity>`.
pub fn config_to_json(config: &BTreeMap<String, String>) -> Vec<u8> {
    config_to_value(config).to_string().into_bytes()
}

/// An entity's configs as Kafka lays them out: `{"version":1,"config":{...}}`.
pub fn config_to_value(config: &BTreeMap<String, String>) -> Value {
    json!({"version": 1, "config": config})
}

/// The configs of an entity's config znode; what does not parse is none.
pub fn config_from_json(data: &[u8]) -> BTreeMap<String, String> {
    config_from_value(&serde_json::from_slice(data).unwrap_or(Value::Null))
}

/// The configs of a value laid out as `config_to_value` lays them out.
pub fn config_from_value(v: &Value) -> BTreeMap<String, String> {
    v["config"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default()
}

/// `/controller`.
pub fn controller_to_json(id: i32, now_ms: i64) -> Vec<u8> {
    json!({"version": 1, "brokerid": id, "timestamp": now_ms.to_string()}).to_string().into_bytes()
}

pub fn controller_from_json(data: &[u8]) -> Option<i32> {
    let v: Value = serde_json::from_slice(data).ok()?;
    v["brokerid"].as_i64().and_then(|id| i32::try_from(id).ok())
}

/// `/isr_change_notification/isr_change_<seq>`: the partitions whose ISR a
/// leader changed, for the controller to read again (Kafka's notification
/// before AlterPartition).
pub fn isr_change_to_json(partitions: &[(String, i32)]) -> Vec<u8> {
    let ps: Vec<Value> = partitions.iter().map(|(t, p)| json!({"topic": t, "partition": p})).collect();
    json!({"version": 1, "partitions": ps}).to_string().into_bytes()
}

/// A partition and its replicas.
pub type PartitionReplicas = ((String, i32), Vec<i32>);

/// The partitions and target replicas of `/admin/reassign_partitions`;
/// `None` if the JSON is not Kafka's.
pub fn legacy_reassignment_from_json(data: &[u8]) -> Option<Vec<PartitionReplicas>> {
    let v: Value = serde_json::from_slice(data).ok()?;
    v["partitions"]
        .as_array()?
        .iter()
        .map(|p| {
            let topic = p["topic"].as_str()?.to_string();
            let partition = i32::try_from(p["partition"].as_i64()?).ok()?;
            let replicas = p["replicas"]
                .as_array()?
                .iter()
                .map(|r| r.as_i64().and_then(|r| i32::try_from(r).ok()))
                .collect::<Option<Vec<i32>>>()?;
            Some(((topic, partition), replicas))
        })
        .collect()
}

/// `/cluster/id`.
pub fn cluster_id_to_json(id: &str) -> Vec<u8> {
    json!({"version": "1", "id": id}).to_string().into_bytes()
}

pub fn cluster_id_from_json(data: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(data).ok()?;
    v["id"].as_str().map(str::to_string)
}

/// `/latest_producer_id_block`: the last block of producer ids handed out.
pub fn producer_id_block_to_json(broker: i32, start: i64, end: i64) -> Vec<u8> {
    json!({"version": 1, "broker": broker, "block_start": start.to_string(), "block_end": end.to_string()})
        .to_string()
        .into_bytes()
}

/// The block's last id.
pub fn producer_id_block_end(data: &[u8]) -> Option<i64> {
    let v: Value = serde_json::from_slice(data).ok()?;
    match &v["block_end"] {
        Value::String(s) => s.parse().ok(),
        n => n.as_i64(),
    }
}

#[cfg(test)]
#[path = "znodes_test.rs"]
mod tests;
