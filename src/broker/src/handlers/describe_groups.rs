//! DescribeGroups: state, protocol and members of groups (metadata and
//! assignments only for Stable groups, as Kafka does).

use std::sync::Arc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::security::acl::{Operation, ResourceType};
use crate::server::Shared;

/// v0–v4 (v5 is flexible).
pub const VERSIONS: (i16, i16) = (0, 4);

/// What a client may be allowed to do to a group: READ, DELETE and DESCRIBE.
const GROUP_OPERATIONS: [Operation; 3] = [Operation::Read, Operation::Delete, Operation::Describe];

pub async fn handle(shared: &Arc<Shared>, r: DescribeGroupsRequest, version: i16) -> Reply {
    let ids: Vec<String> = r.groups.iter().map(|g| g.0.to_string()).collect();
    let groups = shared
        .coordinator
        .describe_groups(&ids)
        .into_iter()
        .map(|d| {
            shared.metrics.error("DescribeGroups", d.error);
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    DescribedGroupMember::default()
                        .with_member_id(StrBytes::from_string(m.member_id))
                        .with_group_instance_id(if version >= 4 {
                            m.group_instance_id.map(StrBytes::from_string)
                        } else {
                            None
                        })
                        .with_client_id(StrBytes::from_string(m.client_id))
                        .with_client_host(StrBytes::from_string(m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment)
                })
                .collect();
            let ops = if version >= 3 && r.include_authorized_operations {
                GROUP_OPERATIONS
                    .iter()
                    .filter(|op| shared.authorize(**op, ResourceType::Group, &d.group_id))
                    .map(|op| 1 << op.wire())
                    .sum()
            } else {
                i32::MIN
            };
            DescribedGroup::default()
                .with_error_code(d.error)
                .with_group_id(GroupId(StrBytes::from_string(d.group_id)))
                .with_group_state(StrBytes::from_static_str(d.state.name()))
                .with_protocol_type(StrBytes::from_string(d.protocol_type))
                .with_protocol_data(StrBytes::from_string(d.protocol))
                .with_members(members)
                .with_authorized_operations(ops)
        })
        .collect();
    Reply::Message(Box::new(ResponseKind::DescribeGroups(
        DescribeGroupsResponse::default().with_groups(groups),
    )))
}
