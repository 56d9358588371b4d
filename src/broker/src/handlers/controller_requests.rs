//! LeaderAndIsr, UpdateMetadata and StopReplica from a Kafka controller (see
//! `replication::controller_requests`): answered with success, the broker
//! acting on the znodes the controller wrote. A request naming an older
//! epoch of this broker (sent to its previous registration) gets
//! STALE_BROKER_EPOCH, as a Kafka broker answers it. A broker outside a
//! cluster follows no controller: STALE_CONTROLLER_EPOCH.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::ResponseError as E;

use super::Outcome;
use crate::logline::log;
use crate::replication::controller_requests::{self as wire, Api};
use crate::response::{encode_header, Response};
use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::Shared;

pub async fn handle(shared: &Arc<Shared>, api: Api, mut body: Bytes, version: i16) -> Outcome {
    let name = api.name;
    let (lo, hi) = api.versions;
    if !(lo..=hi).contains(&version) {
        let reason = format!("{name} version {version} is not served (this broker serves {lo} to {hi})");
        return Outcome::Close { api: name, reason };
    }
    let header = match RequestHeader::decode(&mut body, wire::REQUEST_HEADER_VERSION) {
        Ok(h) => h,
        Err(e) => {
            return Outcome::Close { api: name, reason: format!("malformed {name} request header: {e}") }
        }
    };
    let request = match wire::decode_request(api, &mut body) {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Close { api: name, reason: format!("malformed {name} v{version} request: {e}") }
        }
    };
    let code = match &shared.replication {
        _ if !shared.authorize(Operation::ClusterAction, ResourceType::Cluster, CLUSTER_NAME) => {
            E::ClusterAuthorizationFailed.code()
        }
        Some(repl) => {
            let mine = repl.view().brokers.get(&repl.node_id()).map(|b| b.epoch);
            if request.broker_epoch != -1 && mine.is_some_and(|e| request.broker_epoch < e) {
                E::StaleBrokerEpoch.code()
            } else {
                0
            }
        }
        None => E::StaleControllerEpoch.code(),
    };
    if api != wire::UPDATE_METADATA || code != 0 {
        log(
            "info",
            "kafka_controller_request",
            &[
                ("api", &name),
                ("controller", &request.controller_id),
                ("controller_epoch", &request.controller_epoch),
                ("partitions", &request.stop.len()),
                ("error", &code),
            ],
        );
    }
    shared.metrics.error(name, code);
    let partitions: Vec<(String, i32, i16)> =
        request.stop.into_iter().map(|(t, p, _)| (t, p, code)).collect();
    let mut buf = BytesMut::new();
    if let Err(e) = encode_header(&mut buf, header.correlation_id, wire::RESPONSE_HEADER_VERSION) {
        return Outcome::Close { api: name, reason: format!("encoding the {name} response: {e}") };
    }
    wire::encode_response(api, code, &partitions, &mut buf);
    Outcome::Respond { api: name, response: Response::bytes(buf.freeze()) }
}
