//! AlterConfigs (the legacy, non-incremental one): a topic's whole override
//! set, or a broker entity's whole set of dynamic configs, replaced by the
//! request's (a key left out returns to its default), or only checked with
//! `validate_only`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use seglog_core::error::Error;
use seglog_core::store::{validate_topic_name, Store};

use super::configs::{self, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{blocking, error_code, Reply};
use crate::dynamic_config::{self, Entities};
use crate::replication::ClusterView;
use crate::server::Shared;

/// v2 is the first flexible version.
pub const VERSIONS: (i16, i16) = (0, 1);

pub type Refusal = (i16, String);

/// Applies (or with `validate_only` checks) changes to a topic's overrides;
/// `changes` is computed from the overrides `f` is given. A cluster member's
/// (`cluster` given) overrides are ZooKeeper's (`/config/topics/T`): nothing
/// is applied here, the overrides wanted are returned for the caller to write.
pub fn alter_topic(
    store: &Store,
    cluster: Option<&ClusterView>,
    name: &str,
    validate_only: bool,
    changes: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, Option<String>>, Refusal>,
) -> Result<Option<Change>, Refusal> {
    let failed = |e: Error| (error_code(&e), e.to_string());
    // A value the topic cannot take: Kafka's INVALID_CONFIG message.
    let invalid = |e: Error| match e {
        Error::InvalidConfig(m) => (
            ResponseError::InvalidConfig.code(),
            format!("Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): {m}"),
        ),
        e => failed(e),
    };
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest.code(),
            "Default topic resources are not allowed.".into(),
        ));
    }
    validate_topic_name(name).map_err(failed)?;
    let unknown =
        || (ResponseError::UnknownTopicOrPartition.code(), format!("The topic '{name}' does not exist."));
    if let Some(view) = cluster {
        let current = &view.topics.get(name).ok_or_else(unknown)?.config;
        let wanted = configs::applied(current, &changes(current)?);
        configs::within_bounds(current, &wanted)?;
        store.config().topic_defaults.with_overrides(&wanted).map_err(invalid)?;
        return Ok(Some(Change::Topic(name.to_string(), wanted)));
    }
    let topic = store.topic(name).map_err(|e| match e {
        Error::UnknownTopic(_) => {
            (ResponseError::UnknownTopicOrPartition.code(), format!("The topic '{name}' does not exist."))
        }
        e => failed(e),
    })?;
    let changes = changes(&topic.overrides)?;
    // Unknown keys and bad values are INVALID_CONFIG, checked whole before any change.
    let wanted = configs::applied(&topic.overrides, &changes);
    configs::within_bounds(&topic.overrides, &wanted)?;
    store.config().topic_defaults.with_overrides(&wanted).map_err(invalid)?;
    if validate_only {
        return Ok(None);
    }
    store.alter_topic_config(name, &changes).map_err(failed).map(|()| None)
}

/// Applies (or with `validate_only` checks) changes to a BROKER resource's
/// dynamic configs (this broker's id, or "" for the cluster's defaults);
/// `wanted` computes the entity's new configs from its current ones. A
/// single broker's are written here; a cluster member's are returned for the
/// caller to write to ZooKeeper.
pub fn alter_broker(
    shared: &Shared,
    dynamic: &Entities,
    name: &str,
    validate_only: bool,
    wanted: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Refusal>,
) -> Result<Option<Change>, Refusal> {
    configs::broker_resource(name, shared.config.node_id)?;
    let entity = dynamic_config::entity(name);
    if let Some(local) = &shared.local_configs {
        // Computed from the configs under the store's lock, not `dynamic`'s
        // snapshot: concurrent changes of one entity each see the other's.
        let mut refused = None;
        local
            .update(entity, |current| match wanted(current) {
                Ok(w) if !validate_only && w != *current => Some(w),
                Ok(_) => None,
                Err(r) => {
                    refused = Some(r);
                    None
                }
            })
            .map_err(|e| (error_code(&e), e.to_string()))?;
        return refused.map_or(Ok(None), Err);
    }
    let current = dynamic.get(entity).cloned().unwrap_or_default();
    let wanted = wanted(&current)?;
    if validate_only || wanted == current {
        return Ok(None);
    }
    Ok(Some(Change::Broker(entity.to_string(), wanted)))
}

/// A config change a cluster member writes to ZooKeeper: a topic's
/// overrides, or a broker entity's dynamic configs.
pub enum Change {
    Topic(String, BTreeMap<String, String>),
    Broker(String, BTreeMap<String, String>),
}

/// A cluster member's changes, written to ZooKeeper once `blocking` checked
/// them: each resource's answer, with its error if the write failed.
pub async fn write_cluster_configs<R>(
    shared: &Shared,
    validate_only: bool,
    results: Vec<(R, Option<Change>)>,
    fail: impl Fn(R, i16, String) -> R,
) -> Vec<R> {
    let mut out = Vec::with_capacity(results.len());
    for (response, change) in results {
        let written = match (&shared.replication, change) {
            (Some(repl), Some(Change::Topic(name, wanted))) if !validate_only => {
                repl.set_topic_config(&name, &wanted).await
            }
            (Some(repl), Some(Change::Broker(entity, wanted))) if !validate_only => {
                repl.set_broker_config(&entity, &wanted).await
            }
            _ => Ok(()),
        };
        out.push(match written {
            Ok(()) => response,
            Err((code, m)) => fail(response, code, m),
        });
    }
    out
}

pub async fn handle(shared: &Arc<Shared>, r: AlterConfigsRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
    let view = shared.replication.as_ref().map(|r| r.view());
    let dynamic = shared.dynamic_configs();
    let validate_only = r.validate_only;
    let me = shared.clone();
    let results = blocking(move || {
        r.resources
            .iter()
            .map(|res| {
                let name = res.resource_name.as_str();
                let outcome = match res.resource_type {
                    RESOURCE_TOPIC => alter_topic(&store, view.as_deref(), name, validate_only, |overrides| {
                        // A null value is no override (Kafka drops it).
                        let wanted: BTreeMap<String, String> = res
                            .configs
                            .iter()
                            .filter_map(|c| Some((c.name.to_string(), c.value.as_ref()?.to_string())))
                            .collect();
                        Ok(configs::replacement_changes(overrides, &wanted))
                    }),
                    RESOURCE_BROKER => alter_broker(&me, &dynamic, name, validate_only, |_| {
                        let given: Vec<(String, Option<String>)> = res
                            .configs
                            .iter()
                            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
                            .collect();
                        dynamic_config::replacement(&given)
                    }),
                    other => Err((
                        ResponseError::InvalidRequest.code(),
                        format!("AlterConfigs is only supported for topics and brokers, but resource type is {other}"),
                    )),
                };
                let response = AlterConfigsResourceResponse::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone());
                match outcome {
                    Ok(change) => (response, change),
                    Err((code, m)) => {
                        (response.with_error_code(code).with_error_message(Some(StrBytes::from_string(m))), None)
                    }
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    let responses = write_cluster_configs(shared, validate_only, results, |r, code, m| {
        r.with_error_code(code).with_error_message(Some(StrBytes::from_string(m)))
    })
    .await;
    for res in &responses {
        shared.metrics.error("AlterConfigs", res.error_code);
    }
    Reply::Message(Box::new(ResponseKind::AlterConfigs(
        AlterConfigsResponse::default().with_responses(responses),
    )))
}
