//! Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it
//! to rejoin.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseKind};

use super::Reply;
use crate::server::Shared;

/// v0–v3 (v4 is flexible).
pub const VERSIONS: (i16, i16) = (0, 3);

pub async fn handle(shared: &Arc<Shared>, r: HeartbeatRequest) -> Reply {
    let code = shared.coordinator.heartbeat(
        &r.group_id.0,
        &r.member_id,
        r.group_instance_id.as_deref(),
        r.generation_id,
    );
    shared.metrics.error("Heartbeat", code);
    Reply::Message(Box::new(ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))))
}
