//! IncrementalAlterConfigs: SET, DELETE, APPEND and SUBTRACT on a topic's
//! overrides (APPEND and SUBTRACT only on list keys such as cleanup.policy),
//! all of a resource's operations checked together and applied at once, or
//! only checked with `validate_only`.

use std::sync::Arc;

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::alter_configs::{alter_topic, write_cluster_configs};
use super::configs::{self, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{blocking, Reply};
use crate::server::Shared;

/// v1 is the first flexible version.
pub const VERSIONS: (i16, i16) = (0, 0);

pub async fn handle(shared: &Arc<Shared>, r: IncrementalAlterConfigsRequest, _version: i16) -> Reply {
    let store = shared.store.clone();
    let node = shared.config.node_id;
    let view = shared.replication.as_ref().map(|r| r.view());
    let validate_only = r.validate_only;
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
                        alter_topic(&store, view.as_deref(), name, r.validate_only, |overrides| {
                            configs::incremental_changes(overrides, &defaults, &ops)
                        })
                    }
                    RESOURCE_BROKER => {
                        // Deleting a dynamic value there is none of changes nothing,
                        // as in Kafka (what `kafka-reassign-partitions --verify`
                        // does to clear throttles).
                        let keys: Vec<String> = ops
                            .iter()
                            .filter(|o| configs::Op::from_id(o.1) != Some(configs::Op::Delete))
                            .map(|o| o.0.clone())
                            .collect();
                        configs::alter_broker(name, node, &keys).map(|()| None)
                    }
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
                    Ok(wanted) => (response, wanted.map(|w| (name.to_string(), w))),
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
