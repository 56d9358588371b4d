//! Kafka's consumer protocol: the subscription a member sends in JoinGroup and
//! the assignment it gets in SyncGroup (`ConsumerProtocolSubscription`,
//! `ConsumerProtocolAssignment`), each with its version prefix. One codec for
//! both sides: the group member here and the broker's coordinator, which
//! reads subscriptions (OffsetDelete) but never assignments.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    consumer_protocol_assignment, ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use seglog_core::error::{Error, Result};

use crate::errors;

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// ConsumerProtocolSubscription, version 0 (what every consumer reads), with its version prefix.
pub fn encode_subscription(topics: &[String]) -> Result<Bytes> {
    let s =
        ConsumerProtocolSubscription::default().with_topics(topics.iter().map(|t| str_bytes(t)).collect());
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    s.encode(&mut buf, 0)
        .map_err(|e| Error::InvalidArgument(format!("encoding a consumer subscription: {e}")))?;
    Ok(buf.freeze())
}

/// The topics of a ConsumerProtocolSubscription; a version above the
/// crate's is read as its highest (Kafka's forward compatibility: newer
/// versions only add fields).
pub fn decode_subscription(bytes: &Bytes) -> Result<Vec<String>> {
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(errors::protocol(
            "the coordinator",
            "a member's subscription is shorter than its version",
        ));
    }
    let version = buf.get_i16().clamp(0, 3);
    let s = ConsumerProtocolSubscription::decode(&mut buf, version).map_err(|e| {
        errors::protocol("the coordinator", format!("undecodable consumer subscription: {e}"))
    })?;
    Ok(s.topics.iter().map(|t| t.to_string()).collect())
}

/// ConsumerProtocolAssignment, version 0, with its version prefix.
pub fn encode_assignment(partitions: &[(String, i32)]) -> Result<Bytes> {
    let mut topics: Vec<consumer_protocol_assignment::TopicPartition> = Vec::new();
    for (topic, p) in partitions {
        match topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(*p),
            None => topics.push(
                consumer_protocol_assignment::TopicPartition::default()
                    .with_topic(TopicName(str_bytes(topic)))
                    .with_partitions(vec![*p]),
            ),
        }
    }
    let a = ConsumerProtocolAssignment::default().with_assigned_partitions(topics);
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    a.encode(&mut buf, 0)
        .map_err(|e| Error::InvalidArgument(format!("encoding a consumer assignment: {e}")))?;
    Ok(buf.freeze())
}

/// The partitions of a ConsumerProtocolAssignment, sorted (an empty
/// assignment, as a coordinator sends a member that got none, is none).
pub fn decode_assignment(bytes: &Bytes) -> Result<Vec<(String, i32)>> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let mut buf = bytes.clone();
    if buf.remaining() < 2 {
        return Err(errors::protocol("the coordinator", "an assignment is shorter than its version"));
    }
    let version = buf.get_i16().clamp(0, 3);
    let a = ConsumerProtocolAssignment::decode(&mut buf, version)
        .map_err(|e| errors::protocol("the coordinator", format!("undecodable consumer assignment: {e}")))?;
    let mut out: Vec<(String, i32)> = a
        .assigned_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.0.to_string(), *p)))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
#[path = "consumer_protocol_test.rs"]
mod tests;
