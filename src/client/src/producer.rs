//! An idempotent producer: a producer id from InitProducerId, a sequence
//! number per partition, batches built by the core's `BatchBuilder` (with the
//! caller's compression), Produce with acks=all, and a batch that failed
//! retriably (a moved leader, a cut connection) sent again byte for byte, so
//! the broker stores it once whichever copy arrives.
//!
//! One batch per partition is in flight at a time (a partition's sequence is
//! held for the whole send), so sequences reach the log in order. When the
//! retries run out with the outcome unknown (the connection kept failing
//! after the batch was written), the sequence can no longer be trusted: the
//! next send starts over with a new producer id, as Kafka's producer does.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use seglog_core::error::{kafka_codes, Error, Result};
use seglog_core::producer_state::increment_sequence;
use seglog_core::record::batch::set_producer;
use seglog_core::record::{BatchBuilder, Compression, NewRecord, ProducerInfo, RecordBatch};

use crate::cluster::{Cluster, Step};
use crate::errors::{self, About};

/// Settings of an idempotent producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerConfig {
    /// `compression.type`, applied by the core's codecs.
    pub compression: Compression,
    /// `batch.size`-like: records of one `send` are cut into batches of about
    /// this many bytes before compression (a larger record gets its own), each
    /// one Produce request, as Kafka allows one batch per partition per request.
    pub max_batch_bytes: usize,
    /// Whether the producer's metadata requests may create a missing topic
    /// (where the broker allows it), as Kafka's producer does.
    pub allow_auto_create: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig { compression: Compression::None, max_batch_bytes: 1_000_000, allow_auto_create: true }
    }
}

/// Where a `send`'s records went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceResult {
    pub base_offset: i64,
    pub last_offset: i64,
    /// The broker's append time when the topic uses LogAppendTime, else -1.
    pub log_append_time: i64,
    pub log_start_offset: i64,
}

#[derive(Debug, Clone, Copy)]
struct Identity {
    producer_id: i64,
    epoch: i16,
    /// Bumped with every new producer id: sequences of an older one are void.
    generation: u64,
}

#[derive(Default)]
struct Sequence {
    generation: u64,
    next: i32,
}

/// Each partition's sequence, locked for the whole of a send to it.
type Sequences = HashMap<(String, i32), Arc<Mutex<Sequence>>>;

pub struct IdempotentProducer {
    cluster: Arc<Cluster>,
    config: ProducerConfig,
    identity: Mutex<Option<Identity>>,
    generations: std::sync::atomic::AtomicU64,
    sequences: Mutex<Sequences>,
}

fn record_size(r: &NewRecord<'_>) -> usize {
    r.key.map_or(0, <[u8]>::len)
        + r.value.map_or(0, <[u8]>::len)
        + r.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len)).sum::<usize>()
        + 32
}

impl IdempotentProducer {
    /// A producer with a producer id from the cluster.
    pub fn new(cluster: Arc<Cluster>, config: ProducerConfig) -> Result<IdempotentProducer> {
        let p = IdempotentProducer {
            cluster,
            config,
            identity: Mutex::new(None),
            generations: std::sync::atomic::AtomicU64::new(0),
            sequences: Mutex::new(HashMap::new()),
        };
        p.identity()?;
        Ok(p)
    }

    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// (producer id, epoch) in use, if one is.
    pub fn producer_id(&self) -> Option<(i64, i16)> {
        self.identity.lock().map(|i| (i.producer_id, i.epoch))
    }

    /// The current identity, asking for one if there is none.
    fn identity(&self) -> Result<Identity> {
        let mut slot = self.identity.lock();
        if let Some(id) = *slot {
            return Ok(id);
        }
        let (producer_id, epoch) = self.init_producer_id()?;
        let generation = self.generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let id = Identity { producer_id, epoch, generation };
        *slot = Some(id);
        Ok(id)
    }

    /// Drops `generation`'s identity: the next send asks for a new one.
    fn reset(&self, generation: u64) {
        let mut slot = self.identity.lock();
        if slot.is_some_and(|i| i.generation == generation) {
            *slot = None;
        }
    }

    fn init_producer_id(&self) -> Result<(i64, i16)> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1);
        let mut attempt = 0;
        loop {
            let failure = match self.cluster.send_any(&request) {
                Ok(a) if a.error_code == errors::NONE => return Ok((a.producer_id.0, a.producer_epoch)),
                Ok(a) => {
                    let e = errors::from_code(
                        a.error_code,
                        About { api: "InitProducerId", topic: "", partition: -1, message: None },
                    );
                    (errors::is_retriable(a.error_code), e)
                }
                Err(e) => (errors::is_retriable_error(&e), e),
            };
            match failure {
                (true, _) if attempt < self.cluster.config().retries => {
                    std::thread::sleep(self.cluster.config().backoff(attempt));
                    attempt += 1;
                }
                (_, e) => return Err(e),
            }
        }
    }

    fn sequence_of(&self, topic: &str, partition: i32) -> Arc<Mutex<Sequence>> {
        self.sequences.lock().entry((topic.to_string(), partition)).or_default().clone()
    }

    /// Appends `records` to `topic`-`partition`, in batches of about
    /// `max_batch_bytes`, each acknowledged by all in-sync replicas before the
    /// next is sent. A failure after some batches were stored leaves those
    /// stored (and says which offsets in the error's absence: none).
    pub fn send(&self, topic: &str, partition: i32, records: &[NewRecord<'_>]) -> Result<ProduceResult> {
        self.send_with(topic, partition, records, self.config.compression)
    }

    /// As `send`, with `compression` instead of the configured codec.
    pub fn send_with(
        &self,
        topic: &str,
        partition: i32,
        records: &[NewRecord<'_>],
        compression: Compression,
    ) -> Result<ProduceResult> {
        if records.is_empty() {
            return Err(Error::InvalidArgument("a send needs at least one record".into()));
        }
        let slot = self.sequence_of(topic, partition);
        let mut sequence = slot.lock();
        let mut result: Option<ProduceResult> = None;
        let mut start = 0;
        while start < records.len() {
            let mut end = start;
            let mut size = 0;
            while end < records.len()
                && (end == start || size + record_size(&records[end]) <= self.config.max_batch_bytes)
            {
                size += record_size(&records[end]);
                end += 1;
            }
            let chunk = &records[start..end];
            let id = self.identity()?;
            if sequence.generation != id.generation {
                *sequence = Sequence { generation: id.generation, next: 0 };
            }
            let count = chunk.len() as i32;
            let mut builder = BatchBuilder::with_capacity(compression, size + 128).producer(ProducerInfo {
                producer_id: id.producer_id,
                producer_epoch: id.epoch,
                base_sequence: sequence.next,
                transactional: false,
                control: false,
            });
            for r in chunk {
                builder.append(r);
            }
            let batch = builder.build()?;
            match self.produce(topic, partition, batch) {
                Ok(r) => {
                    sequence.next = increment_sequence(sequence.next, count);
                    let last = r.base_offset + i64::from(count) - 1;
                    result = Some(match result {
                        None => ProduceResult { last_offset: last, ..r },
                        Some(first) => ProduceResult { last_offset: last, ..first },
                    });
                }
                Err(e) => {
                    if errors::is_connection_error(&e) {
                        // Stored or not, nobody knows: this sequence is spent.
                        self.reset(id.generation);
                    }
                    return Err(e);
                }
            }
            start = end;
        }
        result.ok_or_else(|| Error::InvalidArgument("a send needs at least one record".into()))
    }

    /// Sends a batch built elsewhere (by a producer's accumulator): stamped
    /// with this producer's id, epoch and the partition's next sequence, with
    /// acks=all. Returns where it was stored.
    pub fn send_built(&self, topic: &str, partition: i32, batch: &mut [u8]) -> Result<ProduceResult> {
        let count = RecordBatch::header_only(batch)?.records_count();
        let slot = self.sequence_of(topic, partition);
        let mut sequence = slot.lock();
        let id = self.identity()?;
        if sequence.generation != id.generation {
            *sequence = Sequence { generation: id.generation, next: 0 };
        }
        set_producer(batch, id.producer_id, id.epoch, sequence.next);
        match self.produce_acks(topic, partition, batch.to_vec(), -1) {
            Ok(r) => {
                sequence.next = increment_sequence(sequence.next, count);
                Ok(ProduceResult { last_offset: r.base_offset + i64::from(count) - 1, ..r })
            }
            Err(e) => {
                if errors::is_connection_error(&e) {
                    // Stored or not, nobody knows: this sequence is spent.
                    self.reset(id.generation);
                }
                Err(e)
            }
        }
    }

    /// Sends one built batch with acks=all, again on retriable failures.
    fn produce(&self, topic: &str, partition: i32, batch: Vec<u8>) -> Result<ProduceResult> {
        self.produce_acks(topic, partition, batch, -1)
    }

    /// Sends one built batch, again on retriable failures; `acks` as Kafka's
    /// (1: the leader's write; -1: every in-sync replica's).
    pub fn produce_acks(
        &self,
        topic: &str,
        partition: i32,
        batch: Vec<u8>,
        acks: i16,
    ) -> Result<ProduceResult> {
        let size = batch.len();
        let records = bytes::Bytes::from(batch);
        let timeout_ms = i32::try_from(self.cluster.config().request_timeout.as_millis()).unwrap_or(i32::MAX);
        let item = [(topic, partition)];
        let mut out = self.cluster.per_leader(
            &item,
            |&(t, p)| (t, p),
            self.config.allow_auto_create,
            |cluster, node, _| {
                let request = ProduceRequest::default()
                    .with_transactional_id(None)
                    .with_acks(acks)
                    .with_timeout_ms(timeout_ms)
                    .with_topic_data(vec![TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(records.clone()))])]);
                let answer = cluster.send(node, &request)?;
                let found = answer
                    .responses
                    .iter()
                    .filter(|t| t.name.0.as_str() == topic)
                    .flat_map(|t| &t.partition_responses)
                    .find(|p| p.index == partition);
                let Some(p) = found else {
                    return Ok(vec![Step::Done(Err(errors::protocol(
                        &format!("node {node}"),
                        format!("the Produce response has no answer for {topic}-{partition}"),
                    )))]);
                };
                let message = p.error_message.as_ref().map(|m| m.to_string());
                let about = About { api: "Produce", topic, partition, message: message.as_deref() };
                let done = ProduceResult {
                    base_offset: p.base_offset,
                    last_offset: -1,
                    log_append_time: p.log_append_time_ms,
                    log_start_offset: p.log_start_offset,
                };
                Ok(vec![match p.error_code {
                    // A copy of a batch already stored: as good as stored (Kafka's producer agrees).
                    errors::NONE | kafka_codes::DUPLICATE_SEQUENCE_NUMBER => Step::Done(Ok(done)),
                    kafka_codes::MESSAGE_TOO_LARGE => Step::Done(Err(errors::message_too_large(size, about))),
                    code if errors::is_stale_metadata(code) || errors::is_retriable(code) => {
                        Step::Retry(errors::from_code(code, about))
                    }
                    code => Step::Done(Err(errors::from_code(code, about))),
                }])
            },
        );
        out.pop().unwrap_or_else(|| Err(Error::InvalidArgument("a Produce got no answer".into())))
    }
}
