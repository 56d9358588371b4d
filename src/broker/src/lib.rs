//! The broker: Kafka's wire protocol over the logs of `seglog-core`, so that
//! Kafka's own clients (librdkafka, kafka-python, aiokafka, Java) read and
//! write a store over the network.
//!
//! Layout: `server` (runtime, accept loop, stop), `connection` (one client,
//! requests in order), `frame` (sizes and header start), `handlers/` (one file
//! per API, each with its version range), `response` (parts: bytes and file
//! slices sent with sendfile), `metrics` (Prometheus), `cluster`
//! (`meta.properties`). Requests and responses are coded by the
//! `kafka-protocol` crate, except Fetch responses, whose records are file
//! slices. `coordinator/` is Kafka's classic group coordinator.

//! The process allocator must reserve memory lazily (mimalloc does, and it is
//! seglog._native's): kafka-protocol 0.18 reserves a `Vec` for an array's
//! claimed count before reading its elements, so a 20-byte request claiming
//! 2^31 elements asks for ~100 GiB. A lazy reservation of address space costs
//! nothing and the decode then fails on the missing bytes; the system
//! allocator would refuse it and abort the process. The broker's tests run
//! under mimalloc for the same reason. It is built without transparent huge
//! pages, so that memory freed after a burst of requests does not stay
//! resident in 2 MiB pages.

mod authentication;
mod blocking;
mod client_quota;
mod cluster;
pub mod config;
mod connection;
pub mod connection_quotas;
pub mod coordinator;
mod dynamic_config;
mod fetch_session;
mod frame;
mod handlers;
mod logline;
mod memory;
mod metrics;
mod purgatory;
mod quota;
mod replica_manager;
pub mod replication;
mod response;
pub mod security;
mod server;
mod transport;

pub use config::BrokerConfig;
pub use handlers::SUPPORTED;
pub use metrics::Metrics;
pub use server::Broker;

#[cfg(test)]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
