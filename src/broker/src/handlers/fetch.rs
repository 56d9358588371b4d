//! Fetch: long poll (`max_wait_ms`, `min_bytes`), `max_bytes` and per-partition
//! limits (the first batch of the first partition with data always goes out
//! whole, as in KIP-74), never past the high watermark for consumers; a
//! cluster member's follower (`replica_id`) reads to the log end, and its
//! fetch offset tells the leader how far it got. The response is
//! encoded here rather than by the protocol crate because each partition's
//! records are a file slice that the connection sends with sendfile.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{FetchRequest, RequestHeader};
use kafka_protocol::ResponseError;
use seglog_core::error::Error;
use seglog_core::store::Store;

use super::{blocking, error_code, Reply};
use crate::replication::Replication;
use crate::response::{encode_header, FileSlice, Part, Response};
use crate::server::Shared;

/// v4 is the first with RecordBatch v2 (librdkafka's MSGVER2), v10 the first
/// with zstd; v12 is flexible and would need topic ids and sessions.
pub const VERSIONS: (i16, i16) = (4, 11);

/// One partition's answer.
pub struct PartitionData {
    pub partition: i32,
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub records: Option<FileSlice>,
}

pub struct TopicData {
    pub name: String,
    pub partitions: Vec<PartitionData>,
}

/// What a fetch asks of one partition.
#[derive(Clone)]
struct Wanted {
    topic: String,
    partition: i32,
    offset: i64,
    max_bytes: i64,
    /// The leader epoch the fetcher believes current (-1: not said).
    current_epoch: i32,
}

/// Who fetches: a consumer reads up to the high watermark; a follower of a
/// cluster member's partition up to the log end, and its fetch moves the
/// leader's bookkeeping.
#[derive(Clone)]
struct Fetcher {
    replication: Option<Arc<Replication>>,
    replica_id: i32,
}

/// Reads each wanted partition within the limits; the total of record bytes.
fn read_all(store: &Store, wanted: &[Wanted], max_bytes: i64, who: &Fetcher) -> (Vec<TopicData>, u64) {
    let mut topics: Vec<TopicData> = Vec::new();
    let mut total: i64 = 0;
    for w in wanted {
        let mut data = PartitionData {
            partition: w.partition,
            error_code: 0,
            high_watermark: -1,
            log_start_offset: -1,
            records: None,
        };
        let led = match &who.replication {
            Some(r) => r.leader_check(&w.topic, w.partition, w.current_epoch),
            None => Ok(()),
        };
        match (led, store.partition(&w.topic, w.partition)) {
            (Err(code), _) => data.error_code = code,
            (_, Err(e)) => data.error_code = error_code(&e),
            (Ok(()), Ok(log)) => {
                let follower = match &who.replication {
                    Some(r) if who.replica_id >= 0 => r.follower_fetched(&log, who.replica_id, w.offset),
                    _ => false,
                };
                let hw = log.high_watermark();
                let limit = if follower { log.log_end_offset() } else { hw };
                data.high_watermark = hw;
                data.log_start_offset = log.log_start_offset();
                let room = (max_bytes - total).min(w.max_bytes);
                if w.offset < data.log_start_offset || w.offset > limit {
                    data.error_code = ResponseError::OffsetOutOfRange.code();
                } else if w.offset < limit && (room > 0 || total == 0) {
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
                            data.error_code = ResponseError::OffsetOutOfRange.code()
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

pub async fn handle(shared: &Arc<Shared>, r: FetchRequest, header: &RequestHeader, version: i16) -> Reply {
    if r.session_id != 0 || r.session_epoch > 0 {
        // No fetch session was ever handed out (every answer says session 0).
        let body = encode(version, ResponseError::FetchSessionIdNotFound.code(), &[], r.isolation_level);
        return built(header, body);
    }
    let wanted: Vec<Wanted> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| Wanted {
                topic: t.topic.0.to_string(),
                partition: p.partition,
                offset: p.fetch_offset,
                max_bytes: i64::from(p.partition_max_bytes.max(0)),
                current_epoch: p.current_leader_epoch,
            })
        })
        .collect();
    let max_bytes = i64::from(r.max_bytes.max(0));
    let min_bytes = r.min_bytes.max(0) as u64;
    let deadline = Instant::now() + Duration::from_millis(r.max_wait_ms.max(0) as u64);
    let who = Fetcher { replication: shared.replication.clone(), replica_id: r.replica_id.0 };
    // Watching before the first read: a change between the read and the wait
    // is kept by the watch, not lost.
    let watch = shared.purgatory.watch(wanted.iter().map(|w| (w.topic.as_str(), w.partition)));
    let (topics, total) = loop {
        let store = shared.store.clone();
        let w = wanted.clone();
        let f = who.clone();
        let (topics, total) = blocking(move || read_all(&store, &w, max_bytes, &f)).await;
        let errors = topics.iter().flat_map(|t| &t.partitions).any(|p| p.error_code != 0);
        let now = Instant::now();
        if total >= min_bytes.max(1) || errors || now >= deadline || wanted.is_empty() {
            break (topics, total);
        }
        // Wait for a change to one of these partitions, the deadline, or the
        // broker stopping (which answers with what there is now).
        let mut stopping = shared.stopping.clone();
        let woken = tokio::select! {
            r = tokio::time::timeout(deadline - now, watch.changed()) => r.is_ok(),
            _ = stopping.wait_for(|s| *s) => false,
        };
        if !woken {
            let store = shared.store.clone();
            let w = wanted.clone();
            let f = who.clone();
            break blocking(move || read_all(&store, &w, max_bytes, &f)).await;
        }
    };
    drop(watch);
    shared.metrics.bytes_out.inc_by(total);
    for p in topics.iter().flat_map(|t| &t.partitions) {
        shared.metrics.error("Fetch", p.error_code);
    }
    built(header, encode(version, 0, &topics, r.isolation_level))
}

fn built(header: &RequestHeader, body: Vec<Part>) -> Reply {
    let mut head = BytesMut::new();
    // Fetch v4-v11 answers with response header v0, which cannot fail to encode.
    let _ = encode_header(&mut head, header.correlation_id, 0);
    let mut parts = vec![Part::Bytes(head.freeze())];
    parts.extend(body);
    Reply::Built(Response { parts })
}

fn put_string(buf: &mut BytesMut, s: &str) {
    let b = s.as_bytes();
    buf.put_i16(b.len().min(i16::MAX as usize) as i16);
    buf.put_slice(&b[..b.len().min(i16::MAX as usize)]);
}

/// The FetchResponse body of `version` (4 to 11) as parts: the fields as
/// bytes, each partition's records as its file slice.
pub fn encode(version: i16, error: i16, topics: &[TopicData], isolation_level: i8) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0); // throttle_time_ms
    if version >= 7 {
        buf.put_i16(error);
        buf.put_i32(0); // session_id: no sessions
    }
    buf.put_i32(topics.len() as i32);
    for t in topics {
        put_string(&mut buf, &t.name);
        buf.put_i32(t.partitions.len() as i32);
        for p in &t.partitions {
            buf.put_i32(p.partition);
            buf.put_i16(p.error_code);
            buf.put_i64(p.high_watermark);
            buf.put_i64(p.high_watermark); // last_stable_offset: no transactions
            if version >= 5 {
                buf.put_i64(p.log_start_offset);
            }
            // aborted_transactions: null for read_uncommitted, none for read_committed
            buf.put_i32(if isolation_level == 0 { -1 } else { 0 });
            if version >= 11 {
                buf.put_i32(-1); // preferred_read_replica
            }
            match &p.records {
                Some(f) => {
                    buf.put_i32(f.length as i32);
                    parts.push(Part::Bytes(std::mem::take(&mut buf).freeze()));
                    parts.push(Part::File(f.clone()));
                }
                None => buf.put_i32(0),
            }
        }
    }
    if !buf.is_empty() {
        parts.push(Part::Bytes(buf.freeze()));
    }
    parts.retain(|p| !matches!(p, Part::Bytes(b) if b.is_empty()));
    parts
}

#[cfg(test)]
#[path = "fetch_test.rs"]
mod tests;
