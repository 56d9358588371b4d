//! The cluster as ZooKeeper describes it, read whole: brokers, the
//! controller, and every topic's assignment, config and partition states.
//! Every member keeps the latest copy; Metadata answers from it.

use std::sync::Arc;

use crate::security::acl::{self, Acls, PatternType, Resource, ResourceType};
use std::collections::BTreeMap;

use zookeeper_client::{Client, Error as ZkError};

use super::znodes::{self, BrokerRegistration, PartitionState};

/// A partition's state and the znode version it was read at (what a
/// conditional write of it must name).
#[derive(Debug, Clone, PartialEq)]
pub struct VersionedState {
    pub state: PartitionState,
    pub zk_version: i32,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicView {
    /// Each partition's replicas, preferred leader first.
    pub assignment: Vec<Vec<i32>>,
    /// The topic id in the topic znode (what every replica's
    /// `partition.metadata` names).
    pub topic_id: Option<String>,
    pub config: BTreeMap<String, String>,
    /// The config znode's version (-1 without one): a view read before a
    /// config change must not undo it where it was applied already.
    pub config_version: i32,
    /// Each partition's state; `None` until the controller created it.
    pub states: Vec<Option<VersionedState>>,
    /// Ongoing reassignments: per partition, the replicas being added and
    /// those being removed (the assignment holds both until it completes).
    pub adding: znodes::ReplicaSets,
    pub removing: znodes::ReplicaSets,
    /// The topic znode's version, what a write of a reassignment names.
    pub zk_version: i32,
}

impl TopicView {
    /// Where partition `p` is going: its assignment without the replicas
    /// being removed (the assignment itself when none is).
    pub fn target(&self, p: i32) -> Vec<i32> {
        let removing = self.removing.get(&p);
        self.assignment
            .get(usize::try_from(p).unwrap_or(usize::MAX))
            .into_iter()
            .flatten()
            .copied()
            .filter(|r| !removing.is_some_and(|rs| rs.contains(r)))
            .collect()
    }

    pub fn reassigning(&self, p: i32) -> bool {
        self.adding.contains_key(&p) || self.removing.contains_key(&p)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterView {
    pub brokers: BTreeMap<i32, BrokerRegistration>,
    pub controller: Option<i32>,
    pub topics: BTreeMap<String, TopicView>,
    /// Dynamic broker configs per entity (`/config/brokers/<entity>`).
    pub broker_configs: crate::dynamic_config::Entities,
    /// Each user's configs (`/config/users/<user>`): its SCRAM credentials.
    pub user_configs: crate::dynamic_config::Entities,
    /// The ACLs (`/kafka-acl/...`, `/kafka-acl-extended/prefixed/...`).
    pub acls: Arc<Acls>,
    /// The client quotas of users (`/config/users/<user>`), client ids
    /// (`/config/clients/<client>`) and both (`/config/users/<user>/clients/<client>`).
    pub client_quotas: Arc<crate::client_quota::QuotaConfigs>,
}

impl ClusterView {
    pub fn is_live(&self, broker: i32) -> bool {
        self.brokers.contains_key(&broker)
    }

    /// Whether a Kafka broker is a live member: a cluster in migration, where
    /// only a Kafka broker may be the controller (it sends its brokers
    /// LeaderAndIsr; a seglog controller sends none).
    pub fn has_kafka_broker(&self) -> bool {
        self.brokers.values().any(|b| !b.seglog)
    }

    pub fn state(&self, topic: &str, partition: i32) -> Option<&VersionedState> {
        let t = self.topics.get(topic)?;
        t.states.get(usize::try_from(partition).ok()?)?.as_ref()
    }

    /// The live brokers with their racks, as placement takes them.
    pub fn racks(&self) -> Vec<(i32, Option<String>)> {
        self.brokers.values().map(|b| (b.id, b.rack.clone())).collect()
    }

    pub fn replicas(&self, topic: &str, partition: i32) -> Option<&[i32]> {
        let t = self.topics.get(topic)?;
        t.assignment.get(usize::try_from(partition).ok()?).map(Vec::as_slice)
    }
}

/// `Ok(None)` for a znode that is not there.
async fn data(client: &Client, path: &str) -> Result<Option<(Vec<u8>, zookeeper_client::Stat)>, ZkError> {
    match client.get_data(path).await {
        Ok(d) => Ok(Some(d)),
        Err(ZkError::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

async fn children(client: &Client, path: &str) -> Result<Vec<String>, ZkError> {
    match client.list_children(path).await {
        Ok(c) => Ok(c),
        Err(ZkError::NoNode) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Reads the whole view. Znodes that vanish while it reads are left out;
/// ones that do not parse as Kafka's JSON too (and logged by the caller's
/// next read, as they never change into something else by themselves).
pub async fn read(client: &Client) -> Result<ClusterView, ZkError> {
    let mut view = ClusterView::default();
    for id in children(client, znodes::BROKER_IDS).await? {
        let Ok(n) = id.parse::<i32>() else { continue };
        if let Some((d, stat)) = data(client, &znodes::broker_path(n)).await? {
            if let Some(b) = BrokerRegistration::from_json(n, &d, stat.czxid) {
                view.brokers.insert(n, b);
            }
        }
    }
    for entity in children(client, znodes::CONFIG_BROKERS).await? {
        if let Some((d, _)) = data(client, &znodes::broker_config_path(&entity)).await? {
            view.broker_configs.insert(entity, znodes::config_from_json(&d));
        }
    }
    let mut quotas = crate::client_quota::QuotaConfigs::new();
    let mut add_quotas = |path: String, config: &BTreeMap<String, String>| {
        let values = crate::client_quota::quota_values(config);
        if let (false, Some(entity)) = (values.is_empty(), crate::client_quota::QuotaEntity::from_path(&path))
        {
            quotas.insert(entity, values);
        }
    };
    for user in children(client, znodes::CONFIG_USERS).await? {
        let path = format!("{}/{user}", znodes::CONFIG_USERS);
        let Some((d, stat)) = data(client, &path).await? else { continue };
        let config = znodes::config_from_json(&d);
        add_quotas(format!("users/{user}"), &config);
        let name = crate::client_quota::desanitize(&user).unwrap_or_else(|| user.clone());
        // A name's sanitized znode wins over one written under its raw name.
        if user == crate::client_quota::sanitize(&name) || !view.user_configs.contains_key(&name) {
            view.user_configs.insert(name, config);
        }
        // Only a user with quotas per client id has znodes under it.
        if stat.num_children == 0 {
            continue;
        }
        for client_id in children(client, &format!("{path}/clients")).await? {
            if let Some((d, _)) = data(client, &format!("{path}/clients/{client_id}")).await? {
                add_quotas(format!("users/{user}/clients/{client_id}"), &znodes::config_from_json(&d));
            }
        }
    }
    for client_id in children(client, znodes::CONFIG_CLIENTS).await? {
        if let Some((d, _)) = data(client, &format!("{}/{client_id}", znodes::CONFIG_CLIENTS)).await? {
            add_quotas(format!("clients/{client_id}"), &znodes::config_from_json(&d));
        }
    }
    view.client_quotas = Arc::new(quotas);
    let mut acls = Acls::new();
    for (root, pattern) in
        [(acl::LITERAL_ROOT, PatternType::Literal), (acl::PREFIXED_ROOT, PatternType::Prefixed)]
    {
        for type_name in children(client, root).await? {
            let Some(resource_type) = ResourceType::from_name(&type_name) else { continue };
            for name in children(client, &format!("{root}/{type_name}")).await? {
                let resource = Resource { resource_type, name, pattern };
                if let Some((d, _)) = data(client, &acl::znode(&resource)).await? {
                    let aces = acl::from_json(&serde_json::from_slice(&d).unwrap_or_default());
                    if !aces.is_empty() {
                        acls.insert(resource, aces);
                    }
                }
            }
        }
    }
    view.acls = Arc::new(acls);
    view.controller =
        data(client, znodes::CONTROLLER).await?.and_then(|(d, _)| znodes::controller_from_json(&d));
    for name in children(client, znodes::BROKER_TOPICS).await? {
        let Some((d, topic_stat)) = data(client, &znodes::topic_path(&name)).await? else { continue };
        let Some(assignment) = znodes::assignment_from_json(&d) else { continue };
        let topic_id = znodes::topic_id_from_json(&d);
        let (adding, removing) = znodes::reassignment_from_json(&d);
        let (config, config_version) = data(client, &znodes::topic_config_path(&name))
            .await?
            .map(|(d, stat)| (znodes::config_from_json(&d), stat.version))
            .unwrap_or((BTreeMap::new(), -1));
        let mut states = Vec::with_capacity(assignment.len());
        for p in 0..assignment.len() as i32 {
            let state = data(client, &znodes::state_path(&name, p)).await?.and_then(|(d, stat)| {
                PartitionState::from_json(&d).map(|state| VersionedState { state, zk_version: stat.version })
            });
            states.push(state);
        }
        view.topics.insert(
            name,
            TopicView {
                assignment,
                topic_id,
                config,
                config_version,
                states,
                adding,
                removing,
                zk_version: topic_stat.version,
            },
        );
    }
    Ok(view)
}
