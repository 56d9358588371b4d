//! The brokers of a cluster as one client sees them: bootstrap from a list of
//! "host:port", Metadata (brokers, partition leaders, per-topic errors) kept
//! and refreshed, idle connections pooled per node id, and the retry loop
//! every partition request shares: group by leader, send, and on a moved
//! leader (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...) or a cut
//! connection refresh the metadata, back off and send again, a bounded number
//! of times.
//!
//! Nodes are addressed by id: a broker's from Metadata, a coordinator's from
//! FindCoordinator (its address joins the broker list), and the bootstrap
//! addresses as -1, -2, ... until Metadata names them.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, FindCoordinatorRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use seglog_core::error::{kafka_codes, Error, Result};

use crate::config::ClientConfig;
use crate::connection::{Connection, Request};
use crate::errors::{self, About};

/// A broker as Metadata names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

impl Node {
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub error_code: i16,
    /// -1 while there is none.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMetadata {
    pub name: String,
    /// 0, or why the topic could not be described (UNKNOWN_TOPIC_OR_PARTITION, ...).
    pub error_code: i16,
    pub is_internal: bool,
    pub partitions: Vec<PartitionMetadata>,
}

/// What a Metadata answer says (or the union of answers, for the cache).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    pub cluster_id: Option<String>,
    pub controller_id: i32,
    pub brokers: BTreeMap<i32, Node>,
    pub topics: BTreeMap<String, TopicMetadata>,
}

/// What a partition request's per-item step says.
pub enum Step<T> {
    Done(Result<T>),
    /// Worth another attempt after a metadata refresh: a moved leader or the like.
    Retry(Error),
}

/// A client's view of the cluster. Shareable between threads: a request takes
/// a connection out of its node's pool for its round trip and puts it back
/// after, so requests to one broker from many threads run side by side.
pub struct Cluster {
    config: ClientConfig,
    bootstrap: Vec<String>,
    metadata: Mutex<Metadata>,
    idle: Mutex<HashMap<i32, Vec<Connection>>>,
    /// (key type, key) -> node id, from FindCoordinator.
    coordinators: Mutex<HashMap<(i8, String), i32>>,
}

/// "host:port" entries of a comma-separated list (Kafka's `bootstrap.servers`).
pub fn parse_bootstrap(servers: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for s in servers.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let s = s.strip_prefix("PLAINTEXT://").unwrap_or(s);
        match s.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => out.push(s.to_string()),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "bootstrap servers: expected HOST:PORT[,HOST:PORT...], got {s:?} in {servers:?}"
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "bootstrap servers: expected HOST:PORT[,HOST:PORT...], got {servers:?}"
        )));
    }
    Ok(out)
}

impl Cluster {
    /// Parses `bootstrap_servers` and asks one of them for the brokers; the
    /// first error if none answers.
    pub fn connect(bootstrap_servers: &str, config: ClientConfig) -> Result<Cluster> {
        let cluster = Cluster {
            config,
            bootstrap: parse_bootstrap(bootstrap_servers)?,
            metadata: Mutex::new(Metadata::default()),
            idle: Mutex::new(HashMap::new()),
            coordinators: Mutex::new(HashMap::new()),
        };
        cluster.refresh(Some(&[]), false)?;
        Ok(cluster)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The metadata known so far.
    pub fn metadata(&self) -> Metadata {
        self.metadata.lock().clone()
    }

    /// Asks a broker for the metadata of `topics` (every topic for None),
    /// creating missing ones if `allow_auto_create` and the broker allows it;
    /// the answer is merged into what is known and returned.
    pub fn refresh(&self, topics: Option<&[String]>, allow_auto_create: bool) -> Result<Metadata> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(allow_auto_create);
        let answer = self.send_any(&request)?;
        let fresh = Metadata {
            cluster_id: answer.cluster_id.map(|c| c.to_string()),
            controller_id: answer.controller_id.0,
            brokers: answer
                .brokers
                .into_iter()
                .map(|b| {
                    let node = Node {
                        node_id: b.node_id.0,
                        host: b.host.to_string(),
                        port: b.port,
                        rack: b.rack.map(|r| r.to_string()),
                    };
                    (node.node_id, node)
                })
                .collect(),
            topics: answer
                .topics
                .into_iter()
                .filter_map(|t| {
                    let name = t.name?.0.to_string();
                    let partitions = t
                        .partitions
                        .into_iter()
                        .map(|p| PartitionMetadata {
                            partition: p.partition_index,
                            error_code: p.error_code,
                            leader: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            replicas: p.replica_nodes.iter().map(|n| n.0).collect(),
                            isr: p.isr_nodes.iter().map(|n| n.0).collect(),
                        })
                        .collect::<Vec<_>>();
                    let mut partitions = partitions;
                    partitions.sort_by_key(|p| p.partition);
                    Some((
                        name.clone(),
                        TopicMetadata {
                            name,
                            error_code: t.error_code,
                            is_internal: t.is_internal,
                            partitions,
                        },
                    ))
                })
                .collect(),
        };
        let mut known = self.metadata.lock();
        known.cluster_id.clone_from(&fresh.cluster_id);
        known.controller_id = fresh.controller_id;
        if !fresh.brokers.is_empty() {
            known.brokers.clone_from(&fresh.brokers);
        }
        for (name, t) in &fresh.topics {
            if t.error_code == errors::NONE {
                known.topics.insert(name.clone(), t.clone());
            } else {
                known.topics.remove(name);
            }
        }
        Ok(fresh)
    }

    /// Forgets what is known of `topic`'s partitions: the next lookup asks.
    pub fn invalidate(&self, topic: &str) {
        self.metadata.lock().topics.remove(topic);
    }

    /// The partitions of `topic`, from the cache or a refresh.
    pub fn topic(&self, topic: &str, allow_auto_create: bool) -> Result<TopicMetadata> {
        if let Some(t) = self.metadata.lock().topics.get(topic) {
            return Ok(t.clone());
        }
        let fresh = self.refresh(Some(&[topic.to_string()]), allow_auto_create)?;
        let about = About { api: "Metadata", topic, partition: -1, message: None };
        match fresh.topics.get(topic) {
            None => Err(errors::from_code(kafka_codes::UNKNOWN_TOPIC_OR_PARTITION, about)),
            Some(t) if t.error_code == kafka_codes::UNKNOWN_TOPIC_OR_PARTITION => {
                Err(Error::UnknownTopic(topic.to_string()))
            }
            Some(t) if t.error_code != errors::NONE => Err(errors::from_code(t.error_code, about)),
            Some(t) => Ok(t.clone()),
        }
    }

    /// The node leading `topic`-`partition`. LEADER_NOT_AVAILABLE (retriable)
    /// while it has none; UnknownPartition past the topic's partitions.
    pub fn leader(&self, topic: &str, partition: i32, allow_auto_create: bool) -> Result<i32> {
        let t = self.topic(topic, allow_auto_create)?;
        let Some(p) = t.partitions.iter().find(|p| p.partition == partition) else {
            return Err(Error::UnknownPartition {
                topic: topic.to_string(),
                partition,
                count: t.partitions.len() as i32,
            });
        };
        if p.leader < 0 {
            return Err(errors::from_code(
                errors::LEADER_NOT_AVAILABLE,
                About { api: "Metadata", topic, partition, message: None },
            ));
        }
        Ok(p.leader)
    }

    fn address_of(&self, node: i32) -> Result<String> {
        if node < 0 {
            let i = (-node - 1) as usize;
            return self.bootstrap.get(i).cloned().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no bootstrap server {i} (there are {})",
                    self.bootstrap.len()
                ))
            });
        }
        match self.metadata.lock().brokers.get(&node) {
            Some(n) => Ok(n.address()),
            None => Err(errors::from_code(
                8, // BROKER_NOT_AVAILABLE
                About {
                    api: "Metadata",
                    topic: "",
                    partition: -1,
                    message: Some(&format!("node {node} is not among the brokers the metadata names")),
                },
            )),
        }
    }

    /// Runs `f` on a connection to `node` (pooled, or new). A connection `f`
    /// left broken is dropped; a sound one goes back to the pool.
    pub fn with_connection<T>(&self, node: i32, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let pooled = self.idle.lock().get_mut(&node).and_then(Vec::pop);
        let mut conn = match pooled {
            Some(c) => c,
            None => Connection::connect(&self.address_of(node)?, &self.config)?,
        };
        let out = f(&mut conn);
        if !conn.is_broken() {
            let mut idle = self.idle.lock();
            let pool = idle.entry(node).or_default();
            if pool.len() < self.config.max_idle_connections {
                pool.push(conn);
            }
        }
        out
    }

    /// Sends `request` to `node` at the negotiated version.
    pub fn send<R: Request>(&self, node: i32, request: &R) -> Result<R::Response> {
        self.with_connection(node, |c| c.send(request))
    }

    /// Drops the idle connections to `node` (after it failed: the others may
    /// be as dead, and finding out costs a timeout each).
    pub fn disconnect(&self, node: i32) {
        self.idle.lock().remove(&node);
    }

    /// Drops every idle connection (they reconnect on the next request).
    pub fn close(&self) {
        self.idle.lock().clear();
    }

    /// Sends `request` to any broker that answers: the known brokers, then
    /// the bootstrap servers. The last failure if none does.
    pub fn send_any<R: Request>(&self, request: &R) -> Result<R::Response> {
        let mut nodes: Vec<i32> = self.metadata.lock().brokers.keys().copied().collect();
        // A node with an idle connection first: no connect needed.
        let idle = self.idle.lock();
        nodes.sort_by_key(|n| idle.get(n).is_none_or(Vec::is_empty));
        drop(idle);
        nodes.extend((0..self.bootstrap.len() as i32).map(|i| -1 - i));
        let mut last = None;
        for node in nodes {
            match self.send(node, request) {
                Ok(r) => return Ok(r),
                Err(e) if errors::is_connection_error(&e) => {
                    self.disconnect(node);
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::InvalidArgument("no bootstrap servers".into())))
    }

    /// The node coordinating `key` (a group id for key type 0, a
    /// transactional id for 1), from FindCoordinator; cached until
    /// `forget_coordinator`.
    pub fn coordinator(&self, key_type: i8, key: &str) -> Result<i32> {
        if let Some(&node) = self.coordinators.lock().get(&(key_type, key.to_string())) {
            return Ok(node);
        }
        let request = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(key.to_string()))
            .with_key_type(key_type);
        let mut attempt = 0;
        loop {
            let answer = self.send_any(&request)?;
            if answer.error_code == errors::NONE {
                let node = Node {
                    node_id: answer.node_id.0,
                    host: answer.host.to_string(),
                    port: answer.port,
                    rack: None,
                };
                let id = node.node_id;
                self.metadata.lock().brokers.entry(id).or_insert(node);
                self.coordinators.lock().insert((key_type, key.to_string()), id);
                return Ok(id);
            }
            let message = answer.error_message.as_ref().map(|m| m.to_string());
            let e = errors::from_code(
                answer.error_code,
                About { api: "FindCoordinator", topic: "", partition: -1, message: message.as_deref() },
            );
            if !errors::is_retriable(answer.error_code) || attempt >= self.config.retries {
                return Err(e);
            }
            std::thread::sleep(self.config.backoff(attempt));
            attempt += 1;
        }
    }

    /// Forgets the coordinator of `key` (after NOT_COORDINATOR or a cut connection).
    pub fn forget_coordinator(&self, key_type: i8, key: &str) {
        self.coordinators.lock().remove(&(key_type, key.to_string()));
    }

    /// Whether the broker at `node` serves `key` in a version this client speaks.
    pub fn version(&self, node: i32, key: ApiKey) -> Result<i16> {
        self.with_connection(node, |c| c.version(key))
    }

    /// The retry loop of partition requests. `items` are grouped by the
    /// leader of their `(topic, partition)`; `op` sends one node's group and
    /// answers a step per item, in order. Items answered `Retry`, and every
    /// item of a group whose connection failed, go again after a backoff and
    /// a metadata refresh, up to `config.retries` times. One result per item,
    /// in order.
    pub fn per_leader<K, T>(
        &self,
        items: &[K],
        topic_partition: impl Fn(&K) -> (&str, i32),
        allow_auto_create: bool,
        mut op: impl FnMut(&Cluster, i32, &[&K]) -> Result<Vec<Step<T>>>,
    ) -> Vec<Result<T>> {
        let mut results: Vec<Option<Result<T>>> = items.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        let mut attempt = 0;
        loop {
            let mut retry: Vec<(usize, Error)> = Vec::new();
            let mut groups: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
            for &i in &pending {
                let (topic, partition) = topic_partition(&items[i]);
                match self.leader(topic, partition, allow_auto_create) {
                    Ok(node) => groups.entry(node).or_default().push(i),
                    Err(e) if errors::is_retriable_error(&e) => retry.push((i, e)),
                    Err(e) => results[i] = Some(Err(e)),
                }
            }
            for (node, group) in groups {
                let refs: Vec<&K> = group.iter().map(|&i| &items[i]).collect();
                match op(self, node, &refs) {
                    Ok(steps) if steps.len() == group.len() => {
                        for (i, step) in group.into_iter().zip(steps) {
                            match step {
                                Step::Done(r) => results[i] = Some(r),
                                Step::Retry(e) => retry.push((i, e)),
                            }
                        }
                    }
                    Ok(steps) => {
                        let e = Error::InvalidArgument(format!(
                            "a request step answered {} items for {}",
                            steps.len(),
                            group.len()
                        ));
                        for i in group {
                            results[i] = Some(Err(e.duplicate()));
                        }
                    }
                    Err(e) if errors::is_retriable_error(&e) => {
                        if errors::is_connection_error(&e) {
                            self.disconnect(node);
                        }
                        for i in group {
                            retry.push((i, e.duplicate()));
                        }
                    }
                    Err(e) => {
                        for i in group {
                            results[i] = Some(Err(e.duplicate()));
                        }
                    }
                }
            }
            if retry.is_empty() || attempt >= self.config.retries {
                for (i, e) in retry {
                    results[i] = Some(Err(e));
                }
                break;
            }
            std::thread::sleep(self.config.backoff(attempt));
            attempt += 1;
            let mut stale: Vec<String> =
                retry.iter().map(|(i, _)| topic_partition(&items[*i]).0.to_string()).collect();
            stale.sort();
            stale.dedup();
            for t in &stale {
                self.invalidate(t);
            }
            pending = retry.into_iter().map(|(i, _)| i).collect();
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::InvalidArgument("a request item got no answer".into()))))
            .collect()
    }

    /// The wait a Fetch adds to the request timeout.
    pub(crate) fn wait(ms: i32) -> Duration {
        Duration::from_millis(ms.max(0) as u64)
    }
}
