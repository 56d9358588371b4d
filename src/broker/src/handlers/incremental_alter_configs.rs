//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's
//! overrides (APPEND and SUBTRACT only on list keys such as cleanup.policy),
//! SET and DELETE on a broker entity's dynamic configs,
//! all of a resource's operations checked together and applied at once, or
//! only checked with `validate_only`.

use std::sync::Arc;

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::alter_configs::{alter_broker, alter_topic, write_cluster_configs};
use super::configs::{self, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{blocking, Reply};
use crate::dynamic_config;
use crate::server::Shared;

/// v1 is the first flexible version.
pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle(shared: &Arc<Shared>, r: IncrementalAlterConfigsRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
    let view = shared.replication.as_ref().map(|r| r.view());
    let dynamic = shared.dynamic_configs();
    let validate_only = r.validate_only;
    let me = shared.clone();
    let results = blocking(move || {
        let defaults = store.config().topic_defaults.to_map();
        r.resources
            .iter()
            .map(|res| {
                let name = res.resource_name.as_str();
                let ops: Vec<_> = res
                    .configs
                    .iter()
                    .map(|c| {
                        (c.name.to_string(), c.config_operation, c.value.as_ref().map(|v| v.to_string()))
                    })
                    .collect();
                let outcome = match res.resource_type {
                    RESOURCE_TOPIC => {
                        alter_topic(&store, view.as_deref(), name, validate_only, |overrides| {
                            configs::incremental_changes(overrides, &defaults, &ops)
                        })
                    }
                    RESOURCE_BROKER => alter_broker(&me, &dynamic, name, validate_only, |current| {
                        dynamic_config::incremental(current, &ops)
                    }),
                    other => Err((
                        ResponseError::InvalidRequest.code(),
                        format!(
                            "IncrementalAlterConfigs is only supported for topics and brokers, but resource \
                             type is {other}"
                        ),
                    )),
                };
                let response = AlterConfigsResourceResponse::default()
                    .with_resource_type(res.resource_type)
                    .with_resource_name(res.resource_name.clone());
                match outcome {
                    Ok(change) => (response, change),
                    Err((code, m)) => (
                        response.with_error_code(code).with_error_message(Some(StrBytes::from_string(m))),
                        None,
                    ),
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
        shared.metrics.error("IncrementalAlterConfigs", res.error_code);
    }
    Reply::Message(Box::new(ResponseKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(responses),
    )))
}
