//! The sender thread: takes ready (or lingered) batches, appends them, fsyncs
//! for `acks=all`, and completes their delivery cells.

use std::sync::Arc;
use std::time::Instant;

use super::accumulator::{ReadyBatch, Shared};
use super::delivery::{Callback, Delivered, DeliveryCell, DeliveryResult};
use super::Acks;
use crate::error::Error;
use crate::log::{AppendOrigin, PartitionLog};

pub(super) fn sender_loop(shared: &Shared) {
    let linger = shared.config.linger;
    loop {
        let batch: Vec<ReadyBatch> = {
            let mut acc = shared.acc.lock();
            loop {
                // Open batches past their linger time (all of them on flush/close).
                let now = Instant::now();
                let force = acc.flush_now || acc.closing;
                let expired: Vec<(Arc<str>, i32)> = acc
                    .partitions
                    .iter()
                    .filter(|(_, ps)| ps.open.as_ref().is_some_and(|o| force || now >= o.created + linger))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &expired {
                    shared.seal(&mut acc, k);
                }
                acc.flush_now = false;
                if !acc.ready.is_empty() {
                    break;
                }
                if acc.closing {
                    return;
                }
                let next = acc
                    .partitions
                    .values()
                    .filter_map(|ps| ps.open.as_ref())
                    .map(|o| o.created + linger)
                    .min();
                acc.sender_idle = true;
                match next {
                    Some(deadline) => {
                        shared.work.wait_until(&mut acc, deadline);
                    }
                    None => shared.work.wait(&mut acc),
                }
                acc.sender_idle = false;
            }
            let batch: Vec<ReadyBatch> = acc.ready.drain(..).collect();
            acc.in_flight.extend(batch.iter().map(|b| b.cell.clone()));
            batch
        };
        let mut done: Vec<(Arc<DeliveryCell>, DeliveryResult)> = Vec::with_capacity(batch.len());
        let mut durable: Vec<(Arc<PartitionLog>, i64, usize)> = Vec::new();
        let mut freed = 0;
        for b in batch {
            freed += b.bytes;
            let r = b.builder.build().and_then(|buf| b.log.append_as_leader(buf, AppendOrigin::Embedded));
            match r {
                Ok(info) => {
                    let idx = done.len();
                    done.push((
                        b.cell,
                        Ok(Delivered {
                            base_offset: info.base_offset,
                            log_append_time: info.log_append_time,
                        }),
                    ));
                    if shared.config.acks == Acks::Durable {
                        durable.push((b.log, info.last_offset + 1, idx));
                    }
                }
                Err(e) => done.push((b.cell, Err(Arc::new(e)))),
            }
        }
        // One fsync per partition covers every batch appended to it above.
        let mut synced: Vec<(*const PartitionLog, std::result::Result<(), Arc<Error>>)> = Vec::new();
        for (log, end, idx) in durable.iter().rev() {
            let key = Arc::as_ptr(log);
            let r = match synced.iter().find(|(k, _)| *k == key) {
                Some((_, r)) => r.clone(),
                None => {
                    let r = log.wait_durable(*end).map_err(Arc::new);
                    synced.push((key, r.clone()));
                    r
                }
            };
            if let Err(e) = r {
                done[*idx].1 = Err(e);
            }
        }
        // Every result is set before any callback runs: a callback may wait for
        // the GIL, held by a thread that is waiting for one of these results.
        let callbacks: Vec<(Vec<Callback>, DeliveryResult)> =
            done.iter().map(|(cell, r)| (cell.set_result(r.clone()), r.clone())).collect();
        let mut acc = shared.acc.lock();
        acc.buffered = acc.buffered.saturating_sub(freed);
        acc.in_flight.retain(|c| c.result().is_none());
        drop(acc);
        shared.space.notify_all();
        for (fs, r) in callbacks {
            for f in fs {
                f(&r);
            }
        }
    }
}
