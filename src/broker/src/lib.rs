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

mod cluster;
pub mod config;
mod connection;
pub mod coordinator;
mod frame;
mod handlers;
mod logline;
mod metrics;
mod response;
mod server;

pub use config::BrokerConfig;
pub use handlers::SUPPORTED;
pub use metrics::Metrics;
pub use server::Broker;
