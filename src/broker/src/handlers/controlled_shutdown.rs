//! ControlledShutdown: a broker about to stop asks the controller to move its
//! leaderships away (see `replication::shutdown`). Encoded by hand, as the
//! protocol crate lacks this ZooKeeper-mode API. A broker that is not the
//! controller, or not in a cluster, answers NOT_CONTROLLER, as Kafka does.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError as E;

use super::Outcome;
use crate::replication::shutdown::wire;
use crate::response::{encode_header, Response};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::Shared;

pub const API: &str = "ControlledShutdown";

pub async fn handle(shared: &Arc<Shared>, mut body: Bytes, version: i16) -> Outcome {
    if !(wire::VERSIONS.0..=wire::VERSIONS.1).contains(&version) {
        let (lo, hi) = wire::VERSIONS;
        let reason = format!("{API} version {version} is not served (this broker serves {lo} to {hi})");
        return Outcome::Close { api: API, reason };
    }
    let header = match RequestHeader::decode(&mut body, wire::request_header_version(version)) {
        Ok(h) => h,
        Err(e) => return Outcome::Close { api: API, reason: format!("malformed {API} request header: {e}") },
    };
    let request = match wire::decode_request(&mut body, version) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Close { api: API, reason: format!("malformed {API} v{version} request: {e}") }
        }
    };
    let answer = match &shared.replication {
        _ if !shared.authorize(Operation::ClusterAction, ResourceType::Cluster, CLUSTER_NAME) => {
            wire::Answer { error_code: E::ClusterAuthorizationFailed.code(), remaining: Vec::new() }
        }
        Some(repl) => match repl.shut_down_broker(request.broker_id, request.broker_epoch).await {
            Ok(remaining) => wire::Answer { error_code: 0, remaining },
            Err((code, _)) => wire::Answer { error_code: code, remaining: Vec::new() },
        },
        None => wire::Answer { error_code: E::NotController.code(), remaining: Vec::new() },
    };
    shared.metrics.error(API, answer.error_code);
    let mut buf = BytesMut::new();
    if let Err(e) = encode_header(&mut buf, header.correlation_id, wire::response_header_version(version)) {
        return Outcome::Close { api: API, reason: format!("encoding the {API} response: {e}") };
    }
    wire::encode_response(&answer, version, &mut buf);
    Outcome::Respond { api: API, response: Response::bytes(buf.freeze()) }
}
