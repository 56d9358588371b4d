//! Controlled shutdown (Kafka's ZooKeeper mode): a broker asked to stop
//! first sends the controller a ControlledShutdown request; the controller
//! marks it as shutting down, moves each leadership it holds to another live
//! ISR member and takes it out of every other ISR, and answers with the
//! partitions it still leads. The broker stops fetching first (Kafka's
//! StopReplica), so that no leader takes it back into an ISR, and asks again
//! (`controlled.shutdown.max.retries`, `controlled.shutdown.retry.backoff.ms`)
//! until nothing movable is left; then it stops. Clients see leaders change,
//! as for a preferred-leader election, instead of a broker vanishing.
//!
//! The protocol crate has no ControlledShutdown (an inter-broker API of
//! ZooKeeper mode only), so `wire` encodes it: versions 1 to 3 (v0 has a
//! header of its own), v3 flexible.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError as E;

use super::controller::{self, Fenced};
use super::fetcher::Link;
use super::{refusal, view, ClusterView, Controlling, Replication};
use crate::logline::log;

/// How long one ask may take, as Kafka's `request.timeout.ms`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Replication {
    /// Moves this broker's leaderships away before it stops, if
    /// `controlled.shutdown.enable`; whether nothing movable is left.
    pub async fn controlled_shutdown(self: &Arc<Self>) -> bool {
        if !self.config.controlled_shutdown_enable || self.client().is_none() {
            return false;
        }
        let started = Instant::now();
        self.leaving.store(true, Ordering::SeqCst);
        self.stop_following();
        let backoff = Duration::from_millis(self.config.controlled_shutdown_retry_backoff_ms);
        let attempts = self.config.controlled_shutdown_max_retries.max(1);
        let mut changes = self.changes();
        for attempt in 1..=attempts {
            changes.borrow_and_update();
            let view = self.view();
            let asked = match view.controller {
                Some(c) if c == self.node_id => self.shut_down_broker(self.node_id, -1).await,
                Some(c) => self.ask_controller(c, &view).await,
                None => Err((E::NotController.code(), "no controller".to_string())),
            };
            match asked {
                Ok(remaining) if remaining.is_empty() => {
                    log(
                        "info",
                        "controlled_shutdown_done",
                        &[
                            ("node", &self.node_id),
                            ("attempts", &attempt),
                            ("ms", &started.elapsed().as_millis()),
                        ],
                    );
                    return true;
                }
                Ok(remaining) => log(
                    "warn",
                    "controlled_shutdown_remaining",
                    &[
                        ("node", &self.node_id),
                        ("attempt", &attempt),
                        ("partitions", &format!("{remaining:?}")),
                    ],
                ),
                Err((code, why)) => log(
                    "warn",
                    "controlled_shutdown_refused",
                    &[("node", &self.node_id), ("attempt", &attempt), ("error_code", &code), ("why", &why)],
                ),
            }
            if attempt < attempts {
                // A new controller (the old one stopping too) is asked at once.
                let deadline = tokio::time::Instant::now() + backoff;
                while tokio::time::timeout_at(deadline, changes.changed()).await.is_ok_and(|r| r.is_ok()) {
                    if self.view().controller != view.controller {
                        break;
                    }
                }
            }
        }
        log("warn", "controlled_shutdown_failed", &[("node", &self.node_id), ("attempts", &attempts)]);
        false
    }

    /// Sends ControlledShutdown to the controller `c`.
    async fn ask_controller(&self, c: i32, view: &ClusterView) -> Result<Vec<(String, i32)>, (i16, String)> {
        let unreachable = |e: std::io::Error| (E::NetworkException.code(), format!("controller {c}: {e}"));
        let Some(b) = view.brokers.get(&c) else {
            return Err((E::NotController.code(), format!("controller {c} is not registered")));
        };
        let epoch = view.brokers.get(&self.node_id).map_or(-1, |me| me.epoch);
        let Some(addr) = b.address(&self.config.inter_broker_listener) else {
            return Err((
                E::NetworkException.code(),
                format!("controller {c} has no listener {}", self.config.inter_broker_listener),
            ));
        };
        let mut link = Link::connect(&addr, "seglog-controlled-shutdown", &self.inter_broker)
            .await
            .map_err(unreachable)?;
        let request = wire::Request { broker_id: self.node_id, broker_epoch: epoch };
        let answer = link.call_controlled_shutdown(&request, REQUEST_TIMEOUT).await.map_err(unreachable)?;
        match answer.error_code {
            0 => Ok(answer.remaining),
            code => Err((code, format!("controller {c} answered error {code}"))),
        }
    }

    /// The controller's side: marks broker `id` (registered at `epoch`, -1:
    /// any) as shutting down, writes the states that move its leaderships
    /// and take it out of ISRs, and answers with the partitions it still
    /// leads that another ISR member could lead (a partition with no other
    /// live ISR member stays with it: waiting would not change that).
    pub async fn shut_down_broker(&self, id: i32, epoch: i64) -> Result<Vec<(String, i32)>, (i16, String)> {
        let Controlling { client, mut guard } = self.controlling().await?;
        let Some(ctl) = guard.as_mut() else { return Err(self.not_controller()) };
        let unclean = self.store.config().topic_defaults.unclean_leader_election_enable;
        let mut view = view::read(&client).await.map_err(refusal)?;
        let Some(registered) = view.brokers.get(&id).map(|b| b.epoch) else {
            return Err((E::BrokerNotAvailable.code(), format!("broker {id} is not registered")));
        };
        if epoch >= 0 && epoch != registered {
            return Err((
                E::StaleBrokerEpoch.code(),
                format!("broker {id} is registered at epoch {registered}"),
            ));
        }
        ctl.shutting_down.insert(id, registered);
        log("info", "controlled_shutdown_asked", &[("broker", &id), ("controller", &self.node_id)]);
        // A state changed under a write is read and decided again.
        for _ in 0..3 {
            match controller::reconcile(&client, ctl, &view, unclean, false).await {
                Ok(0) => break,
                Ok(_) => view = view::read(&client).await.map_err(refusal)?,
                Err(Fenced::Deposed) => {
                    *guard = None;
                    return Err(self.not_controller());
                }
                Err(Fenced::Zk(e)) => return Err(refusal(e)),
            }
        }
        let live = |b: i32| view.is_live(b) && !ctl.shutting_down.contains_key(&b);
        let mut remaining = Vec::new();
        for (name, topic) in &view.topics {
            for (p, state) in topic.states.iter().enumerate() {
                let Some(s) = state.as_ref().map(|s| &s.state) else { continue };
                if s.leader == id && s.isr.iter().any(|&r| r != id && live(r)) {
                    remaining.push((name.clone(), p as i32));
                }
            }
        }
        Ok(remaining)
    }
}

pub mod wire {
    //! ControlledShutdown's bytes (Kafka's `ControlledShutdownRequest.json`
    //! and `ControlledShutdownResponse.json`), versions 1 to 3.

    use bytes::{Buf, BufMut, Bytes, BytesMut};

    use crate::replication::codec::{get_varint, need, put_varint, skip_tags};

    pub const API_KEY: i16 = 7;
    pub const VERSIONS: (i16, i16) = (1, 3);

    pub fn request_header_version(version: i16) -> i16 {
        if version >= 3 {
            2
        } else {
            1
        }
    }

    pub fn response_header_version(version: i16) -> i16 {
        if version >= 3 {
            1
        } else {
            0
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Request {
        pub broker_id: i32,
        /// v2+: the broker's registration epoch (-1: not given).
        pub broker_epoch: i64,
    }

    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct Answer {
        pub error_code: i16,
        pub remaining: Vec<(String, i32)>,
    }

    pub fn decode_request(b: &mut Bytes, version: i16) -> Result<Request, String> {
        need(b, 4)?;
        let broker_id = b.get_i32();
        let broker_epoch = if version >= 2 {
            need(b, 8)?;
            b.get_i64()
        } else {
            -1
        };
        if version >= 3 {
            skip_tags(b)?;
        }
        Ok(Request { broker_id, broker_epoch })
    }

    pub fn encode_request(r: &Request, version: i16, buf: &mut BytesMut) {
        buf.put_i32(r.broker_id);
        if version >= 2 {
            buf.put_i64(r.broker_epoch);
        }
        if version >= 3 {
            put_varint(buf, 0);
        }
    }

    pub fn encode_response(a: &Answer, version: i16, buf: &mut BytesMut) {
        buf.put_i16(a.error_code);
        let flexible = version >= 3;
        if flexible {
            put_varint(buf, a.remaining.len() as u32 + 1);
        } else {
            buf.put_i32(a.remaining.len() as i32);
        }
        for (topic, partition) in &a.remaining {
            if flexible {
                put_varint(buf, topic.len() as u32 + 1);
            } else {
                buf.put_i16(topic.len() as i16);
            }
            buf.put_slice(topic.as_bytes());
            buf.put_i32(*partition);
            if flexible {
                put_varint(buf, 0);
            }
        }
        if flexible {
            put_varint(buf, 0);
        }
    }

    pub fn decode_response(b: &mut Bytes, version: i16) -> Result<Answer, String> {
        let flexible = version >= 3;
        need(b, 2)?;
        let error_code = b.get_i16();
        let count = if flexible {
            (get_varint(b)? as usize).saturating_sub(1)
        } else {
            need(b, 4)?;
            b.get_i32().max(0) as usize
        };
        let mut remaining = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let len = if flexible {
                (get_varint(b)? as usize).saturating_sub(1)
            } else {
                need(b, 2)?;
                b.get_i16().max(0) as usize
            };
            need(b, len + 4)?;
            let topic = String::from_utf8(b.split_to(len).to_vec()).map_err(|e| e.to_string())?;
            let partition = b.get_i32();
            if flexible {
                skip_tags(b)?;
            }
            remaining.push((topic, partition));
        }
        if flexible {
            skip_tags(b)?;
        }
        Ok(Answer { error_code, remaining })
    }
}

#[cfg(test)]
#[path = "shutdown_test.rs"]
mod tests;
