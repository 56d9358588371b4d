//! What a client needs to know besides where the brokers are.

use std::time::Duration;

/// Settings shared by every connection of a client (Kafka's client keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// `client.id`: sent in every request header, shown in broker logs.
    pub client_id: String,
    /// `socket.connection.setup.timeout.ms`: TCP connect plus the ApiVersions handshake.
    pub connect_timeout: Duration,
    /// `request.timeout.ms`: how long a response may take (a Fetch gets its
    /// `max_wait_ms` on top).
    pub request_timeout: Duration,
    /// The largest response frame accepted. A size above it (a broken or
    /// hostile peer) is an error before anything is allocated; the buffer
    /// also grows only as bytes arrive.
    pub max_response_bytes: usize,
    /// `retries`: attempts after the first for a retriable error (a moved
    /// leader, a cut connection), each after a metadata refresh.
    pub retries: u32,
    /// `retry.backoff.ms`: the first wait between attempts, doubled each time
    /// up to `retry_backoff_max`.
    pub retry_backoff: Duration,
    /// `retry.backoff.max.ms`.
    pub retry_backoff_max: Duration,
    /// Idle connections kept per broker for the next request.
    pub max_idle_connections: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_id: "seglog".into(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_response_bytes: 1 << 30,
            retries: 5,
            retry_backoff: Duration::from_millis(100),
            retry_backoff_max: Duration::from_secs(1),
            max_idle_connections: 4,
        }
    }
}

impl ClientConfig {
    /// The wait before retry number `attempt` (0-based).
    pub fn backoff(&self, attempt: u32) -> Duration {
        self.retry_backoff.saturating_mul(1u32 << attempt.min(16)).min(self.retry_backoff_max)
    }
}
