//! Metadata: the brokers and each partition's leader, replicas and ISR. A
//! single broker names itself the leader of every partition; a cluster
//! member answers from its view of ZooKeeper (every registered broker with
//! its rack; LEADER_NOT_AVAILABLE for a partition without a live leader).
//! Topics asked for are created on first mention when
//! `auto.create.topics.enable` and the request allow it (as Kafka's Metadata
//! does), in a cluster with `default.replication.factor`.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use seglog_core::error::Error;
use seglog_core::log::is_internal_topic;
use seglog_core::store::{validate_topic_name, Store};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::replication::{ClusterView, Placing, Replication};
use kafka_protocol::ResponseError;

use super::create_topics::MAX_PARTITIONS_PER_REQUEST;
use super::{blocking, error_code, Reply};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::Shared;

pub const VERSIONS: (i16, i16) = (0, 8);

/// Kafka's LEADER_NOT_AVAILABLE-free answer for one topic.
fn describe(store: &Store, name: &str, create: bool, node: i32) -> MetadataResponseTopic {
    let topic = if create { store.topic_or_create(name) } else { store.topic(name) };
    let t = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_is_internal(is_internal_topic(name));
    match topic {
        Ok(topic) => t.with_partitions(
            (0..topic.partitions.len() as i32)
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(BrokerId(node))
                        .with_leader_epoch(seglog_core::log::LEADER_EPOCH)
                        .with_replica_nodes(vec![BrokerId(node)])
                        .with_isr_nodes(vec![BrokerId(node)])
                })
                .collect(),
        ),
        Err(e) => {
            let code = match e {
                Error::UnknownTopic(_) => 3,
                ref other => error_code(other),
            };
            t.with_error_code(code)
        }
    }
}

/// Whether the topics a Metadata request would create stay within the
/// partitions one request may create; if not, it creates none of them (as
/// Kafka 4's controller refuses the whole creation) and says so in the log.
fn within_request_bound(names: Option<&[String]>, partitions: i32, missing: impl Fn(&str) -> bool) -> bool {
    let Some(names) = names else { return true };
    if names.len() as i64 * i64::from(partitions) <= MAX_PARTITIONS_PER_REQUEST {
        return true;
    }
    let new: std::collections::BTreeSet<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| validate_topic_name(n).is_ok() && !is_internal_topic(n) && missing(n))
        .collect();
    let asked = new.len() as i64 * i64::from(partitions);
    if asked <= MAX_PARTITIONS_PER_REQUEST {
        return true;
    }
    crate::logline::log(
        "warn",
        "auto_create_refused",
        &[("topics", &new.len()), ("partitions", &asked), ("max", &MAX_PARTITIONS_PER_REQUEST)],
    );
    false
}

/// A cluster member's answer for one topic, from its view of ZooKeeper.
fn describe_replicated(view: &ClusterView, name: &str) -> MetadataResponseTopic {
    let t = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_string()))))
        .with_is_internal(is_internal_topic(name));
    let Some(topic) = view.topics.get(name) else {
        return t.with_error_code(ResponseError::UnknownTopicOrPartition.code());
    };
    let ids = |v: &[i32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
    let partitions = topic
        .assignment
        .iter()
        .enumerate()
        .map(|(p, replicas)| {
            let state = topic.states.get(p).and_then(Option::as_ref).map(|s| &s.state);
            let (leader, epoch, isr) =
                state.map_or((-1, -1, &[][..]), |s| (s.leader, s.leader_epoch, &s.isr[..]));
            let offline: Vec<i32> = replicas.iter().copied().filter(|&b| !view.is_live(b)).collect();
            let code = if leader < 0 || !view.is_live(leader) {
                ResponseError::LeaderNotAvailable.code()
            } else {
                0
            };
            MetadataResponsePartition::default()
                .with_error_code(code)
                .with_partition_index(p as i32)
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(epoch)
                .with_replica_nodes(ids(replicas))
                .with_isr_nodes(ids(isr))
                .with_offline_replicas(ids(&offline))
        })
        .collect();
    t.with_partitions(partitions)
}

async fn handle_replicated(
    shared: &Arc<Shared>,
    r: MetadataRequest,
    version: i16,
    repl: &Replication,
) -> Reply {
    let wanted: Option<Vec<String>> = match r.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t.into_iter().filter_map(|t| t.name).map(|n| n.0.to_string()).collect()),
    };
    let create = (version < 4 || r.allow_auto_topic_creation) && shared.store.config().auto_create_topics;
    let mut view = repl.view();
    let mut created = Vec::new();
    let partitions = shared.store.config().num_partitions;
    let create =
        create && within_request_bound(wanted.as_deref(), partitions, |n| !view.topics.contains_key(n));
    if let (true, Some(names)) = (create, &wanted) {
        for name in names.iter().filter(|n| !view.topics.contains_key(*n)) {
            if validate_topic_name(name).is_err() || is_internal_topic(name) {
                continue;
            }
            let rf = shared.config.default_replication_factor;
            let made = repl
                .create_topic(
                    name,
                    Placing::Auto { partitions, replication_factor: rf },
                    &BTreeMap::new(),
                    false,
                    Duration::ZERO,
                )
                .await;
            if made.is_ok() {
                created.push(name.clone());
            }
        }
        super::client_quotas::record_mutations(shared, created.len() as i64 * i64::from(partitions));
        view = repl.view();
    }
    // The answer is made in turn with other read-only answers (see connection.rs).
    let _turn = shared.answering.acquire().await;
    let topics: Vec<MetadataResponseTopic> = match wanted {
        None => view.topics.keys().map(|n| describe_replicated(&view, n)).collect(),
        Some(names) => names
            .iter()
            .map(|n| {
                let t = describe_replicated(&view, n);
                // Kafka answers a topic it just created with LEADER_NOT_AVAILABLE.
                if created.contains(n) && t.error_code != 0 {
                    t.with_error_code(ResponseError::LeaderNotAvailable.code())
                } else if t.error_code != 0 && validate_topic_name(n).is_err() {
                    t.with_error_code(ResponseError::InvalidTopicException.code())
                } else {
                    t
                }
            })
            .collect(),
    };
    // Each broker as the client's listener reaches it; one without that
    // listener is left out, as Kafka leaves it out.
    let listener = shared.listener_name();
    let brokers = view
        .brokers
        .values()
        .filter_map(|b| Some((b, b.endpoint(&listener)?)))
        .map(|(b, e)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(e.port)
                .with_rack(b.rack.clone().map(StrBytes::from_string))
        })
        .collect();
    let response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(repl.cluster_id())))
        .with_controller_id(BrokerId(view.controller.unwrap_or(-1)))
        .with_topics(topics);
    for t in &response.topics {
        shared.metrics.error("Metadata", t.error_code);
    }
    Reply::Message(Box::new(ResponseKind::Metadata(response)))
}

/// With an authorizer, Kafka's rules: a client sees only the topics it may
/// DESCRIBE (one it names and may not is TOPIC_AUTHORIZATION_FAILED), and a
/// topic is created on first mention only for a client that may CREATE it
/// (on the cluster or the topic).
pub async fn handle(shared: &Arc<Shared>, mut r: MetadataRequest, version: i16) -> Reply {
    if !shared.authorizer.enabled {
        return handle_allowed(shared, r, version).await;
    }
    let may = |op: Operation, name: &str| shared.authorize(op, ResourceType::Topic, name);
    let may_create = shared.authorize(Operation::Create, ResourceType::Cluster, CLUSTER_NAME);
    let exists = |name: &str| match &shared.replication {
        Some(repl) => repl.view().topics.contains_key(name),
        None => shared.store.topic(name).is_ok(),
    };
    let creating = (version < 4 || r.allow_auto_topic_creation) && shared.store.config().auto_create_topics;
    let mut denied = Vec::new();
    if let Some(topics) = r.topics.as_mut() {
        topics.retain(|t| {
            let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else { return true };
            let allowed = may(Operation::Describe, &name)
                && (!creating || exists(&name) || may_create || may(Operation::Create, &name));
            if !allowed {
                denied.push(name);
            }
            allowed
        });
    }
    let all = r.topics.is_none()
        || (version == 0 && r.topics.as_ref().is_some_and(|t| t.is_empty()) && denied.is_empty());
    if r.topics.as_ref().is_some_and(|t| t.is_empty()) && !denied.is_empty() && version == 0 {
        // v0's empty list asks for every topic: ask for none instead.
        r.topics = Some(vec![kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str(""))))]);
    }
    let mut reply = handle_allowed(shared, r, version).await;
    if let Reply::Message(message) = &mut reply {
        if let ResponseKind::Metadata(response) = message.as_mut() {
            if all {
                response.topics.retain(|t| t.name.as_ref().is_some_and(|n| may(Operation::Describe, n)));
            } else {
                response.topics.retain(|t| t.name.as_ref().is_none_or(|n| !n.is_empty()));
            }
            for name in denied {
                response.topics.push(
                    MetadataResponseTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(name))))
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                );
            }
        }
    }
    reply
}

async fn handle_allowed(shared: &Arc<Shared>, r: MetadataRequest, version: i16) -> Reply {
    if let Some(repl) = &shared.replication {
        return handle_replicated(shared, r, version, repl).await;
    }
    let store = shared.store.clone();
    let node = shared.config.node_id;
    // v0 asks for every topic with an empty list, later versions with null.
    let wanted: Option<Vec<String>> = match r.topics {
        None => None,
        Some(t) if t.is_empty() && version == 0 => None,
        Some(t) => Some(t.into_iter().filter_map(|t| t.name).map(|n| n.0.to_string()).collect()),
    };
    // v4+ carries the client's consent to creation; earlier versions always create.
    let create = version < 4 || r.allow_auto_topic_creation;
    // The answer is made in turn with other read-only answers (see connection.rs).
    let _turn = shared.answering.acquire().await;
    let (topics, created) = blocking(move || match wanted {
        None => {
            (store.topics().unwrap_or_default().iter().map(|n| describe(&store, n, false, node)).collect(), 0)
        }
        Some(names) => {
            let partitions = store.config().num_partitions;
            let unknown = |n: &str| matches!(store.topic(n), Err(Error::UnknownTopic(_)));
            let create = create && within_request_bound(Some(&names), partitions, unknown);
            let missing: Vec<&String> = names.iter().filter(|n| create && unknown(n)).collect();
            let topics = names.iter().map(|n| describe(&store, n, create, node)).collect::<Vec<_>>();
            let created = missing.into_iter().filter(|n| !unknown(n)).count() as i64 * i64::from(partitions);
            (topics, created)
        }
    })
    .await;
    super::client_quotas::record_mutations(shared, created);
    let (host, port) = shared.advertised_here();
    let response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(node))
            .with_host(StrBytes::from_string(host))
            .with_port(port)])
        .with_cluster_id(Some(StrBytes::from_string(shared.cluster_id.clone())))
        .with_controller_id(BrokerId(node))
        .with_topics(topics);
    for t in &response.topics {
        shared.metrics.error("Metadata", t.error_code);
    }
    Reply::Message(Box::new(ResponseKind::Metadata(response)))
}
