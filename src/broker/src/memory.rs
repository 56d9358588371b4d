//! Broker-wide pools of memory: one for the bytes of requests read and not
//! yet answered (`queued.max.request.bytes`), one for the bytes of responses
//! built and not yet written (`queued.max.response.bytes`). Each is a count of
//! bytes (a gauge in the metrics) and, when bounded, a semaphore that large
//! requests and responses wait on. Small ones are counted but never wait: a
//! connection holds at most one request and one response at a time, so what
//! they take is bounded by the connections, and they are never held up behind
//! large ones.

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Requests and responses up to this size are counted, never pooled.
pub const SMALL: usize = 64 << 10;

/// One pool: `capacity` bytes when bounded, and the gauge of bytes held.
#[derive(Clone, Default)]
pub struct Memory {
    pool: Option<Arc<Semaphore>>,
    capacity: usize,
    held: Gauge,
}

impl Memory {
    /// A pool of `bytes` (None: no bound) whose use `held` shows.
    pub fn new(bytes: Option<usize>, held: Gauge) -> Memory {
        // A semaphore holds at most `Semaphore::MAX_PERMITS`; a bound above
        // that is no bound in practice.
        let bytes = bytes.map(|b| b.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize));
        Memory { pool: bytes.map(|b| Arc::new(Semaphore::new(b))), capacity: bytes.unwrap_or(0), held }
    }

    /// Whether the pool is bounded, and by how many bytes.
    pub fn capacity(&self) -> Option<usize> {
        self.pool.as_ref().map(|_| self.capacity)
    }

    /// Bytes held now.
    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        self.held.get().max(0) as usize
    }

    /// `bytes` counted, and taken from the pool when `pooled` (waiting until
    /// there is room). More than the whole pool takes the whole pool: such a
    /// request or response goes alone.
    pub async fn reserve(&self, bytes: usize, pooled: bool) -> Reservation {
        let mut permit = None;
        if let (Some(pool), true) = (&self.pool, pooled) {
            // The semaphore is never closed.
            permit = pool.clone().acquire_many_owned(self.permits(bytes)).await.ok();
        }
        self.counted(bytes, permit)
    }

    /// `bytes` taken from the pool if it has room now.
    pub fn try_reserve(&self, bytes: usize) -> Option<Reservation> {
        let permit = match &self.pool {
            Some(pool) => Some(pool.clone().try_acquire_many_owned(self.permits(bytes)).ok()?),
            None => None,
        };
        Some(self.counted(bytes, permit))
    }

    fn permits(&self, bytes: usize) -> u32 {
        bytes.min(self.capacity) as u32
    }

    fn counted(&self, bytes: usize, permit: Option<OwnedSemaphorePermit>) -> Reservation {
        self.held.inc_by(bytes as i64);
        Reservation { _permit: permit, bytes, held: self.held.clone() }
    }
}

/// Room taken from a pool, given back when dropped.
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
    held: Gauge,
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.held.dec_by(self.bytes as i64);
    }
}

#[cfg(test)]
#[path = "memory_test.rs"]
mod tests;
