//! The in-process wake-up for consumers waiting on new data.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

/// Told the topic and partition of every append: how a server parks its
/// waiting requests per partition instead of waking all of them.
pub type AppendListener = Arc<dyn Fn(&str, i32) + Send + Sync>;

/// Wakes consumers waiting for data in this process: bumped on every append to
/// any partition of a store (one per store, shared by its partitions), and
/// tells the listener, if any, which partition it was.
#[derive(Default)]
pub struct AppendSignal {
    seq: Mutex<u64>,
    cv: Condvar,
    listener: RwLock<Option<AppendListener>>,
}

impl AppendSignal {
    pub fn current(&self) -> u64 {
        *self.seq.lock()
    }

    pub(super) fn bump(&self, topic: &str, partition: i32) {
        *self.seq.lock() += 1;
        self.cv.notify_all();
        if let Some(listener) = &*self.listener.read() {
            listener(topic, partition);
        }
    }

    /// Calls `listener` after every append from now on (None: no more).
    pub fn set_listener(&self, listener: Option<AppendListener>) {
        *self.listener.write() = listener;
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
