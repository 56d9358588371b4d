//! SyncGroup: the leader hands in the assignment (opaque bytes); every member
//! gets its part once the group's record is written.

use std::sync::Arc;

use kafka_protocol::messages::{ResponseKind, SyncGroupRequest, SyncGroupResponse};

use super::Reply;
use crate::coordinator::SyncGroup;
use crate::server::Shared;

/// v0–v3 (v4 is flexible).
pub const VERSIONS: (i16, i16) = (0, 3);

pub async fn handle(shared: &Arc<Shared>, r: SyncGroupRequest) -> Reply {
    let req = SyncGroup {
        group_id: r.group_id.0.to_string(),
        generation_id: r.generation_id,
        member_id: r.member_id.to_string(),
        group_instance_id: r.group_instance_id.map(|s| s.to_string()),
        protocol_type: r.protocol_type.map(|s| s.to_string()),
        protocol_name: r.protocol_name.map(|s| s.to_string()),
        assignments: r.assignments.into_iter().map(|a| (a.member_id.to_string(), a.assignment)).collect(),
    };
    let answer = shared.coordinator.sync_group(req).await;
    shared.metrics.error("SyncGroup", answer.error);
    let response =
        SyncGroupResponse::default().with_error_code(answer.error).with_assignment(answer.assignment);
    Reply::Message(Box::new(ResponseKind::SyncGroup(response)))
}
