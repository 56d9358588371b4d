//! JoinGroup: a member joins (or rejoins) a group and waits for the
//! rebalance to complete; the leader's answer lists the members' metadata.

use std::sync::Arc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, RequestHeader, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::coordinator::{JoinGroup, Protocol};
use crate::server::Shared;

/// v0–v5 (v6 is flexible). v4+ requires a known member id (KIP-394), v5+
/// carries group.instance.id (static membership).
pub const VERSIONS: (i16, i16) = (0, 5);

pub async fn handle(
    shared: &Arc<Shared>,
    r: JoinGroupRequest,
    header: &RequestHeader,
    version: i16,
) -> Reply {
    let req = JoinGroup {
        group_id: r.group_id.0.to_string(),
        member_id: r.member_id.to_string(),
        group_instance_id: r.group_instance_id.as_ref().map(|s| s.to_string()),
        client_id: header.client_id.as_ref().map(|s| s.to_string()).unwrap_or_default(),
        client_host: crate::connection::client_host(),
        session_timeout_ms: r.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout stands in.
        rebalance_timeout_ms: if version == 0 { r.session_timeout_ms } else { r.rebalance_timeout_ms },
        protocol_type: r.protocol_type.to_string(),
        protocols: r
            .protocols
            .into_iter()
            .map(|p| Protocol { name: p.name.to_string(), metadata: p.metadata })
            .collect(),
        require_known_member_id: version >= 4 && r.group_instance_id.is_none(),
    };
    let answer = shared.coordinator.join_group(req).await;
    shared.metrics.error("JoinGroup", answer.error);
    let members = answer
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(m.member_id))
                .with_group_instance_id(if version >= 5 {
                    m.group_instance_id.map(StrBytes::from_string)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    let response = JoinGroupResponse::default()
        .with_error_code(answer.error)
        .with_generation_id(answer.generation_id)
        // Before v7 the protocol name is not nullable: "" when there is none.
        .with_protocol_name(Some(StrBytes::from_string(answer.protocol_name.unwrap_or_default())))
        .with_leader(StrBytes::from_string(answer.leader))
        .with_member_id(StrBytes::from_string(answer.member_id))
        .with_members(members);
    Reply::Message(Box::new(ResponseKind::JoinGroup(response)))
}
