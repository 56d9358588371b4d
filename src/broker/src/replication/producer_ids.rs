//! Producer ids for a cluster: each broker takes blocks of ids from
//! `/latest_producer_id_block` by conditional writes, so no two brokers ever
//! hand out the same id.
//!
//! A broker takes its first block as soon as its session is up, and the next
//! one in the background once 90% of the current block is handed out (as
//! Kafka's producer id managers do). A broker cut off from ZooKeeper thus
//! goes on answering InitProducerId from the block it holds.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use zookeeper_client::{Client, CreateMode, Error as ZkError};

use super::{refusal, znodes, Replication};
use crate::logline::log;

/// How many producer ids a broker takes from ZooKeeper at a time (Kafka's block).
pub(super) const BLOCK: i64 = 1000;

/// A broker's producer ids: the block it hands out from, and the block taken
/// ahead of need.
#[derive(Default)]
pub(super) struct ProducerIds {
    next: i64,
    end: i64,
    ahead: Option<(i64, i64)>,
}

impl ProducerIds {
    /// Fewer than a tenth of a block left, and no block taken ahead.
    fn wants_ahead(&self) -> bool {
        self.ahead.is_none() && self.end - self.next <= BLOCK / 10
    }
}

/// Takes the next block `[start, end)` from ZooKeeper.
async fn take_block(client: &Client, node_id: i32) -> Result<(i64, i64), ZkError> {
    let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    loop {
        let (start, version) = match client.get_data(znodes::PRODUCER_ID_BLOCK).await {
            Ok((d, stat)) => (znodes::producer_id_block_end(&d).map_or(0, |e| e + 1), Some(stat.version)),
            Err(ZkError::NoNode) => (0, None),
            Err(e) => return Err(e),
        };
        let end = start + BLOCK;
        let data = znodes::producer_id_block_to_json(node_id, start, end - 1);
        let written = match version {
            Some(v) => client.set_data(znodes::PRODUCER_ID_BLOCK, &data, Some(v)).await.map(|_| ()),
            None => client.create(znodes::PRODUCER_ID_BLOCK, &data, &persistent).await.map(|_| ()),
        };
        match written {
            Ok(()) => return Ok((start, end)),
            Err(ZkError::BadVersion | ZkError::NodeExists) => continue,
            Err(e) => return Err(e),
        }
    }
}

impl Replication {
    /// A producer id no broker of the cluster handed out before.
    pub async fn allocate_producer_id(self: &Arc<Self>) -> Result<i64, (i16, String)> {
        let mut ids = self.producer_ids.lock().await;
        if ids.next >= ids.end {
            let (start, end) = match ids.ahead.take() {
                Some(block) => block,
                None => {
                    let client = self.client().ok_or((
                        kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
                        "not connected to ZooKeeper".to_string(),
                    ))?;
                    take_block(&client, self.node_id).await.map_err(refusal)?
                }
            };
            (ids.next, ids.end) = (start, end);
        }
        let id = ids.next;
        ids.next += 1;
        if ids.wants_ahead() {
            self.take_block_ahead();
        }
        Ok(id)
    }

    /// Producer ids in hand before they are asked for, so that a broker that
    /// later loses ZooKeeper still hands them out.
    pub(super) async fn ensure_producer_ids(self: &Arc<Self>) {
        if self.producer_ids.lock().await.wants_ahead() {
            self.take_block_ahead();
        }
    }

    /// Takes a block ahead of need in the background (one at a time), so
    /// that the requests go on being answered while ZooKeeper is asked.
    pub(super) fn take_block_ahead(self: &Arc<Self>) {
        let Some(client) = self.client() else { return };
        if self.taking_producer_ids.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            match take_block(&client, me.node_id).await {
                Ok(block) => {
                    let mut ids = me.producer_ids.lock().await;
                    if ids.next >= ids.end {
                        (ids.next, ids.end) = block;
                    } else {
                        ids.ahead = Some(block);
                    }
                }
                Err(e) => log("warn", "producer_id_block_failed", &[("error", &e)]),
            }
            me.taking_producer_ids.store(false, Ordering::Release);
        });
    }
}
