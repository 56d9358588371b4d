//! Metadata: this broker, as the leader of every partition, and the topics
//! asked for, created on first mention when `auto.create.topics.enable` and the
//! request allow it (as Kafka's Metadata does).

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use seglog_core::error::Error;
use seglog_core::log::is_internal_topic;
use seglog_core::store::Store;

use super::{blocking, error_code, Reply};
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

pub async fn handle(shared: &Arc<Shared>, r: MetadataRequest, version: i16) -> Reply {
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
    let topics = blocking(move || match wanted {
        None => store.topics().unwrap_or_default().iter().map(|n| describe(&store, n, false, node)).collect(),
        Some(names) => names.iter().map(|n| describe(&store, n, create, node)).collect::<Vec<_>>(),
    })
    .await;
    let (host, port) = &shared.advertised;
    let response = MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(node))
            .with_host(StrBytes::from_string(host.clone()))
            .with_port(*port)])
        .with_cluster_id(Some(StrBytes::from_string(shared.cluster_id.clone())))
        .with_controller_id(BrokerId(node))
        .with_topics(topics);
    for t in &response.topics {
        shared.metrics.error("Metadata", t.error_code);
    }
    Reply::Message(Box::new(ResponseKind::Metadata(response)))
}
