//! One client connection: requests are read, handled and answered one at a
//! time, in order (as Kafka mutes a channel while a request is in flight), so
//! a client that does not read its responses stops being read from rather
//! than making the broker buffer without bound. What a client can hold is
//! bounded: a parked Produce or Fetch is dropped when its client goes away, a
//! response that makes no progress for `connections.max.idle.ms` closes the
//! connection, request bytes come from the broker's request memory, and
//! large responses wait for room in its response memory before they are
//! written.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::authentication::{Authentication, Gate};
use crate::frame::{read_frame_awaiting, reserve_decoding, FrameError, HeaderStart, LowWater};
use crate::handlers::{handle, Outcome};
use crate::logline::log;
use crate::memory::{Reservation, SMALL};
use crate::response::write_response;
use crate::security::{principal, ListenerSecurity};
use crate::server::Shared;
use crate::transport::Transport;

/// How long a client may take over its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is asking: what a handler may need to know of the connection its
/// request came on.
#[derive(Clone)]
pub struct RequestContext {
    pub peer: SocketAddr,
    /// The listener's name: Metadata answers with each broker's endpoint of it.
    pub listener: Arc<str>,
    /// `User:<name>`, or `User:ANONYMOUS`.
    pub principal: Arc<str>,
    /// How long the client must wait after the request being handled (the
    /// longest of its quotas' throttles, in milliseconds): its connection is
    /// not read from meanwhile, as Kafka mutes a throttled channel.
    pub throttle_ms: Arc<std::sync::atomic::AtomicU64>,
}

tokio::task_local! {
    static CONTEXT: RequestContext;
}

/// The client host of the request being handled, as Kafka writes it ("/ip").
pub fn client_host() -> String {
    CONTEXT.try_with(|c| format!("/{}", c.peer.ip())).unwrap_or_default()
}

/// The principal and client address of the request being handled
/// (ANONYMOUS outside a request).
pub fn principal_and_host() -> (Arc<str>, String) {
    CONTEXT
        .try_with(|c| (c.principal.clone(), c.peer.ip().to_canonical().to_string()))
        .unwrap_or_else(|_| (Arc::from(principal::ANONYMOUS), String::new()))
}

/// The user name quotas know the request's principal by (Kafka's
/// `principal.getName`: `alice` of `User:alice`).
pub fn quota_user() -> String {
    let principal =
        CONTEXT.try_with(|c| c.principal.clone()).unwrap_or_else(|_| Arc::from(principal::ANONYMOUS));
    principal.split_once(':').map_or(principal.to_string(), |(_, name)| name.to_string())
}

/// Makes the client of the request being handled wait at least `d` after it.
pub fn throttle(d: Duration) {
    let ms = d.as_millis().min(u128::from(i32::MAX as u32)) as u64;
    let _ = CONTEXT.try_with(|c| c.throttle_ms.fetch_max(ms, std::sync::atomic::Ordering::Relaxed));
}

/// How long the client of the request being handled is to wait after it.
pub fn throttled() -> Duration {
    CONTEXT
        .try_with(|c| Duration::from_millis(c.throttle_ms.load(std::sync::atomic::Ordering::Relaxed)))
        .unwrap_or_default()
}

/// The listener the request being handled came on (`None` outside a request).
pub fn listener_name() -> Option<Arc<str>> {
    CONTEXT.try_with(|c| c.listener.clone()).ok()
}

/// The TLS handshake of a connection to an SSL or SASL_SSL listener; `None`
/// (logged) if it fails or takes longer than `within`.
async fn accept_tls(
    stream: TcpStream,
    peer: SocketAddr,
    security: &ListenerSecurity,
    shared: &Shared,
    within: Duration,
) -> Option<Transport> {
    let Some(acceptor) = &security.tls else { return Some(Transport::Plain(stream)) };
    let buffered = tokio::io::BufReader::with_capacity(crate::transport::TLS_READ_BUFFER, stream);
    match tokio::time::timeout(within, acceptor.accept(buffered)).await {
        Ok(Ok(tls)) => Some(Transport::Tls(Box::new(tls))),
        Ok(Err(e)) => {
            shared.metrics.authentication_failures.inc();
            log(
                "info",
                "tls_handshake_failed",
                &[("peer", &peer), ("listener", &security.name), ("reason", &e)],
            );
            None
        }
        Err(_) => {
            shared.metrics.authentication_failures.inc();
            log(
                "info",
                "tls_handshake_failed",
                &[("peer", &peer), ("listener", &security.name), ("reason", &"timed out")],
            );
            None
        }
    }
}

pub async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    security: Arc<ListenerSecurity>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let metrics = &shared.metrics;
    metrics.connections.inc();
    let idle = Duration::from_millis(shared.config.connections_max_idle_ms);
    let max = shared.config.socket_request_max_bytes;
    let Some(mut stream) = accept_tls(stream, peer, &security, &shared, idle.min(HANDSHAKE_TIMEOUT)).await
    else {
        metrics.connections.dec();
        return;
    };
    let mut sasl = security.protocol.sasl().then(|| Authentication::new(security.clone()));
    let principal = match security.principal_mapper.principal(stream.peer_certificates()) {
        Ok(p) => p,
        Err(subject) => {
            metrics.authentication_failures.inc();
            let reason = format!("no rule of ssl.principal.mapping.rules applies to {subject}");
            log(
                "info",
                "authentication_failed",
                &[("peer", &peer), ("listener", &security.name), ("reason", &reason)],
            );
            metrics.connections.dec();
            return;
        }
    };
    let mut context = RequestContext {
        peer,
        listener: Arc::from(security.name.as_str()),
        principal: Arc::from(principal.as_str()),
        throttle_ms: Arc::default(),
    };
    // Under TLS the reader may already hold part of a record (at most a
    // record's 16 KiB of plaintext and its overhead) of what is still owed.
    let slack = if stream.zero_copy() { 0 } else { (16 << 10) + 512 };
    let mut low_water = LowWater::new(stream.tcp().as_raw_fd(), slack);
    loop {
        let mut awaiting = |n| low_water.awaiting(n);
        let reading = read_frame_awaiting(&mut stream, max, &shared.request_memory, &mut awaiting);
        let frame = tokio::select! {
            f = tokio::time::timeout(idle, reading) => f,
            _ = stop.changed() => break,
        };
        let mut frame = match frame {
            Err(_) => {
                metrics.idle_closed.inc();
                log("info", "connection_idle_closed", &[("peer", &peer), ("idle_ms", &idle.as_millis())]);
                break;
            }
            Ok(Err(FrameError::Closed)) => break,
            Ok(Err(e)) => {
                metrics.connection_errors.inc();
                log("warn", "connection_error", &[("peer", &peer), ("reason", &e)]);
                break;
            }
            Ok(Ok(frame)) => frame,
        };
        if !is_produce(&frame.bytes) {
            if let Err(needed) = reserve_decoding(&shared.request_memory, &mut frame).await {
                metrics.connection_errors.inc();
                let reason = format!(
                    "a request of {} bytes other than Produce may take {needed} bytes decoded, more than \
                     queued.max.request.bytes",
                    frame.bytes.len()
                );
                log("warn", "connection_error", &[("peer", &peer), ("reason", &reason)]);
                break;
            }
        }
        if let Some(auth) = sasl.as_mut() {
            let before = auth.completed();
            let gate = auth.gate(&shared, &frame.bytes);
            if auth.completed() > before {
                metrics.authentications.inc();
                context.principal = Arc::from(auth.principal().unwrap_or(principal::ANONYMOUS));
            }
            match gate {
                Gate::Serve => {}
                Gate::Reply(response) => {
                    if write_response(&mut stream, &response, false, metrics, idle).await.is_err() {
                        break;
                    }
                    continue;
                }
                Gate::ReplyAndClose(response, reason) => {
                    metrics.authentication_failures.inc();
                    log(
                        "info",
                        "authentication_failed",
                        &[("peer", &peer), ("listener", &security.name), ("reason", &reason)],
                    );
                    let _ = write_response(&mut stream, &response, false, metrics, idle).await;
                    break;
                }
                Gate::Close(reason) => {
                    metrics.authentication_failures.inc();
                    log(
                        "info",
                        "authentication_failed",
                        &[("peer", &peer), ("listener", &security.name), ("reason", &reason)],
                    );
                    break;
                }
            }
        }
        let started = Instant::now();
        context.throttle_ms.store(0, std::sync::atomic::Ordering::Relaxed);
        let handled = answer(&shared, &context, frame.bytes.clone());
        let outcome = if parks(&frame.bytes) {
            // A long poll or an acks=all wait: given up once its client is gone.
            tokio::select! {
                outcome = handled => outcome,
                _ = peer_gone(stream.tcp()) => {
                    metrics.requests_cancelled.inc();
                    break;
                }
            }
        } else {
            handled.await
        };
        let (outcome, _room) = with_room(&shared, &context, &frame.bytes, outcome).await;
        let api = outcome.api();
        match outcome {
            Outcome::Respond { response, .. } => {
                let sendfile = shared.config.sendfile && stream.zero_copy();
                let written = write_response(&mut stream, &response, sendfile, metrics, idle).await;
                if let Err(e) = written {
                    if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                        // The client went away before its answer: a normal close.
                        break;
                    }
                    if e.kind() == ErrorKind::TimedOut {
                        metrics.write_timeouts.inc();
                    }
                    metrics.connection_errors.inc();
                    log("warn", "connection_error", &[("peer", &peer), ("api", &api), ("reason", &e)]);
                    break;
                }
            }
            Outcome::NoResponse { .. } => {}
            Outcome::Close { reason, .. } => {
                metrics.connection_errors.inc();
                log("warn", "connection_error", &[("peer", &peer), ("api", &api), ("reason", &reason)]);
                break;
            }
        }
        drop(frame);
        let took = started.elapsed();
        metrics.request(api, took.as_secs_f64());
        if took.as_millis() as u64 >= shared.config.slow_request_ms {
            log("info", "slow_request", &[("peer", &peer), ("api", &api), ("ms", &took.as_millis())]);
        }
        let mute = Duration::from_millis(context.throttle_ms.load(std::sync::atomic::Ordering::Relaxed));
        if !mute.is_zero() {
            // Over a quota: the answer said how long to wait, and nothing
            // more is read from this client until then. A connection muted
            // for longer than `connections.max.idle.ms` is idle that long,
            // and closed as Kafka closes it.
            tokio::select! {
                _ = tokio::time::sleep(mute.min(idle)) => {}
                _ = peer_gone(stream.tcp()) => break,
                _ = stop.changed() => break,
            }
            if mute > idle {
                metrics.idle_closed.inc();
                log(
                    "info",
                    "connection_idle_closed",
                    &[("peer", &peer), ("throttled_ms", &mute.as_millis())],
                );
                break;
            }
        }
    }
    metrics.connections.dec();
}

/// Handles one request. Read-only requests, whose answers can be as large as
/// the cluster (Metadata for every topic, ListGroups), are answered a few at a
/// time (one per network thread): making an answer takes CPU and memory, and
/// a crowd of such requests gains nothing from more at once. Metadata takes
/// its turn itself, after any topic creation it waits on ZooKeeper for.
async fn answer(shared: &Arc<Shared>, context: &RequestContext, frame: bytes::Bytes) -> Outcome {
    let metadata = HeaderStart::peek(&frame).is_some_and(|h| h.api_key == ApiKey::Metadata as i16);
    let _turn = match answerable_again(&frame) && !metadata {
        // The semaphore is never closed.
        true => shared.answering.acquire().await.ok(),
        false => None,
    };
    CONTEXT.scope(context.clone(), handle(shared, frame)).await
}

/// Takes room in the broker's response memory for `outcome`'s response, held
/// until it is written. A response of up to 64 KiB is only counted. A larger
/// one is written at once if the pool has room; if not, a read-only request's
/// response is dropped, and the request answered again once room for that
/// size is free (holding nothing meanwhile); any other request's effects are
/// done, so its response waits for room as it is.
async fn with_room(
    shared: &Arc<Shared>,
    context: &RequestContext,
    frame: &bytes::Bytes,
    mut outcome: Outcome,
) -> (Outcome, Option<Reservation>) {
    let memory = &shared.response_memory;
    let mut room: Option<Reservation> = None;
    loop {
        let Outcome::Respond { response, .. } = &outcome else { return (outcome, None) };
        let size = response.in_memory();
        if room.as_ref().is_some_and(|r| r.bytes() >= size) {
            return (outcome, room);
        }
        drop(room);
        if size <= SMALL {
            return (outcome, Some(memory.reserve(size, false).await));
        }
        if let Some(r) = memory.try_reserve(size) {
            return (outcome, Some(r));
        }
        if !answerable_again(frame) {
            return (outcome, Some(memory.reserve(size, true).await));
        }
        drop(outcome);
        shared.metrics.responses_deferred.inc();
        room = Some(memory.reserve(size, true).await);
        outcome = answer(shared, context, frame.clone()).await;
    }
}

/// Requests with no effect that answering twice would repeat (Metadata's
/// topic auto-creation happens once): their answer can be dropped and made
/// again.
fn answerable_again(frame: &[u8]) -> bool {
    const READS: &[ApiKey] = &[
        ApiKey::Metadata,
        ApiKey::ApiVersions,
        ApiKey::DescribeConfigs,
        ApiKey::DescribeCluster,
        ApiKey::DescribeLogDirs,
        ApiKey::DescribeGroups,
        ApiKey::ListGroups,
        ApiKey::ListOffsets,
        ApiKey::OffsetFetch,
        ApiKey::FindCoordinator,
        ApiKey::OffsetForLeaderEpoch,
    ];
    HeaderStart::peek(frame).is_some_and(|h| READS.iter().any(|k| *k as i16 == h.api_key))
}

/// Whether a request may wait at the broker for others' doing (a Fetch for
/// data, a Produce for its replicas): those are dropped when the client goes.
/// Group requests are not: the coordinator keeps a member until its session
/// times out, as Kafka does.
fn is_produce(frame: &[u8]) -> bool {
    HeaderStart::peek(frame).is_some_and(|h| h.api_key == ApiKey::Produce as i16)
}

fn parks(frame: &[u8]) -> bool {
    HeaderStart::peek(frame)
        .is_some_and(|h| h.api_key == ApiKey::Fetch as i16 || h.api_key == ApiKey::Produce as i16)
}

/// Completes once the peer has closed or reset the connection. Readiness
/// says so at once for a client that sent nothing more; bytes of a pipelined
/// request keep the socket readable, and then the socket's state is looked
/// at every quarter second instead.
async fn peer_gone(stream: &TcpStream) {
    if stream.ready(Interest::READABLE).await.is_err() {
        return;
    }
    loop {
        if hung_up(stream.as_raw_fd()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether the peer has shut down its side (or reset it), whatever bytes are
/// still unread: poll(2) with POLLRDHUP, which does not wait.
fn hung_up(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLRDHUP, revents: 0 };
    // SAFETY: one pollfd on the stack for the call's duration, timeout 0;
    // the descriptor is the connection's, open while the stream is borrowed.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}
