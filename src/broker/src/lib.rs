//! The broker: Kafka's wire protocol over the logs of `seglog-core`, so that
//! Kafka's own clients read and write a store over the network.
//!
//! Empty for now; the server, one handler per API, the group coordinator and
//! replication land here, on top of the core and never below it.
