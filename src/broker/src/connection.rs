//! One client connection: requests are read, handled and answered one at a
//! time, in order (as Kafka mutes a channel while a request is in flight), so
//! a client that does not read its responses stops being read from rather
//! than making the broker buffer without bound.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::frame::{read_frame, FrameError};
use crate::handlers::{handle, Outcome};
use crate::logline::log;
use crate::response::write_response;
use crate::server::Shared;

tokio::task_local! {
    /// The peer of the connection whose request is being handled: the group
    /// coordinator records it as a member's client host.
    static PEER: SocketAddr;
}

/// The client host of the request being handled, as Kafka writes it ("/ip").
pub fn client_host() -> String {
    PEER.try_with(|p| format!("/{}", p.ip())).unwrap_or_default()
}

pub async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let metrics = &shared.metrics;
    metrics.connections.inc();
    let idle = Duration::from_millis(shared.config.connections_max_idle_ms);
    let max = shared.config.socket_request_max_bytes;
    loop {
        let frame = tokio::select! {
            f = tokio::time::timeout(idle, read_frame(&mut stream, max)) => f,
            _ = stop.changed() => break,
        };
        let frame = match frame {
            Err(_) => {
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
        let started = Instant::now();
        let outcome = PEER.scope(peer, handle(&shared, frame)).await;
        let api = outcome.api();
        match outcome {
            Outcome::Respond { response, .. } => {
                if let Err(e) = write_response(&mut stream, &response, shared.config.sendfile, metrics).await
                {
                    if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                        // The client went away before its answer: a normal close.
                        break;
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
        let took = started.elapsed();
        metrics.request(api, took.as_secs_f64());
        if took.as_millis() as u64 >= shared.config.slow_request_ms {
            log("info", "slow_request", &[("peer", &peer), ("api", &api), ("ms", &took.as_millis())]);
        }
    }
    metrics.connections.dec();
}
