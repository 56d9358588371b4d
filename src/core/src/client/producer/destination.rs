//! Where a producer's batches go: the partition logs of a store in this
//! process, or (through seglog-client) a cluster's partition leaders. The
//! accumulator, the batching and the delivery futures are the same for both.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::log::{AppendOrigin, PartitionLog};
use crate::store::Store;

/// Where one `append` put its batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The log's append time for LogAppendTime topics, else -1.
    pub log_append_time: i64,
}

/// One partition a producer appends to.
pub trait PartitionTarget: Send + Sync {
    /// Whether the topic takes a record with this key (a compacted topic
    /// needs one), where that can be known before sending.
    fn check_key(&self, key: Option<&[u8]>) -> Result<()>;
    /// Whether the topic takes a record with this timestamp, where that can
    /// be known before sending.
    fn check_timestamp(&self, timestamp: i64, now: i64) -> Result<()>;
    /// Appends built batches, in order, each one's base offset set in its
    /// buffer.
    fn append(&self, batches: &mut [&mut [u8]]) -> Result<Appended>;
    /// Returns once the partition is durable up to `end` (acks=all on an
    /// embedded log; a broker acknowledges only what its replicas have).
    fn wait_durable(&self, end: i64) -> Result<()>;
    /// Whether consecutive batches go in one `append` (one write of a log);
    /// else each is appended alone, and a failure fails it alone.
    fn appends_together(&self) -> bool {
        true
    }
}

/// A topic's partitions and its size limit for a batch.
pub struct TopicTarget {
    pub partitions: Vec<Arc<dyn PartitionTarget>>,
    /// The largest batch the topic takes (`max.message.bytes`; through a
    /// broker, the producer's `max.request.size`).
    pub max_message_bytes: usize,
}

impl TopicTarget {
    pub fn partition(&self, name: &str, p: i32) -> Result<&Arc<dyn PartitionTarget>> {
        usize::try_from(p).ok().and_then(|i| self.partitions.get(i)).ok_or_else(|| Error::UnknownPartition {
            topic: name.to_string(),
            partition: p,
            count: self.partitions.len() as i32,
        })
    }
}

/// Where a producer sends.
pub trait Destination: Send + Sync {
    /// The topic, created where that is allowed (`auto.create.topics.enable`).
    fn topic(&self, name: &str) -> Result<TopicTarget>;
}

impl PartitionTarget for PartitionLog {
    fn check_key(&self, key: Option<&[u8]>) -> Result<()> {
        PartitionLog::check_key(self, key)
    }

    fn check_timestamp(&self, timestamp: i64, now: i64) -> Result<()> {
        PartitionLog::check_timestamp(self, timestamp, now)
    }

    fn append(&self, batches: &mut [&mut [u8]]) -> Result<Appended> {
        let info = self.append_buffers(batches, AppendOrigin::Embedded)?;
        Ok(Appended {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            log_append_time: info.log_append_time,
        })
    }

    fn wait_durable(&self, end: i64) -> Result<()> {
        PartitionLog::wait_durable(self, end)
    }
}

/// A store open for writing in this process.
pub struct StoreDestination(pub Arc<Store>);

impl Destination for StoreDestination {
    fn topic(&self, name: &str) -> Result<TopicTarget> {
        let t = self.0.topic_or_create(name)?;
        Ok(TopicTarget {
            partitions: t.partitions.iter().map(|p| p.clone() as Arc<dyn PartitionTarget>).collect(),
            max_message_bytes: t.config.max_message_bytes,
        })
    }
}
