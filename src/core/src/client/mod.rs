//! What an embedded client does with a store: the producer (accumulator,
//! sender thread, delivery cells, bulk sink, partitioner) and the consumer's
//! reads (decoded batches, Arrow columns).

pub mod columns;
pub mod consumer_read;
pub mod partitioner;
pub mod producer;
