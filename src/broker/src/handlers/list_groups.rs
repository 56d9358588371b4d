//! ListGroups: the groups this broker coordinates (all of them).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::server::Shared;

/// v0–v2 (v3 is flexible; v4 adds state filters).
pub const VERSIONS: (i16, i16) = (0, 2);

pub async fn handle(shared: &Arc<Shared>, _r: ListGroupsRequest) -> Reply {
    let groups = shared
        .coordinator
        .list_groups()
        .into_iter()
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(g.group_id)))
                .with_protocol_type(StrBytes::from_string(g.protocol_type))
        })
        .collect();
    Reply::Message(Box::new(ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups))))
}
