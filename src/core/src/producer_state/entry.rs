//! One producer's state (Kafka's `ProducerStateEntry` and `BatchMetadata`),
//! and the checks a batch from it must pass (Kafka's `ProducerAppendInfo`).

use std::collections::VecDeque;

use crate::error::{Error, Result};
use crate::record::batch::{NO_PRODUCER_EPOCH, NO_SEQUENCE};
use crate::record::RecordBatch;

/// How many of a producer's latest batches are remembered, so that a retry of
/// any of them (a producer has at most 5 requests in flight) is recognised.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// `seq` plus `n`, wrapping past `i32::MAX` to 0 as producers do.
pub fn increment_sequence(seq: i32, n: i32) -> i32 {
    if seq > i32::MAX - n {
        n - (i32::MAX - seq) - 1
    } else {
        seq + n
    }
}

/// `seq` minus `n`, the inverse of `increment_sequence`.
pub fn decrement_sequence(seq: i32, n: i32) -> i32 {
    if seq < n {
        i32::MAX - (n - seq) + 1
    } else {
        seq - n
    }
}

/// The sequence that must follow `last` (0 after `i32::MAX`, or when nothing came before).
pub fn next_sequence(last: i32) -> i32 {
    if last == NO_SEQUENCE || last == i32::MAX {
        0
    } else {
        last + 1
    }
}

/// Where one of a producer's batches went: its sequence and offset ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp (its LogAppendTime on such a topic).
    pub timestamp: i64,
}

/// What the producer state needs of one batch: its producer fields from the
/// header and the offsets the log gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    /// A transaction marker: it moves the epoch on but carries no data sequence.
    pub control: bool,
}

impl ProducerBatch {
    /// The batch's producer fields, with its offsets starting at `first_offset`
    /// and `max_timestamp` as the log stamps it; None for a batch without a
    /// producer id (Kafka's `hasProducerId`).
    pub fn of(b: &RecordBatch<'_>, first_offset: i64, max_timestamp: i64) -> Option<ProducerBatch> {
        (b.producer_id() >= 0).then(|| ProducerBatch {
            producer_id: b.producer_id(),
            epoch: b.producer_epoch(),
            first_seq: b.base_sequence(),
            last_seq: increment_sequence(b.base_sequence(), b.last_offset_delta()),
            first_offset,
            last_offset: first_offset + i64::from(b.last_offset_delta()),
            max_timestamp,
            control: b.is_control(),
        })
    }
}

/// One producer id's state: its epoch and its latest batches, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// Kept for Kafka's snapshot format (seglog has no transaction coordinator: -1).
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    /// Kept for Kafka's snapshot format: the first offset of an open
    /// transaction, as a snapshot written by Kafka says (seglog sets none).
    pub current_txn_first_offset: Option<i64>,
    batches: VecDeque<BatchMetadata>,
}

impl ProducerStateEntry {
    /// A producer never seen (or forgotten): no epoch, no batches.
    pub fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            epoch: NO_PRODUCER_EPOCH,
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
            batches: VecDeque::new(),
        }
    }

    /// An entry as a snapshot holds it: at most its last batch.
    pub fn with_last_batch(
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        last_timestamp: i64,
        current_txn_first_offset: Option<i64>,
        last: Option<BatchMetadata>,
    ) -> Self {
        ProducerStateEntry {
            producer_id,
            epoch,
            coordinator_epoch,
            last_timestamp,
            current_txn_first_offset,
            batches: last.into_iter().collect(),
        }
    }

    /// The remembered batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    pub fn last_batch(&self) -> Option<&BatchMetadata> {
        self.batches.back()
    }

    /// The last sequence written, or -1.
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// The last offset written, or -1.
    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }

    /// The first copy of `b` if it is a retry of one of the remembered batches:
    /// same epoch and exactly the same sequence range.
    pub fn find_duplicate(&self, b: &ProducerBatch) -> Option<BatchMetadata> {
        if b.control || b.epoch != self.epoch {
            return None;
        }
        self.batches.iter().find(|m| m.first_seq == b.first_seq && m.last_seq == b.last_seq).copied()
    }

    /// A new epoch forgets the old epoch's batches.
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    /// Takes `b` in, unchecked (what replay of the log and an accepted append do).
    pub fn apply(&mut self, b: &ProducerBatch) {
        self.set_epoch(b.epoch);
        self.last_timestamp = b.max_timestamp;
        if b.control {
            return;
        }
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(BatchMetadata {
            first_seq: b.first_seq,
            last_seq: b.last_seq,
            first_offset: b.first_offset,
            last_offset: b.last_offset,
            timestamp: b.max_timestamp,
        });
    }

    /// Kafka's check of a batch's epoch: an older epoch is a fenced producer.
    pub fn check_epoch(&self, b: &ProducerBatch) -> Result<()> {
        if b.epoch < self.epoch {
            return Err(Error::InvalidProducerEpoch {
                producer_id: b.producer_id,
                epoch: b.epoch,
                current_epoch: self.epoch,
            });
        }
        Ok(())
    }

    /// Kafka's check of a client batch's sequence. `self` is the producer's
    /// state with the earlier batches of the same append applied;
    /// `committed_epoch` its epoch before the append. A new epoch must start
    /// at 0; within an epoch each batch starts one past the last; a producer
    /// the log does not know (never seen, expired, or its batches removed by
    /// retention) may start anywhere, as in Kafka since KIP-360.
    pub fn check_sequence(&self, b: &ProducerBatch, committed_epoch: i16) -> Result<()> {
        if b.control {
            return Ok(());
        }
        let expected = if b.epoch != self.epoch {
            if self.epoch == NO_PRODUCER_EPOCH {
                return Ok(());
            }
            0
        } else {
            if committed_epoch == NO_PRODUCER_EPOCH {
                return Ok(());
            }
            next_sequence(self.last_seq())
        };
        if b.first_seq != expected {
            return Err(Error::OutOfOrderSequence {
                producer_id: b.producer_id,
                epoch: b.epoch,
                sequence: b.first_seq,
                expected,
                new_epoch: b.epoch != self.epoch,
            });
        }
        Ok(())
    }
}
