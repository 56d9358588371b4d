//! DeleteGroups: empty groups removed with their offsets (tombstones in
//! `__consumer_offsets`).

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, GroupId, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::Reply;
use crate::server::Shared;

/// v0–v1 (v2 is flexible).
pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle(shared: &Arc<Shared>, r: DeleteGroupsRequest) -> Reply {
    let ids: Vec<String> = r.groups_names.iter().map(|g| g.0.to_string()).collect();
    let results = shared
        .coordinator
        .delete_groups(&ids)
        .await
        .into_iter()
        .map(|(id, code)| {
            shared.metrics.error("DeleteGroups", code);
            DeletableGroupResult::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_error_code(code)
        })
        .collect();
    Reply::Message(Box::new(ResponseKind::DeleteGroups(
        DeleteGroupsResponse::default().with_results(results),
    )))
}
