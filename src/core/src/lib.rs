//! seglog-core: Kafka's log storage as an embeddable library, with no Python
//! and no async runtime in it.
//!
//! Layers, each depending only on those before it: `record` (the RecordBatch v2
//! codec) ← `index` ← `segment` ← `log` (one partition) ← `cleaner` · `store`
//! (topics, config, checkpoints, background upkeep) ← `client` (the embedded
//! producer and the consumer's reads) · `group` (the `__consumer_offsets`
//! codec). The bindings and the broker are separate crates on top.

pub mod checkpoint;
pub mod cleaner;
pub mod client;
pub mod clock;
pub mod config;
pub mod error;
pub mod group;
pub mod index;
pub mod leader_epoch;
pub mod log;
pub mod producer_state;
pub mod record;
pub mod segment;
pub mod store;

#[cfg(test)]
mod small_fs;

pub use error::{CorruptBatch, Error, Result};
pub use log::PartitionLog;
pub use store::Store;
