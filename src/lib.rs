//! seglog: Kafka's log storage as an embeddable library.
//!
//! Layers, each depending only on those before it: `record` (the RecordBatch v2
//! codec) ← `index` / `segment` ← `log` (one partition) ← `store` (topics, config,
//! checkpoints). `bindings` (PyO3, behind the `python` feature) sits on top.

pub mod checkpoint;
pub mod cleaner;
pub mod config;
pub mod error;
pub mod index;
pub mod log;
pub mod maintenance;
pub mod partitioner;
pub mod producer;
pub mod record;
pub mod segment;
pub mod store;
pub mod watch;

#[cfg(feature = "python")]
mod bindings;

pub use error::{CorruptBatch, Error, Result};
pub use log::PartitionLog;
pub use store::Store;
