//! What a Kafka controller (ZooKeeper mode) sends every broker of its
//! cluster: LeaderAndIsr, UpdateMetadata and StopReplica, at the versions its
//! `inter.broker.protocol.version` fixes whatever ApiVersions says — v4, v6
//! and v3 at 2.6, the protocol version a cluster mixing Kafka and seglog
//! brokers runs at (see docs/replication.md).
//!
//! A seglog broker learns leaders, ISRs, assignments and deletions from the
//! znodes the controller writes before it sends any of these, so it answers
//! each with success and acts on the znodes. Answering is what matters: a
//! Kafka controller resends a request without end until it is answered, and
//! completes a topic deletion only once every replica answered its
//! StopReplica without a partition error.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::codec::{
    get_compact_len, get_compact_string, get_i32, get_i64, need, put_compact_string, put_varint, skip_tags,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Api {
    pub key: i16,
    pub name: &'static str,
    /// Served versions; every one of them is flexible (request header v2,
    /// response header v1).
    pub versions: (i16, i16),
}

pub const LEADER_AND_ISR: Api = Api { key: 4, name: "LeaderAndIsr", versions: (4, 4) };
pub const STOP_REPLICA: Api = Api { key: 5, name: "StopReplica", versions: (3, 3) };
pub const UPDATE_METADATA: Api = Api { key: 6, name: "UpdateMetadata", versions: (6, 6) };
pub const APIS: [Api; 3] = [LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA];

/// Per partition: topic, partition, error code.
pub type PartitionErrors = Vec<(String, i32, i16)>;

pub fn api(key: i16) -> Option<Api> {
    APIS.into_iter().find(|a| a.key == key)
}

pub const REQUEST_HEADER_VERSION: i16 = 2;
pub const RESPONSE_HEADER_VERSION: i16 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub controller_id: i32,
    pub controller_epoch: i32,
    /// The receiving broker's epoch as the controller knows it (-1: not said).
    pub broker_epoch: i64,
    /// StopReplica's partitions: topic, partition, and whether to delete it.
    pub stop: Vec<(String, i32, bool)>,
}

/// Decodes the fields all three begin with and, for StopReplica, its
/// partitions. LeaderAndIsr's and UpdateMetadata's partition states and
/// brokers are left unread: ZooKeeper holds the same.
pub fn decode_request(api: Api, b: &mut Bytes) -> Result<Request, String> {
    let controller_id = get_i32(b)?;
    let controller_epoch = get_i32(b)?;
    let broker_epoch = get_i64(b)?;
    let mut stop = Vec::new();
    if api == STOP_REPLICA {
        // A topic takes at least 3 bytes (name, partitions, tags); a
        // partition 10 (two int32s, a bool, tags).
        for _ in 0..get_compact_len(b, 3)? {
            let topic = get_compact_string(b)?;
            for _ in 0..get_compact_len(b, 10)? {
                let partition = get_i32(b)?;
                let _leader_epoch = get_i32(b)?;
                need(b, 1)?;
                let delete = b.get_u8() != 0;
                skip_tags(b)?;
                stop.push((topic.clone(), partition, delete));
            }
            skip_tags(b)?;
        }
        skip_tags(b)?;
    }
    Ok(Request { controller_id, controller_epoch, broker_epoch, stop })
}

/// A request as a Kafka controller encodes it, without partition states
/// or brokers (StopReplica's partitions are written): what tests send.
pub fn encode_request(api: Api, r: &Request, buf: &mut BytesMut) {
    buf.put_i32(r.controller_id);
    buf.put_i32(r.controller_epoch);
    buf.put_i64(r.broker_epoch);
    if api == STOP_REPLICA {
        let mut topics: Vec<(&str, Vec<(i32, bool)>)> = Vec::new();
        for (t, p, delete) in &r.stop {
            match topics.last_mut() {
                Some((last, ps)) if last == t => ps.push((*p, *delete)),
                _ => topics.push((t, vec![(*p, *delete)])),
            }
        }
        put_varint(buf, topics.len() as u32 + 1);
        for (t, ps) in topics {
            put_compact_string(buf, t);
            put_varint(buf, ps.len() as u32 + 1);
            for (p, delete) in ps {
                buf.put_i32(p);
                buf.put_i32(-1);
                buf.put_u8(u8::from(delete));
                put_varint(buf, 0);
            }
            put_varint(buf, 0);
        }
    } else {
        // LeaderAndIsr: topic states, live leaders; UpdateMetadata: topic
        // states, live brokers. Both empty.
        put_varint(buf, 1);
        put_varint(buf, 1);
    }
    put_varint(buf, 0);
}

/// The response: an error code and, for LeaderAndIsr and StopReplica, the
/// partition errors (topic, partition, code).
pub fn encode_response(api: Api, error_code: i16, partitions: &[(String, i32, i16)], buf: &mut BytesMut) {
    buf.put_i16(error_code);
    if api != UPDATE_METADATA {
        put_varint(buf, partitions.len() as u32 + 1);
        for (topic, partition, code) in partitions {
            put_compact_string(buf, topic);
            buf.put_i32(*partition);
            buf.put_i16(*code);
            put_varint(buf, 0);
        }
    }
    put_varint(buf, 0);
}

/// Decodes a response (what tests read).
pub fn decode_response(api: Api, b: &mut Bytes) -> Result<(i16, PartitionErrors), String> {
    need(b, 2)?;
    let error_code = b.get_i16();
    let mut partitions = Vec::new();
    if api != UPDATE_METADATA {
        for _ in 0..get_compact_len(b, 8)? {
            let topic = get_compact_string(b)?;
            let partition = get_i32(b)?;
            need(b, 2)?;
            partitions.push((topic, partition, b.get_i16()));
            skip_tags(b)?;
        }
    }
    skip_tags(b)?;
    Ok((error_code, partitions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_replica_round_trips_and_truncations_are_refused() {
        let r = Request {
            controller_id: 3,
            controller_epoch: 7,
            broker_epoch: 41,
            stop: vec![("a".into(), 0, true), ("a".into(), 2, false), ("b".into(), 1, true)],
        };
        let mut buf = BytesMut::new();
        encode_request(STOP_REPLICA, &r, &mut buf);
        let bytes = buf.freeze();
        assert_eq!(decode_request(STOP_REPLICA, &mut bytes.clone()), Ok(r.clone()));
        for cut in 0..bytes.len() {
            assert!(decode_request(STOP_REPLICA, &mut bytes.slice(..cut)).is_err(), "{cut}");
        }
        let mut buf = BytesMut::new();
        let errors: PartitionErrors = r.stop.iter().map(|(t, p, _)| (t.clone(), *p, 0)).collect();
        encode_response(STOP_REPLICA, 0, &errors, &mut buf);
        assert_eq!(decode_response(STOP_REPLICA, &mut buf.freeze()), Ok((0, errors)));
    }

    #[test]
    fn leader_and_isr_and_update_metadata_read_their_prefix() {
        for api in [LEADER_AND_ISR, UPDATE_METADATA] {
            let r = Request { controller_id: 1, controller_epoch: 2, broker_epoch: -1, stop: Vec::new() };
            let mut buf = BytesMut::new();
            encode_request(api, &r, &mut buf);
            assert_eq!(decode_request(api, &mut buf.freeze()), Ok(r));
            let mut buf = BytesMut::new();
            encode_response(api, 77, &[], &mut buf);
            // Kafka's bytes: the code, (LeaderAndIsr) an empty compact array, no tags.
            let expected: &[u8] = if api == UPDATE_METADATA { &[0, 77, 0] } else { &[0, 77, 1, 0] };
            assert_eq!(&buf[..], expected);
        }
        // A count far beyond the bytes left is refused before allocating.
        let mut b = BytesMut::new();
        b.put_i32(1);
        b.put_i32(1);
        b.put_i64(1);
        put_varint(&mut b, u32::MAX);
        assert!(decode_request(STOP_REPLICA, &mut b.freeze()).is_err());
    }
}
