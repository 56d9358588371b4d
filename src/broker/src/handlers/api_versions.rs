//! ApiVersions: the served APIs and their version ranges, nothing more (a
//! client infers features from them, so advertising what is not served would
//! break it). Its response header is always v0, even for v3.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use super::{Reply, SUPPORTED};
use crate::replication::shutdown::wire;
use crate::response::Response;

pub const VERSIONS: (i16, i16) = (0, 3);

fn served() -> ApiVersionsResponse {
    let mut keys: Vec<(i16, i16, i16)> =
        SUPPORTED.iter().map(|&(key, lo, hi)| (key as i16, lo, hi)).collect();
    // Encoded by hand: the protocol crate has no ApiKey for it.
    let (lo, hi) = wire::VERSIONS;
    keys.push((wire::API_KEY, lo, hi));
    for api in crate::replication::controller_requests::APIS {
        keys.push((api.key, api.versions.0, api.versions.1));
    }
    keys.sort_unstable();
    ApiVersionsResponse::default().with_api_keys(
        keys.into_iter()
            .map(|(key, lo, hi)| {
                ApiVersion::default().with_api_key(key).with_min_version(lo).with_max_version(hi)
            })
            .collect(),
    )
}

pub fn handle(_r: ApiVersionsRequest) -> Reply {
    Reply::Message(Box::new(ResponseKind::ApiVersions(served())))
}

/// The answer to an ApiVersions of a version not served: UNSUPPORTED_VERSION
/// in v0, with the ranges, as Kafka answers it.
pub fn unsupported(correlation_id: i32) -> anyhow::Result<Response> {
    let body = served().with_error_code(ResponseError::UnsupportedVersion.code());
    Response::encoded(correlation_id, 0, &body, 0)
}
