//! InitProducerId: a producer id for an idempotent producer, never handed out
//! before (the store allocates them in fsynced blocks), with epoch 0.
//! Transactions are not served: a transactional id is refused.

use std::sync::Arc;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind};
use kafka_protocol::ResponseError;

use super::{blocking, error_code, Reply};
use crate::logline::log;
use crate::server::Shared;

/// v0 and v1 (non-flexible); v2+ would let a producer bump its own epoch,
/// which needs the transaction coordinator's bookkeeping.
pub const VERSIONS: (i16, i16) = (0, 1);

pub async fn handle(shared: &Arc<Shared>, r: InitProducerIdRequest) -> Reply {
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    let response = if r.transactional_id.is_some() {
        // Kafka without a transaction coordinator would not answer at all;
        // say plainly that transactions are not served.
        log("info", "transactions_refused", &[("transactional_id", &format!("{:?}", r.transactional_id))]);
        response.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
    } else if let Some(r) = &shared.replication {
        // Unique across the cluster: blocks taken from ZooKeeper.
        match r.allocate_producer_id().await {
            Ok(id) => response.with_producer_id(ProducerId(id)).with_producer_epoch(0),
            Err((code, why)) => {
                log("warn", "producer_id_failed", &[("error", &why)]);
                response.with_error_code(code)
            }
        }
    } else {
        let store = shared.store.clone();
        match blocking(move || store.allocate_producer_id()).await {
            Ok(id) => response.with_producer_id(ProducerId(id)).with_producer_epoch(0),
            Err(e) => response.with_error_code(error_code(&e)),
        }
    };
    shared.metrics.error("InitProducerId", response.error_code);
    Reply::Message(Box::new(ResponseKind::InitProducerId(response)))
}
