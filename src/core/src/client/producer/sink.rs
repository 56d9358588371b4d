//! The bulk path: records go straight into whole batches per partition, queued
//! behind what `send` left open so that the order per partition is kept.

use std::sync::Arc;

use super::accumulator::{PartitionState, ReadyBatch};
use super::delivery::{BatchCells, DeliveryCell};
use super::{check_send_timestamp, Producer};
use crate::client::partitioner::{partition_for_key, StickyPartitioner};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::record::{BatchBuilder, NewRecord};
use crate::store::Topic;

/// See `Producer::batch_sink`.
pub struct BatchSink<'p> {
    pub(super) producer: &'p Producer,
    pub(super) name: Arc<str>,
    pub(super) topic: Arc<Topic>,
    pub(super) limit: usize,
    pub(super) open: Vec<Option<BatchBuilder>>,
    pub(super) done: Vec<(i32, BatchBuilder)>,
    pub(super) sticky: StickyPartitioner,
    /// The last timestamp found good (a bulk send gives many records one).
    pub(super) checked_timestamp: Option<i64>,
}

impl BatchSink<'_> {
    pub fn partitions(&self) -> i32 {
        self.open.len() as i32
    }

    /// Adds a record to `partition`, or, without one, to the partition Kafka's
    /// default partitioner picks (by key, else sticky).
    pub fn add(&mut self, partition: Option<i32>, rec: &NewRecord<'_>) -> Result<()> {
        let partition = match (partition, rec.key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, self.partitions()),
            (None, None) => self.sticky.partition(&self.name, self.partitions()),
        };
        let n = self.open.len() as i32;
        let Some(slot) = usize::try_from(partition).ok().and_then(|p| self.open.get_mut(p)) else {
            return Err(Error::UnknownPartition { topic: self.name.to_string(), partition, count: n });
        };
        if rec.key.is_none() {
            self.topic.partition(partition)?.check_key(None)?;
        }
        if self.checked_timestamp != Some(rec.timestamp) {
            check_send_timestamp(rec.timestamp)?;
            self.topic.partition(partition)?.check_timestamp(rec.timestamp, now_ms())?;
            self.checked_timestamp = Some(rec.timestamp);
        }
        let size = rec.value.map_or(0, <[u8]>::len)
            + rec.key.map_or(0, <[u8]>::len)
            + rec.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 10).sum::<usize>()
            + 21;
        let max = self.topic.config.max_message_bytes;
        if size + crate::record::batch::HEADER_LEN > max {
            return Err(Error::RecordTooLarge { size: size + crate::record::batch::HEADER_LEN, max });
        }
        let compression = self.producer.shared.config.compression;
        let limit = self.limit;
        if slot.as_ref().is_some_and(|b| !b.is_empty() && b.size_in_bytes() + size > limit) {
            if let Some(full) = slot.take() {
                self.done.push((partition, full));
                self.sticky.batch_done(&self.name, partition);
            }
        }
        slot.get_or_insert_with(|| BatchBuilder::with_capacity(compression, limit)).append(rec);
        Ok(())
    }

    /// Queues every batch and returns, per partition, its batches' delivery
    /// cells with their record counts.
    pub fn finish(mut self) -> Result<BatchCells> {
        for (p, b) in self.open.iter_mut().enumerate() {
            if let Some(b) = b.take().filter(|b| !b.is_empty()) {
                self.done.push((p as i32, b));
            }
        }
        let shared = &self.producer.shared;
        let mut result: BatchCells = Vec::new();
        {
            let mut acc = shared.acc.lock();
            if acc.closing {
                return Err(Error::ClientClosed("producer"));
            }
            for (p, builder) in self.done {
                let pkey = (self.name.clone(), p);
                if !acc.partitions.contains_key(&pkey) {
                    let log = self.topic.partition(p)?.clone();
                    acc.partitions.insert(pkey.clone(), PartitionState { log, open: None });
                }
                shared.seal(&mut acc, &pkey);
                let log = acc.partitions[&pkey].log.clone();
                let cell = Arc::new(DeliveryCell::default());
                let count = builder.len();
                let bytes = builder.size_in_bytes();
                acc.buffered += bytes;
                acc.ready.push_back(ReadyBatch { log, builder, cell: cell.clone(), bytes });
                match result.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, v)) => v.push((cell, count)),
                    None => result.push((p, vec![(cell, count)])),
                }
            }
            acc.sender_idle = false;
        }
        shared.work.notify_one();
        Ok(result)
    }
}
