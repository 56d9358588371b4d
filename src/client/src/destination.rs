//! The core producer's destination over the network: a cluster's partition
//! leaders. The accumulator (batching by size and linger, the buffer bound,
//! the delivery futures) is the embedded producer's; each batch it seals is
//! sent here in one Produce request: with acks=all stamped with the
//! idempotent producer's id and the partition's next sequence (so a retried
//! batch is stored once), else with acks=1.

use std::sync::Arc;

use seglog_core::client::producer::{Appended, Destination, PartitionTarget, TopicTarget};
use seglog_core::error::Result;
use seglog_core::record::batch::set_base_offset;

use crate::producer::IdempotentProducer;

/// Kafka's producer `max.request.size` default: the largest batch sent.
pub const MAX_REQUEST_SIZE: usize = 1 << 20;

pub struct ClusterDestination {
    producer: Arc<IdempotentProducer>,
    acks_all: bool,
}

impl ClusterDestination {
    /// Sends through `producer`; `acks_all` false sends with acks=1 (and no
    /// idempotence: Kafka's needs acks=all).
    pub fn new(producer: Arc<IdempotentProducer>, acks_all: bool) -> Self {
        ClusterDestination { producer, acks_all }
    }
}

impl Destination for ClusterDestination {
    fn topic(&self, name: &str) -> Result<TopicTarget> {
        let t = self.producer.cluster().topic(name, true)?;
        let partitions = (0..t.partitions.len() as i32)
            .map(|partition| {
                Arc::new(RemotePartition {
                    producer: self.producer.clone(),
                    topic: name.to_string(),
                    partition,
                    acks_all: self.acks_all,
                }) as Arc<dyn PartitionTarget>
            })
            .collect();
        Ok(TopicTarget { partitions, max_message_bytes: MAX_REQUEST_SIZE })
    }
}

struct RemotePartition {
    producer: Arc<IdempotentProducer>,
    topic: String,
    partition: i32,
    acks_all: bool,
}

impl PartitionTarget for RemotePartition {
    /// The broker knows the topic's rules (a compacted topic refuses a
    /// record without a key): it answers for each batch.
    fn check_key(&self, _key: Option<&[u8]>) -> Result<()> {
        Ok(())
    }

    fn check_timestamp(&self, _timestamp: i64, _now: i64) -> Result<()> {
        Ok(())
    }

    fn append(&self, batches: &mut [&mut [u8]]) -> Result<Appended> {
        let mut out: Option<Appended> = None;
        for batch in batches.iter_mut() {
            let r = if self.acks_all {
                self.producer.send_built(&self.topic, self.partition, batch)?
            } else {
                self.producer.produce_acks(&self.topic, self.partition, batch.to_vec(), 1)?
            };
            set_base_offset(batch, r.base_offset);
            let last = r.base_offset
                + i64::from(seglog_core::record::RecordBatch::header_only(batch)?.last_offset_delta());
            out = Some(match out {
                None => Appended {
                    base_offset: r.base_offset,
                    last_offset: last,
                    log_append_time: r.log_append_time,
                },
                Some(first) => Appended { last_offset: last, ..first },
            });
        }
        Ok(out.unwrap_or(Appended { base_offset: -1, last_offset: -1, log_append_time: -1 }))
    }

    /// What the broker acknowledged is as durable as its acks setting makes it.
    fn wait_durable(&self, _end: i64) -> Result<()> {
        Ok(())
    }

    /// One batch per request, so that a failure fails that batch alone.
    fn appends_together(&self) -> bool {
        false
    }
}
