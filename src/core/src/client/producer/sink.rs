//! The bulk path: records go straight into whole batches per partition, queued
//! behind what `send` left open so that the order per partition is kept.

use std::sync::Arc;

use super::accumulator::{PartitionState, ReadyBatch};
use super::delivery::{BatchCells, DeliveryCell};
use super::destination::TopicTarget;
use super::{check_send_timestamp, Producer};
use crate::client::partitioner::{partition_for_key, StickyPartitioner};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::record::{BatchBuilder, NewRecord};

/// What a record without headers takes in a batch beyond its key and value,
/// at most (its varints and attributes byte).
const RECORD_OVERHEAD: usize = 21;

/// See `Producer::batch_sink`. A batch is queued for the sender as soon as it
/// is full, so that encoding the rest of a call overlaps with writing what is
/// done; a caller that must write nothing when one record is refused checks
/// every record with `check` before adding the first.
pub struct BatchSink<'p> {
    pub(super) producer: &'p Producer,
    pub(super) name: Arc<str>,
    pub(super) topic: Arc<TopicTarget>,
    pub(super) limit: usize,
    pub(super) open: Vec<Option<BatchBuilder>>,
    /// The queued batches' delivery cells with their record counts, per partition.
    pub(super) cells: BatchCells,
    pub(super) sticky: StickyPartitioner,
    /// The last timestamp found good (a bulk send gives many records one).
    pub(super) checked_timestamp: Option<i64>,
}

impl BatchSink<'_> {
    pub fn partitions(&self) -> i32 {
        self.open.len() as i32
    }

    /// Whether `add` would take the record: its partition (when given), key,
    /// timestamp and size. Nothing is added.
    pub fn check(&mut self, partition: Option<i32>, rec: &NewRecord<'_>) -> Result<()> {
        // Which partition a key or the sticky choice picks does not matter here:
        // every partition of the topic has the topic's settings.
        self.checked_size(partition.unwrap_or(0), rec).map(|_| ())
    }

    /// The record's size in a batch, once it passed every check of `add`.
    fn checked_size(&mut self, partition: i32, rec: &NewRecord<'_>) -> Result<usize> {
        if usize::try_from(partition).ok().is_none_or(|p| p >= self.open.len()) {
            let count = self.partitions();
            return Err(Error::UnknownPartition { topic: self.name.to_string(), partition, count });
        }
        if rec.key.is_none() {
            self.topic.partition(&self.name, partition)?.check_key(None)?;
        }
        if self.checked_timestamp != Some(rec.timestamp) {
            check_send_timestamp(rec.timestamp)?;
            self.topic.partition(&self.name, partition)?.check_timestamp(rec.timestamp, now_ms())?;
            self.checked_timestamp = Some(rec.timestamp);
        }
        let size = rec.value.map_or(0, <[u8]>::len)
            + rec.key.map_or(0, <[u8]>::len)
            + rec.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 10).sum::<usize>()
            + RECORD_OVERHEAD;
        let max = self.topic.max_message_bytes;
        if size + crate::record::batch::HEADER_LEN > max {
            return Err(Error::RecordTooLarge { size: size + crate::record::batch::HEADER_LEN, max });
        }
        Ok(size)
    }

    /// Adds a record to `partition`, or, without one, to the partition Kafka's
    /// default partitioner picks (by key, else sticky). A batch this fills is
    /// queued at once.
    pub fn add(&mut self, partition: Option<i32>, rec: &NewRecord<'_>) -> Result<()> {
        let partition = self.pick(partition, rec.key);
        let size = self.checked_size(partition, rec)?;
        self.place(partition, rec, size)
    }

    /// Adds a run of records with one timestamp and no headers (a bulk send's
    /// `keys[i]`, `values[i]`, keys all None when `keys` is), as `add` would one
    /// by one, except that if any of them is refused none is added. What `add`
    /// checks per record is checked once for the run where it is the same for
    /// every record (partition, timestamp, a missing key), and by the largest
    /// record for the size.
    pub fn add_all(
        &mut self,
        partition: Option<i32>,
        timestamp: i64,
        keys: Option<&[Option<&[u8]>]>,
        values: &[Option<&[u8]>],
    ) -> Result<()> {
        if keys.is_some_and(|k| k.len() != values.len()) {
            return Err(Error::InvalidArgument(format!(
                "{} keys for {} values",
                keys.map_or(0, <[_]>::len),
                values.len()
            )));
        }
        if values.is_empty() {
            return Ok(());
        }
        let key = |i: usize| keys.and_then(|k| k[i]);
        let len = |b: Option<&[u8]>| b.map_or(0, <[u8]>::len);
        let (mut largest, mut largest_at, mut keyless) = (0, 0, keys.is_none());
        for (i, v) in values.iter().enumerate() {
            let k = key(i);
            keyless |= k.is_none();
            let size = len(k) + len(*v);
            if size > largest {
                (largest, largest_at) = (size, i);
            }
        }
        // The first keyless record if there is one (a compacted topic refuses it),
        // else the largest: between them they meet every check the run can fail,
        // and the one reported is a record the caller gave.
        let probe =
            if keyless { (0..values.len()).find(|&i| key(i).is_none()).unwrap_or(0) } else { largest_at };
        for i in [probe, largest_at] {
            self.check(partition, &NewRecord { timestamp, key: key(i), value: values[i], headers: &[] })?;
        }
        let mut from = 0;
        // Where every record of a batch goes to one partition (given, the only
        // one, or the sticky choice for keyless records), whole runs go into a
        // batch at a time.
        while from < values.len() {
            let p = match (partition, keys) {
                (Some(p), _) => p,
                _ if self.partitions() == 1 => 0,
                (None, None) => self.sticky.partition(&self.name, self.partitions()),
                (None, Some(_)) => break,
            };
            let (compression, limit) = (self.producer.shared.config.compression, self.limit);
            let slot = &mut self.open[p as usize];
            let batch = slot.get_or_insert_with(|| BatchBuilder::with_capacity(compression, limit));
            from += batch.append_run(
                timestamp,
                keys.map(|k| &k[from..]),
                &values[from..],
                limit,
                RECORD_OVERHEAD,
            );
            if from < values.len() {
                // The next record does not fit: the batch is full.
                if let Some(full) = slot.take() {
                    self.sticky.batch_done(&self.name, p);
                    self.queue([(p, full)])?;
                }
            }
        }
        // Keyed records spread over partitions: one at a time.
        for (i, value) in values.iter().enumerate().skip(from) {
            let rec = NewRecord { timestamp, key: key(i), value: *value, headers: &[] };
            let partition = self.pick(partition, rec.key);
            self.place(partition, &rec, len(rec.key) + len(rec.value) + RECORD_OVERHEAD)?;
        }
        Ok(())
    }

    /// The partition a record goes to: the one given, else by key, else sticky.
    fn pick(&mut self, partition: Option<i32>, key: Option<&[u8]>) -> i32 {
        match (partition, key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, self.partitions()),
            (None, None) => self.sticky.partition(&self.name, self.partitions()),
        }
    }

    /// Appends a checked record of `size` to `partition`'s open batch, first
    /// queueing that batch if the record would take it past the limit.
    fn place(&mut self, partition: i32, rec: &NewRecord<'_>, size: usize) -> Result<()> {
        let compression = self.producer.shared.config.compression;
        let limit = self.limit;
        let slot = &mut self.open[partition as usize];
        if slot.as_ref().is_some_and(|b| !b.is_empty() && b.size_in_bytes() + size > limit) {
            if let Some(full) = slot.take() {
                self.sticky.batch_done(&self.name, partition);
                self.queue([(partition, full)])?;
            }
        }
        self.open[partition as usize]
            .get_or_insert_with(|| BatchBuilder::with_capacity(compression, limit))
            .append(rec);
        Ok(())
    }

    /// Queues the batches behind what `send` left open in their partitions and
    /// wakes the sender.
    fn queue(&mut self, batches: impl IntoIterator<Item = (i32, BatchBuilder)>) -> Result<()> {
        let shared = &self.producer.shared;
        {
            let mut acc = shared.acc.lock();
            if acc.closing {
                return Err(Error::ClientClosed("producer"));
            }
            for (p, builder) in batches {
                let pkey = (self.name.clone(), p);
                if !acc.partitions.contains_key(&pkey) {
                    let log = self.topic.partition(&self.name, p)?.clone();
                    acc.partitions.insert(pkey.clone(), PartitionState { log, open: None });
                }
                shared.seal(&mut acc, &pkey);
                let log = acc.partitions[&pkey].log.clone();
                let cell = Arc::new(DeliveryCell::default());
                let count = builder.len();
                let bytes = builder.size_in_bytes();
                acc.buffered += bytes;
                acc.ready.push_back(ReadyBatch { log, builder, cell: cell.clone(), bytes });
                match self.cells.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, v)) => v.push((cell, count)),
                    None => self.cells.push((p, vec![(cell, count)])),
                }
            }
            acc.sender_idle = false;
        }
        shared.work.notify_one();
        Ok(())
    }

    /// Queues the batches still open and returns, per partition, the delivery
    /// cells of every batch queued, with their record counts.
    pub fn finish(mut self) -> Result<BatchCells> {
        let rest: Vec<(i32, BatchBuilder)> = (self.open.iter_mut().enumerate())
            .filter_map(|(p, b)| b.take().filter(|b| !b.is_empty()).map(|b| (p as i32, b)))
            .collect();
        if !rest.is_empty() {
            self.queue(rest)?;
        }
        Ok(self.cells)
    }
}
