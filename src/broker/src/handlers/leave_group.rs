//! LeaveGroup: members leave at once instead of waiting out their session
//! (one member id up to v2; a batch of members, static ones by instance id, in v3).

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::server::Shared;

/// v0–v3 (v4 is flexible).
pub const VERSIONS: (i16, i16) = (0, 3);

pub async fn handle(shared: &Arc<Shared>, r: LeaveGroupRequest, version: i16) -> Reply {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        r.members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|s| s.to_string())))
            .collect()
    } else {
        vec![(r.member_id.to_string(), None)]
    };
    let (top, codes) = shared.coordinator.leave_group(&r.group_id.0, &members).await;
    let mut response = LeaveGroupResponse::default();
    if version >= 3 {
        response.error_code = top;
        response.members = members
            .into_iter()
            .zip(codes)
            .map(|((id, instance), code)| {
                MemberResponse::default()
                    .with_member_id(StrBytes::from_string(id))
                    .with_group_instance_id(instance.map(StrBytes::from_string))
                    .with_error_code(code)
            })
            .collect();
    } else {
        // One member: its error is the response's.
        response.error_code = if top != 0 { top } else { codes.first().copied().unwrap_or(0) };
    }
    shared.metrics.error("LeaveGroup", response.error_code);
    Reply::Message(Box::new(ResponseKind::LeaveGroup(response)))
}
