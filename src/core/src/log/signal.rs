//! The in-process wake-up for consumers waiting on new data.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Wakes consumers waiting for data in this process: bumped on every append to
/// any partition of a store (one per store, shared by its partitions).
#[derive(Default)]
pub struct AppendSignal {
    seq: Mutex<u64>,
    cv: Condvar,
}

impl AppendSignal {
    pub fn current(&self) -> u64 {
        *self.seq.lock()
    }

    pub(super) fn bump(&self) {
        *self.seq.lock() += 1;
        self.cv.notify_all();
    }

    /// Waits until something was appended after `seen` (a value of `current`),
    /// or until the timeout. Returns whether something was.
    pub fn wait_after(&self, seen: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut seq = self.seq.lock();
        while *seq == seen {
            if self.cv.wait_until(&mut seq, deadline).timed_out() {
                break;
            }
        }
        *seq != seen
    }
}
