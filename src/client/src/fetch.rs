//! Fetch: partitions read from their offsets through their leaders, each
//! answer kept as the raw batches plus the partition's high watermark and log
//! start offset; helpers decode them with the core (CRC-checked) into records
//! or straight into Arrow columns. A fetch returns whole batches, so records
//! before the wanted offset are stepped over, and a batch cut at the end of a
//! response (older brokers cut at `max_bytes`) is dropped.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition as WirePartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use seglog_core::client::columns::Columns;
use seglog_core::client::consumer_read::{decode, DecodedBatch};
use seglog_core::error::{kafka_codes, Error, Result};
use seglog_core::record::batch::whole_batches_len;
use seglog_core::record::{parse_records_from, TimestampType};

use crate::cluster::{Cluster, Step};
use crate::errors::{self, About};

/// One partition to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// `max.partition.fetch.bytes` (the first batch comes whole regardless).
    pub max_bytes: i32,
}

impl FetchPartition {
    pub fn new(topic: &str, partition: i32, offset: i64) -> Self {
        FetchPartition { topic: topic.to_string(), partition, offset, max_bytes: 1 << 20 }
    }
}

/// Limits of one fetch (Kafka's consumer keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchOptions {
    /// `fetch.max.wait.ms`: how long the broker may wait for `min_bytes`.
    pub max_wait_ms: i32,
    /// `fetch.min.bytes`.
    pub min_bytes: i32,
    /// `fetch.max.bytes`: for the whole response (the first batch comes whole).
    pub max_bytes: i32,
    /// 0 read_uncommitted, 1 read_committed.
    pub isolation_level: i8,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions { max_wait_ms: 500, min_bytes: 1, max_bytes: 50 << 20, isolation_level: 0 }
    }
}

/// One partition's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    pub topic: String,
    pub partition: i32,
    /// The offset asked for.
    pub offset: i64,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// Whole batches, back to back (a trailing cut batch already dropped).
    pub records: Bytes,
}

/// One record, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    /// Milliseconds since the epoch.
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl FetchedPartition {
    /// The batches, decoded and CRC-checked.
    pub fn batches(&self) -> Result<Vec<DecodedBatch>> {
        decode(&self.records, true)
    }

    /// The offset to fetch next: past the last batch, or the offset asked for.
    pub fn next_offset(&self) -> Result<i64> {
        Ok(self.batches()?.last().map_or(self.offset, |b| b.next_offset().max(self.offset)))
    }

    /// The records at or after the offset asked for, at most `max_records`.
    pub fn records(&self, max_records: usize) -> Result<Vec<FetchedRecord>> {
        let mut out = Vec::new();
        for b in self.batches()? {
            if out.len() >= max_records {
                break;
            }
            if b.control || b.next_offset() <= self.offset {
                continue;
            }
            let skip = if b.contiguous() {
                (self.offset - b.base_offset).clamp(0, i64::from(b.records.max(0))) as i32
            } else {
                0
            };
            for r in parse_records_from(&b.payload, b.records, b.last_offset_delta, skip)? {
                let offset = b.base_offset + i64::from(r.offset_delta);
                if offset < self.offset {
                    continue;
                }
                if out.len() >= max_records {
                    break;
                }
                let (timestamp, timestamp_type) = if b.log_append_time {
                    (b.max_timestamp, TimestampType::LogAppendTime)
                } else {
                    (b.base_timestamp + r.timestamp_delta, TimestampType::CreateTime)
                };
                out.push(FetchedRecord {
                    offset,
                    timestamp,
                    timestamp_type,
                    key: r.key.map(<[u8]>::to_vec),
                    value: r.value.map(<[u8]>::to_vec),
                    headers: r
                        .headers
                        .iter()
                        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.map(<[u8]>::to_vec)))
                        .collect(),
                });
            }
        }
        Ok(out)
    }

    /// Appends the records at or after `from` to `columns`, at most up to
    /// `limit` rows in all; the offset after the last one taken.
    pub fn extend_columns(&self, columns: &mut Columns, from: i64, limit: usize) -> Result<Option<i64>> {
        columns.extend(&self.topic, self.partition, &self.records, from.max(self.offset), limit, true)
    }
}

/// Fetches `wanted` through their leaders; one result per partition, in order.
/// OFFSET_OUT_OF_RANGE comes back as the core's `OffsetOutOfRange` with the
/// log start and high watermark the broker gave.
pub fn fetch(
    cluster: &Cluster,
    wanted: &[FetchPartition],
    options: &FetchOptions,
) -> Vec<Result<FetchedPartition>> {
    cluster.per_leader(
        wanted,
        |w| (w.topic.as_str(), w.partition),
        false,
        |cluster, node, group| fetch_from(cluster, node, group, options),
    )
}

/// Fetches one partition.
pub fn fetch_one(
    cluster: &Cluster,
    wanted: &FetchPartition,
    options: &FetchOptions,
) -> Result<FetchedPartition> {
    fetch(cluster, std::slice::from_ref(wanted), options)
        .pop()
        .unwrap_or_else(|| Err(Error::InvalidArgument("a fetch of one partition got no answer".into())))
}

fn fetch_from(
    cluster: &Cluster,
    node: i32,
    group: &[&FetchPartition],
    options: &FetchOptions,
) -> Result<Vec<Step<FetchedPartition>>> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for w in group {
        let p = WirePartition::default()
            .with_partition(w.partition)
            .with_fetch_offset(w.offset)
            .with_partition_max_bytes(w.max_bytes);
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == w.topic => t.partitions.push(p),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(w.topic.clone())))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let request = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(options.max_wait_ms)
        .with_min_bytes(options.min_bytes)
        .with_max_bytes(options.max_bytes)
        .with_isolation_level(options.isolation_level)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let answer = cluster.with_connection(node, |c| {
        let version = c.version(ApiKey::Fetch)?;
        c.send_at(&request, version, Cluster::wait(options.max_wait_ms) + Duration::from_millis(100))
    })?;
    if answer.error_code != errors::NONE {
        let e = errors::from_code(
            answer.error_code,
            About { api: "Fetch", topic: "", partition: -1, message: None },
        );
        return Ok(group
            .iter()
            .map(|_| {
                if errors::is_retriable(answer.error_code) {
                    Step::Retry(e.duplicate())
                } else {
                    Step::Done(Err(e.duplicate()))
                }
            })
            .collect());
    }
    let mut steps = Vec::with_capacity(group.len());
    // Answers in request order; a partition asked twice (at two offsets) is
    // answered twice, so each answer is taken once.
    let mut taken = vec![false; answer.responses.iter().map(|t| t.partitions.len()).sum()];
    for w in group {
        let found = answer
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
            .enumerate()
            .find(|(i, (t, p))| {
                !taken[*i] && t.topic.0.as_str() == w.topic && p.partition_index == w.partition
            })
            .map(|(i, (_, p))| {
                taken[i] = true;
                p
            });
        let Some(p) = found else {
            steps.push(Step::Done(Err(errors::protocol(
                &format!("node {node}"),
                format!("the Fetch response has no answer for {}-{}", w.topic, w.partition),
            ))));
            continue;
        };
        let about = About { api: "Fetch", topic: &w.topic, partition: w.partition, message: None };
        let step = match p.error_code {
            errors::NONE => {
                // A batch cut at the end is dropped; if it was the only one,
                // that is RecordTooLarge (as Kafka's consumer says), since no
                // fetch within these limits would get past it.
                let mut records = p.records.clone().unwrap_or_default();
                let whole = whole_batches_len(&records);
                if whole == 0 && !records.is_empty() {
                    Step::Done(Err(Error::RecordTooLarge {
                        size: records.len(),
                        max: w.max_bytes.max(0) as usize,
                    }))
                } else {
                    records.truncate(whole);
                    Step::Done(Ok(FetchedPartition {
                        topic: w.topic.clone(),
                        partition: w.partition,
                        offset: w.offset,
                        high_watermark: p.high_watermark,
                        last_stable_offset: p.last_stable_offset,
                        log_start_offset: p.log_start_offset,
                        records,
                    }))
                }
            }
            kafka_codes::OFFSET_OUT_OF_RANGE => Step::Done(Err(Error::OffsetOutOfRange {
                topic: w.topic.clone(),
                partition: w.partition,
                offset: w.offset,
                start: p.log_start_offset,
                end: p.high_watermark,
            })),
            code if errors::is_stale_metadata(code) || errors::is_retriable(code) => {
                Step::Retry(errors::from_code(code, about))
            }
            code => Step::Done(Err(errors::from_code(code, about))),
        };
        steps.push(step);
    }
    Ok(steps)
}

/// Records of one partition from `offset` on as Arrow columns, at most
/// `max_records`: fetches until that many, or the high watermark (only the
/// first fetch waits up to `max_wait_ms` for data). Returns the columns, the
/// offset to read next (None if nothing was read) and the last answer (its
/// high watermark and log start offset).
pub fn fetch_columns(
    cluster: &Cluster,
    wanted: &FetchPartition,
    max_records: usize,
    options: &FetchOptions,
) -> Result<(Columns, Option<i64>, FetchedPartition)> {
    let mut columns = Columns::default();
    let mut next = None;
    let mut at = wanted.clone();
    let mut options = *options;
    loop {
        let got = fetch_one(cluster, &at, &options)?;
        let taken = got.extend_columns(&mut columns, at.offset, max_records)?;
        let moved = matches!(taken, Some(n) if n > at.offset);
        if let Some(n) = taken.filter(|_| moved) {
            next = Some(n);
            at.offset = n;
        }
        if !moved || columns.rows >= max_records || at.offset >= got.high_watermark {
            return Ok((columns, next, got));
        }
        options.max_wait_ms = 0;
    }
}
