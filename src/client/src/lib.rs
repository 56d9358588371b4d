//! A blocking Kafka protocol client over `std::net`, for seglog's own Python
//! objects (and any Rust caller) to talk to a broker: seglog's or Kafka's.
//!
//! Layout: `connection` (one broker: framing, ApiVersions, version choice),
//! `cluster` (bootstrap, Metadata, a pool of connections per node, retries
//! with a metadata refresh), then one module per job: `fetch`,
//! `list_offsets`, `producer` (idempotent), `admin`, `group` (a consumer
//! group's member) and `consumer_protocol` (its subscription and assignment). Messages are coded by the
//! `kafka-protocol` crate; record batches stay opaque bytes, built and decoded
//! (CRC-checked) by seglog-core, which also does their compression.

pub mod admin;
pub mod assignor;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod consumer;
pub mod consumer_protocol;
pub mod destination;
pub mod errors;
pub mod fetch;
pub mod group;
pub mod list_offsets;
pub mod producer;

pub use cluster::{Cluster, Metadata, Node, PartitionMetadata, TopicMetadata};
pub use config::ClientConfig;
pub use connection::{Connection, Request, Versions, IMPLEMENTED};
pub use fetch::{
    fetch, fetch_columns, fetch_one, FetchOptions, FetchPartition, FetchedPartition, FetchedRecord,
};
pub use group::{Assignment, GroupMember, MemberConfig};
pub use list_offsets::{list_offset, list_offsets, EARLIEST, LATEST};
pub use producer::{IdempotentProducer, ProduceResult, ProducerConfig};
