//! Kafka's default partitioning: for a keyed record, murmur2 of the key bytes,
//! made positive, modulo the partition count (same key, same partition as
//! Kafka); for unkeyed records, the sticky partitioner.

use std::collections::HashMap;
use std::sync::Arc;

/// Kafka's `Utils.murmur2` (seed 0x9747b28c), bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition Kafka's producer picks for `key` among `partitions`.
pub fn partition_for_key(key: &[u8], partitions: i32) -> i32 {
    if partitions <= 1 {
        return 0;
    }
    ((murmur2(key) & 0x7fff_ffff) as u32 % partitions.max(1) as u32) as i32
}

/// Kafka's sticky partitioner for unkeyed records: all of a topic's unkeyed
/// records go to one partition until a batch for it is completed, then to
/// another picked at random, so that batches fill up instead of spreading thin.
pub struct StickyPartitioner {
    current: HashMap<Arc<str>, i32>,
    rng: u64,
}

impl StickyPartitioner {
    pub fn new(seed: u64) -> Self {
        StickyPartitioner { current: HashMap::new(), rng: seed | 1 }
    }

    /// The partition for the next unkeyed record of `topic`.
    pub fn partition(&mut self, topic: &Arc<str>, partitions: i32) -> i32 {
        if let Some(&p) = self.current.get(topic) {
            return p;
        }
        let p = (self.next_random() % partitions.max(1) as u64) as i32;
        self.current.insert(topic.clone(), p);
        p
    }

    /// A batch for `partition` was completed: the next unkeyed record moves on.
    pub fn batch_done(&mut self, topic: &str, partition: i32) {
        if self.current.get(topic) == Some(&partition) {
            self.current.remove(topic);
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: it only spreads batches over partitions.
        let x = &mut self.rng;
        *x ^= *x >> 12;
        *x ^= *x << 25;
        *x ^= *x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
#[path = "partitioner_test.rs"]
mod tests;
