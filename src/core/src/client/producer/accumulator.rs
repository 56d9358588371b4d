//! The producer's accumulator: open batches per partition, the queue of ready
//! ones, the buffer bound, and what the sender thread and the callers share.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::delivery::DeliveryCell;
use super::destination::PartitionTarget;
use super::ProducerConfig;
use crate::client::partitioner::StickyPartitioner;
use crate::record::BatchBuilder;

/// FNV-1a: the maps `send` looks up several times per record are keyed by
/// short topic names from the calling program, where SipHash (built for keys
/// an attacker picks) was a quarter of a send's instructions.
#[derive(Default)]
pub(super) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

pub(super) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

pub(super) struct OpenBatch {
    pub(super) builder: BatchBuilder,
    pub(super) cell: Arc<DeliveryCell>,
    pub(super) created: Instant,
}

impl OpenBatch {
    /// Whether a record of `size` bytes would take this batch past `limit`
    /// (an empty batch takes any record).
    pub(super) fn would_overflow(&self, size: usize, limit: usize) -> bool {
        !self.builder.is_empty() && self.builder.size_in_bytes() + size > limit
    }
}

pub(super) struct ReadyBatch {
    pub(super) log: Arc<dyn PartitionTarget>,
    pub(super) builder: BatchBuilder,
    pub(super) cell: Arc<DeliveryCell>,
    pub(super) bytes: usize,
}

pub(super) struct PartitionState {
    pub(super) log: Arc<dyn PartitionTarget>,
    pub(super) open: Option<OpenBatch>,
}

impl PartitionState {
    /// Moves this partition's open batch (if any) to `ready` (what `Shared::seal`
    /// does, for a caller holding the partition's state already).
    pub(super) fn seal_into(
        &mut self,
        key: &(Arc<str>, i32),
        ready: &mut VecDeque<ReadyBatch>,
        sticky: &mut StickyPartitioner,
    ) {
        let Some(open) = self.open.take() else { return };
        let bytes = open.builder.size_in_bytes();
        ready.push_back(ReadyBatch { log: self.log.clone(), builder: open.builder, cell: open.cell, bytes });
        sticky.batch_done(&key.0, key.1);
    }
}

pub(super) struct Accumulator {
    pub(super) partitions: FastMap<(Arc<str>, i32), PartitionState>,
    pub(super) ready: VecDeque<ReadyBatch>,
    pub(super) in_flight: Vec<Arc<DeliveryCell>>,
    pub(super) buffered: usize,
    pub(super) sticky: StickyPartitioner,
    pub(super) flush_now: bool,
    pub(super) closing: bool,
    pub(super) sender_idle: bool,
}

pub(super) struct Shared {
    pub(super) acc: Mutex<Accumulator>,
    /// Wakes the sender.
    pub(super) work: Condvar,
    /// Wakes senders blocked on a full buffer.
    pub(super) space: Condvar,
    pub(super) config: ProducerConfig,
}

impl Shared {
    /// Moves an open batch to the ready queue.
    pub(super) fn seal(&self, acc: &mut Accumulator, key: &(Arc<str>, i32)) {
        if let Some(ps) = acc.partitions.get_mut(key) {
            ps.seal_into(key, &mut acc.ready, &mut acc.sticky);
        }
    }
}
