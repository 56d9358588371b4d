//! Where a consumer's records come from: a `Store` open in this process
//! ([`StoreSource`]) or a cluster over Kafka's protocol ([`BrokerSource`]).
//! Both answer the same few questions, so the consumer's logic is written once.

use std::sync::Arc;
use std::time::Duration;

use seglog_core::client::columns::Columns;
use seglog_core::client::consumer_read::{read_batches, read_columns, DecodedBatch};
use seglog_core::error::{kafka_codes, Error, Result};
use seglog_core::store::Store;

use crate::cluster::Cluster;
use crate::fetch::{fetch, FetchOptions, FetchPartition};
use crate::list_offsets::{list_offsets, EARLIEST, LATEST};

/// A topic's partition, as Kafka's `TopicPartition`.
pub type TopicPartition = (String, i32);

/// One partition to read from its position.
#[derive(Debug, Clone)]
pub struct Want {
    pub tp: TopicPartition,
    pub offset: i64,
    /// `max.partition.fetch.bytes` (the first batch comes whole regardless).
    pub max_bytes: u64,
    /// The records wanted: a read for a few copies out only about their worth.
    pub max_records: usize,
}

/// What a read of one partition got: whole batches (the first may hold
/// records before the offset asked for), or nothing because it was not read
/// this time (a store read stops once it has enough records).
pub type Read = Option<Result<Vec<DecodedBatch>>>;

/// A consumer's view of a log: metadata, offsets and reads.
pub trait Source: Send + Sync {
    /// The topics there are, internal ones included.
    fn topics(&self) -> Result<Vec<String>>;
    /// How many partitions `topic` has (asked afresh: partitions are added).
    fn partition_count(&self, topic: &str) -> Result<i32>;
    /// (log start offset, high watermark).
    fn offsets(&self, tp: &TopicPartition) -> Result<(i64, i64)>;
    /// (offset, timestamp) of the first record whose timestamp is at or after
    /// `timestamp`, or None if none is.
    fn offset_for_time(&self, tp: &TopicPartition, timestamp: i64) -> Result<Option<(i64, i64)>>;
    /// Reads the partitions from their offsets, one answer per want, in
    /// order; a read may stop early once it has about `budget` records.
    /// With nothing to answer, waits up to `max_wait` for data.
    fn read(&self, wants: &[Want], budget: usize, max_wait: Duration) -> Vec<Read>;
    /// Records from each `(partition, offset)` as Arrow columns, at most
    /// `max_records` in all; per request, the offset to read next (None if
    /// nothing was read from it).
    fn read_columns(
        &self,
        requests: &[(TopicPartition, i64)],
        max_records: usize,
        max_bytes: u64,
    ) -> Result<(Columns, Vec<Option<i64>>)>;
    /// Whether commits (writes) are refused.
    fn read_only(&self) -> bool {
        false
    }
}

/// A store open in this process: reads straight from its segments, waits on
/// its append signal (or inotify, when another process writes it).
pub struct StoreSource {
    store: Arc<Store>,
}

impl StoreSource {
    pub fn new(store: Arc<Store>) -> Self {
        StoreSource { store }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn read_now(&self, wants: &[Want], budget: usize) -> Vec<Read> {
        // Stops once the reads hold the records wanted: the rest are read by
        // the polls that need them.
        let mut got = 0usize;
        wants
            .iter()
            .map(|w| {
                if got >= budget {
                    return None;
                }
                let read = self
                    .store
                    .partition(&w.tp.0, w.tp.1)
                    .and_then(|log| read_batches(&log, w.offset, w.max_bytes, w.max_records.max(1)));
                if let Ok(batches) = &read {
                    got += batches
                        .iter()
                        .filter(|b| b.has_records_from(w.offset))
                        .map(|b| b.records.max(1) as usize)
                        .sum::<usize>();
                }
                Some(read)
            })
            .collect()
    }
}

fn has_records(reads: &[Read], wants: &[Want]) -> bool {
    reads.iter().zip(wants).any(|(r, w)| match r {
        Some(Ok(batches)) => batches.iter().any(|b| b.has_records_from(w.offset)),
        Some(Err(_)) => true,
        None => false,
    })
}

impl Source for StoreSource {
    fn topics(&self) -> Result<Vec<String>> {
        self.store.topics()
    }

    fn partition_count(&self, topic: &str) -> Result<i32> {
        Ok(self.store.topic(topic)?.partitions.len() as i32)
    }

    fn offsets(&self, tp: &TopicPartition) -> Result<(i64, i64)> {
        let log = self.store.partition(&tp.0, tp.1)?;
        log.catch_up()?;
        Ok((log.log_start_offset(), log.log_end_offset()))
    }

    fn offset_for_time(&self, tp: &TopicPartition, timestamp: i64) -> Result<Option<(i64, i64)>> {
        self.store.partition(&tp.0, tp.1)?.offset_for_time(timestamp)
    }

    fn read(&self, wants: &[Want], budget: usize, max_wait: Duration) -> Vec<Read> {
        let reads = self.read_now(wants, budget);
        if max_wait.is_zero() || has_records(&reads, wants) {
            return reads;
        }
        let positions: Vec<(String, i32, i64)> =
            wants.iter().map(|w| (w.tp.0.clone(), w.tp.1, w.offset)).collect();
        match self.store.wait_for_data(&positions, max_wait) {
            Ok(true) => self.read_now(wants, budget),
            Ok(false) => reads,
            Err(e) => wants.iter().map(|_| Some(Err(e.duplicate()))).collect(),
        }
    }

    fn read_columns(
        &self,
        requests: &[(TopicPartition, i64)],
        max_records: usize,
        max_bytes: u64,
    ) -> Result<(Columns, Vec<Option<i64>>)> {
        let requests: Vec<(String, i32, i64)> =
            requests.iter().map(|((t, p), o)| (t.clone(), *p, *o)).collect();
        read_columns(&self.store, &requests, max_records, max_bytes)
    }

    fn read_only(&self) -> bool {
        self.store.is_read_only()
    }
}

/// A cluster (seglog's brokers or Kafka's) over the network: one Fetch per
/// leader for all the partitions it leads.
pub struct BrokerSource {
    cluster: Arc<Cluster>,
}

impl BrokerSource {
    pub fn new(cluster: Arc<Cluster>) -> Self {
        BrokerSource { cluster }
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    fn list(&self, tp: &TopicPartition, timestamp: i64) -> Result<Option<(i64, i64)>> {
        list_offsets(&self.cluster, &[(tp.0.clone(), tp.1, timestamp)])
            .pop()
            .unwrap_or_else(|| Err(Error::InvalidArgument("ListOffsets got no answer".into())))
    }
}

fn wire_bytes(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Source for BrokerSource {
    fn topics(&self) -> Result<Vec<String>> {
        let m = self.cluster.refresh(None, false)?;
        Ok(m.topics.iter().filter(|(_, t)| t.error_code == 0).map(|(name, _)| name.clone()).collect())
    }

    fn partition_count(&self, topic: &str) -> Result<i32> {
        let m = self.cluster.refresh(Some(&[topic.to_string()]), false)?;
        match m.topics.get(topic) {
            Some(t) if t.error_code == 0 => Ok(t.partitions.len() as i32),
            Some(t) if t.error_code != kafka_codes::UNKNOWN_TOPIC_OR_PARTITION => {
                Err(Error::Kafka { code: t.error_code, message: format!("Metadata for topic {topic:?}") })
            }
            _ => Err(Error::UnknownTopic(topic.to_string())),
        }
    }

    fn offsets(&self, tp: &TopicPartition) -> Result<(i64, i64)> {
        let start = self.list(tp, EARLIEST)?.map_or(0, |(o, _)| o);
        let end = self.list(tp, LATEST)?.map_or(0, |(o, _)| o);
        Ok((start, end))
    }

    fn offset_for_time(&self, tp: &TopicPartition, timestamp: i64) -> Result<Option<(i64, i64)>> {
        // ListOffsets v1 and later answer the found record's timestamp.
        Ok(self.list(tp, timestamp)?.map(|(offset, ts)| (offset, if ts >= 0 { ts } else { timestamp })))
    }

    fn read(&self, wants: &[Want], _budget: usize, max_wait: Duration) -> Vec<Read> {
        let wanted: Vec<FetchPartition> = wants
            .iter()
            .map(|w| FetchPartition {
                max_bytes: wire_bytes(w.max_bytes),
                ..FetchPartition::new(&w.tp.0, w.tp.1, w.offset)
            })
            .collect();
        let options = FetchOptions {
            max_wait_ms: i32::try_from(max_wait.as_millis()).unwrap_or(i32::MAX),
            ..FetchOptions::default()
        };
        fetch(&self.cluster, &wanted, &options)
            .into_iter()
            .map(|r| Some(r.and_then(|p| p.batches())))
            .collect()
    }

    fn read_columns(
        &self,
        requests: &[(TopicPartition, i64)],
        max_records: usize,
        max_bytes: u64,
    ) -> Result<(Columns, Vec<Option<i64>>)> {
        let wanted: Vec<FetchPartition> = requests
            .iter()
            .map(|((t, p), o)| FetchPartition {
                max_bytes: wire_bytes(max_bytes),
                ..FetchPartition::new(t, *p, *o)
            })
            .collect();
        let options = FetchOptions { max_wait_ms: 0, ..FetchOptions::default() };
        let mut columns = Columns::default();
        let mut nexts = Vec::with_capacity(requests.len());
        for (got, (_, offset)) in fetch(&self.cluster, &wanted, &options).into_iter().zip(requests) {
            let got = got?;
            let next = if columns.rows < max_records {
                got.extend_columns(&mut columns, *offset, max_records)?.filter(|n| n > offset)
            } else {
                None
            };
            nexts.push(next);
        }
        Ok((columns, nexts))
    }
}
