//! The replica manager (Kafka's `ReplicaManager`): what the data-path handlers
//! call to append to, read from, list offsets of, delete records of and find
//! leader epochs in the partitions this broker leads. A single broker is a
//! cluster of one leading every partition of its store in epoch 0, so the
//! handlers have one path; a cluster member's leadership, ISR and high
//! watermark come from `replication`. Requests that must wait (a long-polling
//! Fetch, an acks=all Produce) are parked in the purgatory on their partitions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError;
use seglog_core::error::{kafka_codes, Error};
use seglog_core::log::{AppendInfo, AppendOrigin, PartitionLog, LEADER_EPOCH};
use seglog_core::store::Store;
use tokio::sync::watch;

use crate::blocking::blocking;
use crate::metrics::Metrics;
use crate::purgatory::Purgatory;
use crate::replication::Replication;
use crate::response::FileSlice;

/// Kafka's error code for a store error (UNKNOWN_SERVER_ERROR if it has none).
pub fn error_code(e: &Error) -> i16 {
    e.kafka_code().unwrap_or(kafka_codes::UNKNOWN_SERVER_ERROR)
}

/// The error for a requester's idea of a single broker's leader epoch (-1:
/// none given): FENCED_LEADER_EPOCH if older than ours, UNKNOWN_LEADER_EPOCH
/// if newer.
pub fn check_current_epoch(current: i32) -> Result<(), i16> {
    match current {
        -1 => Ok(()),
        c if c < LEADER_EPOCH => Err(kafka_codes::FENCED_LEADER_EPOCH),
        c if c > LEADER_EPOCH => Err(kafka_codes::UNKNOWN_LEADER_EPOCH),
        _ => Ok(()),
    }
}

/// A partition's append as its leader, for the Produce answer and the wait
/// for replicas.
pub struct Appended {
    pub info: AppendInfo,
    /// The log start offset after the append.
    pub log_start_offset: i64,
    log: Arc<PartitionLog>,
    /// The leadership it was appended in (a cluster member's).
    leadership: Option<u64>,
}

/// What a fetch asks of one partition.
#[derive(Clone)]
pub struct Wanted {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: i64,
    /// The leader epoch the fetcher believes current (-1: not said).
    pub current_epoch: i32,
}

/// Why a client's append was refused: Kafka's code and message, and the
/// records at fault with why (KIP-467's `record_errors`; empty when the
/// batch as a whole was refused).
#[derive(Debug)]
pub struct AppendRefused {
    pub code: i16,
    pub message: String,
    pub record_errors: Vec<(i32, String)>,
}

/// One partition's answer to a fetch.
pub struct PartitionData {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: Option<FileSlice>,
    /// KIP-392: the replica the consumer should fetch from instead (-1: here).
    pub preferred_read_replica: i32,
    /// For a follower: the partition is one this leader throttles
    /// (`leader.replication.throttled.replicas`), so what it sends counts
    /// against `leader.replication.throttled.rate` ...
    pub throttled: bool,
    /// ... and its records were held back: the follower is outside the ISR
    /// and the rate is exceeded.
    pub held_back: bool,
}

impl PartitionData {
    /// A partition answered with `error_code` alone (0: nothing yet).
    pub fn refused(partition: i32, error_code: i16) -> PartitionData {
        PartitionData {
            partition,
            error_code,
            high_watermark: -1,
            log_start_offset: -1,
            records: None,
            preferred_read_replica: -1,
            throttled: false,
            held_back: false,
        }
    }
}

pub struct TopicData {
    pub name: String,
    pub partitions: Vec<PartitionData>,
}

/// A fetch's limits: `max_bytes` in all, answered once `min_bytes` are there
/// or at `deadline`; and who reads.
pub struct FetchParams {
    pub max_bytes: i64,
    pub min_bytes: u64,
    pub deadline: Instant,
    pub reader: Reader,
}

/// Who a fetch reads for.
#[derive(Clone, Debug)]
pub struct Reader {
    /// >= 0: a follower of a cluster member (it reads to the log end).
    pub replica_id: i32,
    /// A consumer's `client.rack` (Fetch v11's `rack_id`; empty: none).
    pub rack: String,
    /// Whether a follower may answer it (KIP-392: a consumer's Fetch v11+).
    pub from_followers: bool,
}

impl Reader {
    /// A consumer of a fetch version without racks (reads at leaders).
    #[cfg(test)]
    pub fn consumer() -> Reader {
        Reader { replica_id: -1, rack: String::new(), from_followers: false }
    }
}

pub struct ReplicaManager {
    store: Arc<Store>,
    replication: Option<Arc<Replication>>,
    purgatory: Arc<Purgatory>,
    metrics: Arc<Metrics>,
    stopping: watch::Receiver<bool>,
}

impl ReplicaManager {
    pub fn new(
        store: Arc<Store>,
        replication: Option<Arc<Replication>>,
        purgatory: Arc<Purgatory>,
        metrics: Arc<Metrics>,
        stopping: watch::Receiver<bool>,
    ) -> ReplicaManager {
        ReplicaManager { store, replication, purgatory, metrics, stopping }
    }

    /// Ok if this broker leads the partition in `current_epoch` (-1: any);
    /// Kafka's code otherwise (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, ...).
    pub fn check_leader(&self, topic: &str, partition: i32, current_epoch: i32) -> Result<(), i16> {
        match &self.replication {
            None => check_current_epoch(current_epoch),
            Some(r) => r.leader_check(topic, partition, current_epoch),
        }
    }

    /// The partition's log where this broker leads it in `current_epoch`.
    pub fn leader_log(
        &self,
        topic: &str,
        partition: i32,
        current_epoch: i32,
    ) -> Result<Arc<PartitionLog>, i16> {
        self.check_leader(topic, partition, current_epoch)?;
        self.store.partition(topic, partition).map_err(|e| error_code(&e))
    }

    /// The partition's log where `reader` may read it: at its leader, or, for
    /// a consumer allowed to (KIP-392), at a follower whose log agrees with
    /// its leader (up to its own high watermark).
    fn readable_log(
        &self,
        topic: &str,
        partition: i32,
        current_epoch: i32,
        reader: &Reader,
    ) -> Result<Arc<PartitionLog>, i16> {
        match &self.replication {
            Some(r) if reader.from_followers && reader.replica_id < 0 => {
                r.read_check(topic, partition, current_epoch)?;
                self.store.partition(topic, partition).map_err(|e| error_code(&e))
            }
            _ => self.leader_log(topic, partition, current_epoch),
        }
    }

    /// The leader epoch this broker leads the partition in (-1: unknown).
    pub fn leader_epoch(&self, topic: &str, partition: i32) -> i32 {
        match &self.replication {
            None => LEADER_EPOCH,
            Some(r) => r.leader_epoch(topic, partition).unwrap_or(-1),
        }
    }

    /// Appends a client's batches (validated as Kafka's LogValidator does) as
    /// the partition's leader; with `acks` = -1 only while enough replicas
    /// are in sync. Blocking: the append may fsync.
    pub fn append_records(
        &self,
        topic: &str,
        partition: i32,
        records: Vec<u8>,
        acks: i16,
    ) -> Result<Appended, AppendRefused> {
        let failed = |e: Error| AppendRefused {
            code: error_code(&e),
            message: e.to_string(),
            record_errors: match e {
                Error::RecordErrors { errors, .. } => errors,
                _ => Vec::new(),
            },
        };
        let refused = |code: i16| AppendRefused {
            code,
            message: format!("{topic}-{partition}: {}", describe_code(code)),
            record_errors: Vec::new(),
        };
        let log = self.store.partition(topic, partition).map_err(failed)?;
        let bytes = records.len() as u64;
        let append = || log.append_as_leader(records, AppendOrigin::Client);
        let (info, leadership) = match &self.replication {
            // The leader and ISR checks, the append and the high watermark's
            // move under the partition's lock (Kafka's appendRecordsToLeader).
            Some(r) => {
                let (info, leadership) = r.append_as_leader(&log, acks, append).map_err(refused)?;
                (info.map_err(failed)?, Some(leadership))
            }
            // A single broker is each partition's only replica, so its ISR is
            // one: acks=all to a topic that wants more in sync is refused, as
            // Kafka refuses it.
            None if acks == -1 && log.config().min_insync_replicas > 1 => {
                return Err(refused(kafka_codes::NOT_ENOUGH_REPLICAS))
            }
            None => (append().map_err(failed)?, None),
        };
        self.metrics.bytes_in.inc_by(bytes);
        self.metrics.messages_in.inc_by(info.records.max(0) as u64);
        Ok(Appended { log_start_offset: log.log_start_offset(), info, log, leadership })
    }

    /// For acks=all: 0 once every in-sync replica has the append (at once
    /// for a single broker), else Kafka's code (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    /// NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT).
    pub async fn wait_for_replicas(&self, a: &Appended, timeout: Duration) -> i16 {
        match (&self.replication, a.leadership) {
            (Some(r), Some(leadership)) => {
                r.wait_committed(&a.log, leadership, a.info.last_offset + 1, timeout).await
            }
            _ => 0,
        }
    }

    /// Reads each wanted partition within the limits (whole batches, never
    /// past the high watermark for a consumer, to the log end for a follower,
    /// whose fetch offset moves the leader's bookkeeping); the total of
    /// record bytes.
    pub fn read(&self, wanted: &[Wanted], max_bytes: i64, reader: &Reader) -> (Vec<TopicData>, u64) {
        let mut topics: Vec<TopicData> = Vec::new();
        let mut total: i64 = 0;
        for w in wanted {
            let mut data = PartitionData::refused(w.partition, 0);
            match self.readable_log(&w.topic, w.partition, w.current_epoch, reader) {
                Err(code) => data.error_code = code,
                Ok(log) => {
                    let follower = match &self.replication {
                        Some(r) if reader.replica_id >= 0 => {
                            match r.follower_fetched(&log, reader.replica_id, w.offset) {
                                Some(in_sync) => {
                                    data.throttled = r.leader_throttled(&log);
                                    data.held_back = data.throttled && !in_sync && r.leader_over_rate();
                                    true
                                }
                                None => false,
                            }
                        }
                        _ => false,
                    };
                    let held_back = data.held_back;
                    let hw = log.high_watermark();
                    let limit = if follower { log.log_end_offset() } else { hw };
                    data.high_watermark = hw;
                    data.log_start_offset = log.log_start_offset();
                    // KIP-392: a consumer in another rack than this leader is sent
                    // to an in-sync replica in its own, with no records.
                    let preferred = match &self.replication {
                        Some(r) if reader.replica_id < 0 && !reader.rack.is_empty() => {
                            r.preferred_read_replica(&w.topic, w.partition, &reader.rack, w.offset)
                        }
                        _ => None,
                    };
                    if let Some(replica) = preferred {
                        data.preferred_read_replica = replica;
                        match topics.last_mut() {
                            Some(t) if t.name == w.topic => t.partitions.push(data),
                            _ => topics.push(TopicData { name: w.topic.clone(), partitions: vec![data] }),
                        }
                        continue;
                    }
                    let room = (max_bytes - total).min(w.max_bytes);
                    // Out of range only outside the log, as in Kafka: a consumer
                    // between the high watermark and the log end (at a new leader
                    // whose high watermark has not caught up) gets nothing yet.
                    if w.offset < data.log_start_offset || w.offset > log.log_end_offset() {
                        data.error_code = kafka_codes::OFFSET_OUT_OF_RANGE;
                    } else if w.offset < limit && (room > 0 || total == 0) && !held_back {
                        match log.read_upto(w.offset, room.max(1) as u64, limit) {
                            Ok(slice) => {
                                if let (Some(segment), Some(range)) = (slice.segment, slice.range) {
                                    // Only the first partition with data may exceed the limits.
                                    if total == 0 || range.length as i64 <= room {
                                        total += range.length as i64;
                                        data.records = Some(FileSlice {
                                            segment,
                                            position: range.position,
                                            length: range.length,
                                        });
                                    }
                                }
                            }
                            Err(Error::OffsetOutOfRange { .. }) => {
                                data.error_code = kafka_codes::OFFSET_OUT_OF_RANGE
                            }
                            Err(e) => data.error_code = error_code(&e),
                        }
                    }
                }
            }
            match topics.last_mut() {
                Some(t) if t.name == w.topic => t.partitions.push(data),
                _ => topics.push(TopicData { name: w.topic.clone(), partitions: vec![data] }),
            }
        }
        (topics, total.max(0) as u64)
    }

    /// Kafka's `fetchMessages`: reads, and while fewer than `min_bytes` are
    /// there and no partition has an error, parks the fetch on its
    /// partitions until one changes, the deadline, or the broker stopping
    /// (which answers with what there is now).
    pub async fn fetch_messages(
        self: &Arc<Self>,
        wanted: Arc<Vec<Wanted>>,
        params: FetchParams,
    ) -> (Vec<TopicData>, u64) {
        // Watching before the first read: a change between the read and the
        // wait is kept by the watch, not lost.
        let watch = self.purgatory.watch(wanted.iter().map(|w| (w.topic.as_str(), w.partition)));
        loop {
            let (me, w) = (self.clone(), wanted.clone());
            let (max_bytes, reader) = (params.max_bytes, params.reader.clone());
            let (topics, total) = blocking(move || me.read(&w, max_bytes, &reader)).await;
            // An error or a preferred replica is answered at once.
            let errors = topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code != 0 || p.preferred_read_replica >= 0);
            let now = Instant::now();
            if total >= params.min_bytes.max(1) || errors || now >= params.deadline || wanted.is_empty() {
                return (topics, total);
            }
            let mut stopping = self.stopping.clone();
            let woken = tokio::select! {
                r = tokio::time::timeout(params.deadline - now, watch.changed()) => r.is_ok(),
                _ = stopping.wait_for(|s| *s) => false,
            };
            if !woken {
                let (me, w, reader) = (self.clone(), wanted.clone(), params.reader.clone());
                return blocking(move || me.read(&w, params.max_bytes, &reader)).await;
            }
        }
    }

    /// Kafka's ListOffsets at the leader: the high watermark for -1 (latest),
    /// else the first offset whose timestamp is at or after `timestamp` (-2:
    /// the log start), with the timestamp found; None where none is.
    pub fn list_offset(
        &self,
        topic: &str,
        partition: i32,
        current_epoch: i32,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, i16> {
        const LATEST: i64 = -1;
        let log = self.leader_log(topic, partition, current_epoch)?;
        if timestamp == LATEST {
            // The high watermark: what a consumer can read up to.
            return Ok(Some((log.high_watermark(), -1)));
        }
        log.offset_for_time(timestamp).map_err(|e| match e {
            Error::InvalidArgument(_) => kafka_codes::INVALID_REQUEST,
            e => error_code(&e),
        })
    }

    /// Kafka's `deleteRecordsOnLocalLog` at the leader: the log start moved up
    /// to `offset` (-1: the high watermark); the new low watermark. Followers
    /// take the new log start from their next fetch.
    pub fn delete_records(&self, topic: &str, partition: i32, offset: i64) -> Result<i64, i16> {
        self.check_leader(topic, partition, -1)?;
        let done = self
            .store
            .delete_records(topic, partition, offset)
            .and_then(|()| self.store.partition(topic, partition));
        match done {
            Ok(log) => Ok(log.log_start_offset()),
            Err(Error::InvalidArgument(_)) => Err(kafka_codes::OFFSET_OUT_OF_RANGE),
            Err(e) => Err(error_code(&e)),
        }
    }

    /// Where `leader_epoch` ends in the partition's log (KIP-101/320), as its
    /// leader in `current_epoch`: (the largest epoch at or below it, its end offset).
    pub fn offset_for_leader_epoch(
        &self,
        topic: &str,
        partition: i32,
        current_epoch: i32,
        leader_epoch: i32,
    ) -> Result<(i32, i64), i16> {
        let log = self.store.partition(topic, partition).map_err(|e| error_code(&e))?;
        self.check_leader(topic, partition, current_epoch)?;
        Ok(log.offset_for_leader_epoch(leader_epoch))
    }
}

/// Kafka's words for the codes a leader refuses or fails a Produce with.
pub fn describe_code(code: i16) -> &'static str {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::NotLeaderOrFollower) => "this broker is not the partition's leader",
        Some(ResponseError::NotEnoughReplicas) => {
            "Messages are rejected since there are fewer in-sync replicas than required."
        }
        Some(ResponseError::NotEnoughReplicasAfterAppend) => {
            "Messages are written to the log, but to fewer in-sync replicas than required."
        }
        Some(ResponseError::RequestTimedOut) => "the in-sync replicas did not confirm the write in time",
        _ => "refused",
    }
}
