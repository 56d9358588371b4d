//! The broker's metrics (Kafka's core broker metrics under Prometheus names),
//! served as Prometheus text by `serve_metrics` and read by tests as numbers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use seglog_core::store::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

type Labels = Vec<(&'static str, String)>;

pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    latency: Family<Labels, Histogram>,
    log_end_offsets: Family<Labels, Gauge>,
    throttled: Family<Labels, Counter>,
    throttle_ms: Family<Labels, Counter>,
    pub bytes_in: Counter,
    pub messages_in: Counter,
    pub bytes_out: Counter,
    pub sendfile_bytes: Counter,
    pub copied_bytes: Counter,
    pub connections: Gauge,
    pub connections_created: Counter,
    pub connection_errors: Counter,
    /// Connections closed because their client sent nothing for `connections.max.idle.ms`.
    pub idle_closed: Counter,
    /// Connections closed at once: their address had `max.connections.per.ip` open.
    pub connections_rejected: Counter,
    /// Times the broker stopped accepting because `max.connections` were open.
    pub connection_slot_waits: Counter,
    /// SASL authentications that succeeded (re-authentications too).
    pub authentications: Counter,
    /// Connections closed by a failed TLS handshake or SASL authentication,
    /// or by a request before authentication or after the session ended.
    pub authentication_failures: Counter,
    /// Parked Produce and Fetch requests dropped because their client went away.
    pub requests_cancelled: Counter,
    /// Connections closed because their client took no bytes of a response
    /// for `connections.max.idle.ms`.
    pub write_timeouts: Counter,
    /// Bytes of requests read and not yet answered (of `queued.max.request.bytes`).
    pub queued_request_bytes: Gauge,
    /// Bytes of responses built and not yet written (of `queued.max.response.bytes`).
    pub queued_response_bytes: Gauge,
    /// Responses made again because the response memory had no room for them
    /// when first built.
    pub responses_deferred: Counter,
    /// Wake-ups of parked requests (one per request per change to a partition it watches).
    pub purgatory_wakeups: Counter,
    /// Requests parked now, waiting for their partitions.
    pub purgatory_parked: Gauge,
    /// A cluster member's replication: Kafka's IsrShrinksPerSec,
    /// IsrExpandsPerSec, LeaderCount and UnderReplicatedPartitions.
    pub isr_shrinks: Counter,
    pub fetch_sessions_opened: Counter,
    pub incremental_fetches: Counter,
    pub isr_expands: Counter,
    /// The replication throttles (Kafka's LeaderReplication and
    /// FollowerReplication byte rates): bytes of throttled replicas sent to
    /// followers and fetched from leaders, and the partitions whose records
    /// were held back because the rate was over its bound.
    pub leader_throttled_bytes: Counter,
    pub follower_throttled_bytes: Counter,
    pub leader_held_back: Counter,
    pub follower_held_back: Counter,
    pub leader_partitions: Gauge,
    pub under_replicated_partitions: Gauge,
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("seglog");
        let requests = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let latency =
            Family::<Labels, Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        let log_end_offsets = Family::<Labels, Gauge>::default();
        let throttled = Family::<Labels, Counter>::default();
        let throttle_ms = Family::<Labels, Counter>::default();
        let m = Metrics {
            throttled: throttled.clone(),
            throttle_ms: throttle_ms.clone(),
            requests: requests.clone(),
            errors: errors.clone(),
            latency: latency.clone(),
            log_end_offsets: log_end_offsets.clone(),
            bytes_in: Counter::default(),
            messages_in: Counter::default(),
            bytes_out: Counter::default(),
            sendfile_bytes: Counter::default(),
            copied_bytes: Counter::default(),
            connections: Gauge::default(),
            connections_created: Counter::default(),
            connection_errors: Counter::default(),
            idle_closed: Counter::default(),
            connections_rejected: Counter::default(),
            connection_slot_waits: Counter::default(),
            authentications: Counter::default(),
            authentication_failures: Counter::default(),
            requests_cancelled: Counter::default(),
            write_timeouts: Counter::default(),
            queued_request_bytes: Gauge::default(),
            queued_response_bytes: Gauge::default(),
            responses_deferred: Counter::default(),
            purgatory_wakeups: Counter::default(),
            purgatory_parked: Gauge::default(),
            isr_shrinks: Counter::default(),
            fetch_sessions_opened: Counter::default(),
            incremental_fetches: Counter::default(),
            isr_expands: Counter::default(),
            leader_throttled_bytes: Counter::default(),
            follower_throttled_bytes: Counter::default(),
            leader_held_back: Counter::default(),
            follower_held_back: Counter::default(),
            leader_partitions: Gauge::default(),
            under_replicated_partitions: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register("requests", "Requests handled, per API (Kafka's RequestsPerSec)", requests);
        registry.register(
            "quota_throttled",
            "Requests over a client quota, per quota (produce, fetch, request, controller_mutation)",
            throttled,
        );
        registry.register(
            "quota_throttle_time_ms",
            "Milliseconds clients were told to wait (and not read from), per quota",
            throttle_ms,
        );
        registry.register(
            "request_errors",
            "Error codes returned, per API and code (Kafka's ErrorsPerSec)",
            errors,
        );
        registry.register(
            "request_latency_seconds",
            "Time from a request's arrival to its response (TotalTimeMs)",
            latency,
        );
        registry.register(
            "log_end_offset",
            "Each partition's log end offset (Kafka's LogEndOffset)",
            log_end_offsets,
        );
        registry.register("bytes_in", "Record bytes appended by Produce (BytesInPerSec)", m.bytes_in.clone());
        registry.register(
            "messages_in",
            "Records appended by Produce (MessagesInPerSec)",
            m.messages_in.clone(),
        );
        registry.register(
            "bytes_out",
            "Record bytes returned by Fetch (BytesOutPerSec)",
            m.bytes_out.clone(),
        );
        registry.register(
            "fetch_sendfile_bytes",
            "Fetch record bytes sent with sendfile, not through user space",
            m.sendfile_bytes.clone(),
        );
        registry.register(
            "fetch_copied_bytes",
            "Fetch record bytes read into a buffer and written",
            m.copied_bytes.clone(),
        );
        registry.register("connections", "Open client connections (connection-count)", m.connections.clone());
        registry.register(
            "connections_created",
            "Connections accepted (connection-creation-total)",
            m.connections_created.clone(),
        );
        registry.register(
            "connection_errors",
            "Connections closed for bad input or I/O errors",
            m.connection_errors.clone(),
        );
        registry.register(
            "connections_idle_closed",
            "Connections closed because their client sent nothing for connections.max.idle.ms",
            m.idle_closed.clone(),
        );
        registry.register(
            "connections_rejected",
            "Connections closed as soon as accepted: their address had max.connections.per.ip open",
            m.connections_rejected.clone(),
        );
        registry.register(
            "successful_authentication",
            "SASL authentications (and re-authentications) that succeeded",
            m.authentications.clone(),
        );
        registry.register(
            "failed_authentication",
            "Connections closed by a failed TLS handshake or SASL authentication, a request before \
             authentication, or a session that ended without re-authentication",
            m.authentication_failures.clone(),
        );
        registry.register(
            "connection_slot_waits",
            "Times accepting stopped until a connection closed: max.connections were open",
            m.connection_slot_waits.clone(),
        );
        registry.register(
            "requests_cancelled",
            "Parked Produce and Fetch requests dropped when their client went away",
            m.requests_cancelled.clone(),
        );
        registry.register(
            "connection_write_timeouts",
            "Connections closed because the client read nothing of a response for connections.max.idle.ms",
            m.write_timeouts.clone(),
        );
        registry.register(
            "queued_request_bytes",
            "Bytes of requests read and not yet answered (bounded by queued.max.request.bytes)",
            m.queued_request_bytes.clone(),
        );
        registry.register(
            "queued_response_bytes",
            "Bytes of responses built and not yet written (bounded by queued.max.response.bytes)",
            m.queued_response_bytes.clone(),
        );
        registry.register(
            "responses_deferred",
            "Read-only requests answered again once the response memory had room for their answer",
            m.responses_deferred.clone(),
        );
        registry.register(
            "purgatory_wakeups",
            "Wake-ups of parked Fetch and Produce requests by changes to a partition they wait on",
            m.purgatory_wakeups.clone(),
        );
        registry.register(
            "purgatory_parked",
            "Fetch and Produce requests parked, waiting for their partitions (PurgatorySize)",
            m.purgatory_parked.clone(),
        );
        registry.register(
            "fetch_sessions_opened",
            "Fetch sessions made (KIP-227; Kafka's IncrementalFetchSessionEvictionsPerSec counts their ends)",
            m.fetch_sessions_opened.clone(),
        );
        registry.register(
            "incremental_fetches",
            "Fetch requests served within a fetch session, naming only what changed",
            m.incremental_fetches.clone(),
        );
        registry.register(
            "isr_shrinks",
            "Followers dropped from an ISR by this leader (IsrShrinksPerSec)",
            m.isr_shrinks.clone(),
        );
        registry.register(
            "isr_expands",
            "Followers added to an ISR by this leader (IsrExpandsPerSec)",
            m.isr_expands.clone(),
        );
        registry.register(
            "leader_replication_throttled_bytes",
            "Bytes of throttled replicas (leader.replication.throttled.replicas) sent to followers",
            m.leader_throttled_bytes.clone(),
        );
        registry.register(
            "follower_replication_throttled_bytes",
            "Bytes of throttled replicas (follower.replication.throttled.replicas) fetched from leaders",
            m.follower_throttled_bytes.clone(),
        );
        registry.register(
            "leader_replication_held_back",
            "Partitions answered to a follower without records: leader.replication.throttled.rate exceeded",
            m.leader_held_back.clone(),
        );
        registry.register(
            "follower_replication_held_back",
            "Partitions left out of a follower's fetch: follower.replication.throttled.rate exceeded",
            m.follower_held_back.clone(),
        );
        registry.register(
            "leader_partitions",
            "Partitions this broker leads (LeaderCount)",
            m.leader_partitions.clone(),
        );
        registry.register(
            "under_replicated_partitions",
            "Partitions this broker leads with fewer in-sync replicas than replicas (UnderReplicatedPartitions)",
            m.under_replicated_partitions.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    pub fn request(&self, api: &str, seconds: f64) {
        let labels = vec![("request", api.to_string())];
        self.requests.get_or_create(&labels).inc();
        self.latency.get_or_create(&labels).observe(seconds);
    }

    /// A request over quota `quota` (`produce`, `fetch`, `request`,
    /// `controller_mutation`), its client told to wait `ms`.
    pub fn throttled(&self, quota: &str, ms: u64) {
        let labels = vec![("quota", quota.to_string())];
        self.throttled.get_or_create(&labels).inc();
        self.throttle_ms.get_or_create(&labels).inc_by(ms);
    }

    pub fn error(&self, api: &str, code: i16) {
        if code != 0 {
            self.errors.get_or_create(&vec![("request", api.to_string()), ("error", code.to_string())]).inc();
        }
    }

    /// The registry as Prometheus text, with the log end offsets read now.
    pub fn render(&self, store: &Store) -> String {
        self.log_end_offsets.clear();
        if let Ok(names) = store.topics() {
            for name in names {
                let Ok(topic) = store.topic(&name) else { continue };
                for log in &topic.partitions {
                    let labels = vec![("topic", name.clone()), ("partition", log.partition().to_string())];
                    self.log_end_offsets.get_or_create(&labels).set(log.log_end_offset());
                }
            }
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// The scalar counters, and per-API request and error counts, by name.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        m.insert("bytes_in".into(), self.bytes_in.get());
        m.insert("messages_in".into(), self.messages_in.get());
        m.insert("bytes_out".into(), self.bytes_out.get());
        m.insert("fetch_sendfile_bytes".into(), self.sendfile_bytes.get());
        m.insert("fetch_copied_bytes".into(), self.copied_bytes.get());
        m.insert("connections".into(), self.connections.get().max(0) as u64);
        m.insert("connections_created".into(), self.connections_created.get());
        m.insert("connection_errors".into(), self.connection_errors.get());
        m.insert("connections_idle_closed".into(), self.idle_closed.get());
        m.insert("connections_rejected".into(), self.connections_rejected.get());
        m.insert("connection_slot_waits".into(), self.connection_slot_waits.get());
        m.insert("successful_authentication".into(), self.authentications.get());
        m.insert("failed_authentication".into(), self.authentication_failures.get());
        m.insert("requests_cancelled".into(), self.requests_cancelled.get());
        m.insert("connection_write_timeouts".into(), self.write_timeouts.get());
        m.insert("queued_request_bytes".into(), self.queued_request_bytes.get().max(0) as u64);
        m.insert("queued_response_bytes".into(), self.queued_response_bytes.get().max(0) as u64);
        m.insert("responses_deferred".into(), self.responses_deferred.get());
        m.insert("purgatory_wakeups".into(), self.purgatory_wakeups.get());
        m.insert("purgatory_parked".into(), self.purgatory_parked.get().max(0) as u64);
        m.insert("fetch_sessions_opened".into(), self.fetch_sessions_opened.get());
        m.insert("incremental_fetches".into(), self.incremental_fetches.get());
        m.insert("isr_shrinks".into(), self.isr_shrinks.get());
        m.insert("isr_expands".into(), self.isr_expands.get());
        m.insert("leader_replication_throttled_bytes".into(), self.leader_throttled_bytes.get());
        m.insert("follower_replication_throttled_bytes".into(), self.follower_throttled_bytes.get());
        m.insert("leader_replication_held_back".into(), self.leader_held_back.get());
        m.insert("follower_replication_held_back".into(), self.follower_held_back.get());
        m.insert("leader_partitions".into(), self.leader_partitions.get().max(0) as u64);
        m.insert("under_replicated_partitions".into(), self.under_replicated_partitions.get().max(0) as u64);
        for quota in ["produce", "fetch", "request", "controller_mutation"] {
            let labels = vec![("quota", quota.to_string())];
            m.insert(format!("quota_throttled_{quota}"), self.throttled.get_or_create(&labels).get());
            m.insert(
                format!("quota_throttle_time_ms_{quota}"),
                self.throttle_ms.get_or_create(&labels).get(),
            );
        }
        m
    }
}

/// Serves `GET /metrics` (any path) as Prometheus text until the task is dropped.
pub async fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>, store: Arc<Store>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else { continue };
        let metrics = metrics.clone();
        let store = store.clone();
        tokio::spawn(async move {
            // Read the request head (bounded) and answer whatever was asked.
            let mut head = Vec::with_capacity(1024);
            let mut buf = [0u8; 1024];
            let read = async {
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                true
            };
            if !matches!(tokio::time::timeout(Duration::from_secs(10), read).await, Ok(true)) {
                return;
            }
            let store2 = store.clone();
            let body = tokio::task::spawn_blocking(move || metrics.render(&store2)).await.unwrap_or_default();
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
        });
    }
}
