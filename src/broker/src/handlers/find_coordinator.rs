//! FindCoordinator: a single broker coordinates every group (key type 0); in
//! a cluster a group's coordinator is the leader of its partition of
//! `__consumer_offsets`, which the first FindCoordinator creates. There is no
//! transaction coordinator (key type 1): COORDINATOR_NOT_AVAILABLE.

use std::sync::Arc;

use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Reply;
use crate::server::Shared;

/// v0–v2 (non-flexible; v3 is flexible, v4 batches keys).
pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle(shared: &Arc<Shared>, r: FindCoordinatorRequest, version: i16) -> Reply {
    let mut response = FindCoordinatorResponse::default()
        .with_node_id(BrokerId(-1))
        .with_host(StrBytes::from_static_str(""))
        .with_port(-1);
    let found = match r.key_type {
        0 => match &shared.replication {
            None => Ok((shared.config.node_id, shared.advertised_here())),
            Some(rep) => rep
                .group_coordinator(r.key.as_str(), &shared.listener_name())
                .await
                .map(|(id, host, port)| (id, (host, port))),
        },
        1 => Err((
            ResponseError::CoordinatorNotAvailable.code(),
            "transactions are not supported by this broker".to_string(),
        )),
        _ => Err((
            ResponseError::InvalidRequest.code(),
            "key type must be 0 (group) or 1 (transaction)".into(),
        )),
    };
    match found {
        Ok((id, (host, port))) => {
            response =
                response.with_node_id(BrokerId(id)).with_host(StrBytes::from_string(host)).with_port(port);
        }
        Err((code, why)) => {
            response.error_code = code;
            if version >= 1 {
                response.error_message = Some(StrBytes::from_string(why));
            }
        }
    }
    shared.metrics.error("FindCoordinator", response.error_code);
    Reply::Message(Box::new(ResponseKind::FindCoordinator(response)))
}
