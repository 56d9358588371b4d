//! The sender thread: takes ready (or lingered) batches, appends them, fsyncs
//! for `acks=all`, and completes their delivery cells.

use std::sync::Arc;
use std::time::Instant;

use super::accumulator::{ReadyBatch, Shared};
use super::delivery::{Callback, Delivered, DeliveryCell, DeliveryResult};
use super::destination::PartitionTarget;
use super::Acks;
use crate::error::Error;
use crate::record::RecordBatch;

/// Ready batches for one partition are appended together up to this many
/// bytes (see `PartitionLog::append_buffers`).
const GROUP_BYTES: usize = 1 << 20;

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
        // Per append that must be fsynced: its log, end offset and results.
        let mut durable: Vec<(Arc<dyn PartitionTarget>, i64, std::ops::Range<usize>)> = Vec::new();
        let mut freed = 0;
        let mut batch = batch.into_iter().peekable();
        while let Some(first) = batch.next() {
            // Consecutive batches for the same partition go in one append (one
            // write); a batch that fails to build fails alone.
            let log = first.log.clone();
            let mut group = vec![first];
            let mut bytes = group[0].bytes;
            let together = log.appends_together();
            while let Some(b) =
                batch.next_if(|b| together && Arc::ptr_eq(&b.log, &log) && bytes + b.bytes <= GROUP_BYTES)
            {
                bytes += b.bytes;
                group.push(b);
            }
            freed += bytes;
            // Each batch built (a batch whose codec fails fails alone), then the
            // built ones appended together.
            let mut built: Vec<Vec<u8>> = Vec::with_capacity(group.len());
            let mut outcomes: Vec<(Arc<DeliveryCell>, Option<Error>)> = Vec::with_capacity(group.len());
            for b in group {
                match b.builder.build() {
                    Ok(buf) => {
                        built.push(buf);
                        outcomes.push((b.cell, None));
                    }
                    Err(e) => outcomes.push((b.cell, Some(e))),
                }
            }
            let mut bufs: Vec<&mut [u8]> = built.iter_mut().map(|b| &mut b[..]).collect();
            let appended = if bufs.is_empty() {
                Err(Arc::new(Error::InvalidArgument("no batch to append".into())))
            } else {
                log.append(&mut bufs).map_err(Arc::new)
            };
            // Results in queue order: the callbacks of a partition run in order.
            let from = done.len();
            let mut built = built.iter();
            for (cell, failed) in outcomes {
                let result = match (failed, &appended) {
                    (Some(e), _) => Err(Arc::new(e)),
                    (None, Err(e)) => Err(e.clone()),
                    (None, Ok(info)) => {
                        // The append set each batch's base offset in its buffer.
                        let buf = built.next().map_or(&[][..], |b| &b[..]);
                        let base =
                            RecordBatch::header_only(buf).map_or(info.base_offset, |b| b.base_offset());
                        Ok(Delivered { base_offset: base, log_append_time: info.log_append_time })
                    }
                };
                done.push((cell, result));
            }
            if let Ok(info) = &appended {
                if shared.config.acks == Acks::Durable {
                    durable.push((log, info.last_offset + 1, from..done.len()));
                }
            }
        }
        // One fsync per partition covers every batch appended to it above.
        let mut synced: Vec<(*const (), std::result::Result<(), Arc<Error>>)> = Vec::new();
        for (log, end, results) in durable.iter().rev() {
            let key = Arc::as_ptr(log) as *const ();
            let r = match synced.iter().find(|(k, _)| *k == key) {
                Some((_, r)) => r.clone(),
                None => {
                    let r = log.wait_durable(*end).map_err(Arc::new);
                    synced.push((key, r.clone()));
                    r
                }
            };
            if let Err(e) = r {
                for result in &mut done[results.clone()] {
                    result.1 = Err(e.clone());
                }
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
