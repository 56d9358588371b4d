//! FindCoordinator: this broker coordinates every group (key type 0). There is
//! no transaction coordinator (key type 1): COORDINATOR_NOT_AVAILABLE.

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
    let (code, why) = match r.key_type {
        0 => (0, None),
        1 => (
            ResponseError::CoordinatorNotAvailable.code(),
            Some("transactions are not supported by this broker"),
        ),
        _ => (ResponseError::InvalidRequest.code(), Some("key type must be 0 (group) or 1 (transaction)")),
    };
    // A cluster's groups all live on one member: the live broker with the
    // lowest id (their offsets are that broker's, not replicated).
    let coordinator = match &shared.replication {
        None => Some((shared.config.node_id, shared.advertised.clone())),
        Some(r) => {
            r.coordinator().and_then(|id| r.view().brokers.get(&id).map(|b| (id, (b.host.clone(), b.port))))
        }
    };
    let (code, why) = match (code, coordinator.is_some()) {
        (0, false) => (ResponseError::CoordinatorNotAvailable.code(), Some("no broker is registered")),
        other => (other.0, why),
    };
    if let (0, Some((id, (host, port)))) = (code, coordinator) {
        response = response.with_node_id(BrokerId(id)).with_host(StrBytes::from_string(host)).with_port(port);
    } else {
        response.error_code = code;
        if version >= 1 {
            response.error_message = why.map(StrBytes::from_static_str);
        }
    }
    shared.metrics.error("FindCoordinator", response.error_code);
    Reply::Message(Box::new(ResponseKind::FindCoordinator(response)))
}
