//! DescribeConfigs: a topic's every key with its value and where the value
//! comes from (its override, the store's default or Kafka's), and this
//! broker's keys; synonyms on request, as Kafka's `ConfigHelper` reports them.

use std::sync::Arc;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use seglog_core::error::Error;
use seglog_core::store::{validate_topic_name, Store};

use super::configs::{self, Described, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{blocking, error_code, Reply};
use crate::config::BrokerConfig;
use crate::dynamic_config::{self, Entities};
use crate::replication::ClusterView;
use crate::server::Shared;

/// v4 is the first flexible version; v1 (config sources, synonyms) the crate's first.
pub const VERSIONS: (i16, i16) = (1, 3);

fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// A topic's configs: from the store where it holds the topic (a cluster
/// member applies ZooKeeper's to its replicas, and its own changes at once);
/// a cluster member without a replica of it answers from ZooKeeper's (its view).
fn describe(
    store: &Store,
    broker: &BrokerConfig,
    dynamic: &Entities,
    cluster: Option<&ClusterView>,
    res: &DescribeConfigsResource,
) -> Result<Vec<Described>, (i16, String)> {
    let name = res.resource_name.as_str();
    match res.resource_type {
        RESOURCE_TOPIC => {
            validate_topic_name(name).map_err(|e| (error_code(&e), e.to_string()))?;
            let unknown = || {
                (ResponseError::UnknownTopicOrPartition.code(), format!("The topic '{name}' does not exist."))
            };
            let hosted = |t: &crate::replication::TopicView| {
                t.assignment.iter().any(|replicas| replicas.contains(&broker.node_id))
            };
            if let Some(view) = cluster.filter(|v| !v.topics.get(name).is_some_and(hosted)) {
                let overrides = &view.topics.get(name).ok_or_else(unknown)?.config;
                let effective = store
                    .config()
                    .topic_defaults
                    .with_overrides(overrides)
                    .map_err(|e| (error_code(&e), e.to_string()))?;
                return Ok(configs::describe_topic(&effective, overrides, store.config()));
            }
            let topic = store.topic(name).map_err(|e| match e {
                Error::UnknownTopic(_) => unknown(),
                e => (error_code(&e), e.to_string()),
            })?;
            Ok(configs::describe_topic(&topic.config, &topic.overrides, store.config()))
        }
        RESOURCE_BROKER => match configs::broker_resource(name, broker.node_id)? {
            true => {
                let mut rows = configs::describe_broker(broker, store.config());
                rows.extend(dynamic_config::describe(dynamic, Some(broker.node_id)));
                rows.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(rows)
            }
            // The cluster-wide dynamic defaults.
            false => Ok(dynamic_config::describe(dynamic, None)),
        },
        other => Err((
            ResponseError::InvalidRequest.code(),
            format!("Unsupported resource type: {other} (this broker describes topics (2) and brokers (4))"),
        )),
    }
}

fn entry(d: Described, synonyms: bool) -> DescribeConfigsResourceResult {
    DescribeConfigsResourceResult::default()
        .with_name(s(d.name))
        .with_value(d.value.map(s))
        .with_read_only(d.read_only)
        .with_config_source(d.source)
        .with_is_sensitive(false)
        .with_config_type(d.config_type)
        .with_synonyms(if synonyms {
            d.synonyms
                .into_iter()
                .map(|(n, v, source)| {
                    DescribeConfigsSynonym::default().with_name(s(n)).with_value(v.map(s)).with_source(source)
                })
                .collect()
        } else {
            Vec::new()
        })
}

pub async fn handle(shared: &Arc<Shared>, r: DescribeConfigsRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
    let broker = shared.config.clone();
    let dynamic = shared.dynamic_configs();
    let view = shared.replication.as_ref().map(|r| r.view());
    let results = blocking(move || {
        r.resources
            .iter()
            .map(|res| {
                let result = DescribeConfigsResult::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone());
                match describe(&store, &broker, &dynamic, view.as_deref(), res) {
                    Ok(rows) => {
                        // No keys (null or empty) means all of them.
                        let wanted = res.configuration_keys.as_ref().filter(|k| !k.is_empty());
                        result.with_configs(
                            rows.into_iter()
                                .filter(|d| wanted.is_none_or(|k| k.iter().any(|k| k.as_str() == d.name)))
                                .map(|d| entry(d, r.include_synonyms))
                                .collect(),
                        )
                    }
                    Err((code, m)) => result.with_error_code(code).with_error_message(Some(s(m))),
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    for res in &results {
        shared.metrics.error("DescribeConfigs", res.error_code);
    }
    Reply::Message(Box::new(ResponseKind::DescribeConfigs(
        DescribeConfigsResponse::default().with_results(results),
    )))
}
