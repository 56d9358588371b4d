//! Delivery cells: the one result every record of a batch shares, waited on
//! or called back when the sender completes the batch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::Error;

/// Where a batch landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    pub base_offset: i64,
    /// Set for LogAppendTime topics, else -1.
    pub log_append_time: i64,
}

pub type DeliveryResult = std::result::Result<Delivered, Arc<Error>>;
/// Per partition written, its batches' delivery cells and record counts.
pub type BatchCells = Vec<(i32, Vec<(Arc<DeliveryCell>, i32)>)>;
pub(super) type Callback = Box<dyn FnOnce(&DeliveryResult) + Send>;

/// The outcome of one batch, shared by the futures of all its records.
#[derive(Default)]
pub struct DeliveryCell {
    state: Mutex<Option<DeliveryResult>>,
    done: Condvar,
    callbacks: Mutex<Vec<Callback>>,
}

impl DeliveryCell {
    pub fn result(&self) -> Option<DeliveryResult> {
        self.state.lock().clone()
    }

    /// Waits for the batch (forever with `None`).
    pub fn wait(&self, timeout: Option<Duration>) -> Option<DeliveryResult> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.state.lock();
        while st.is_none() {
            match deadline {
                Some(d) => {
                    if self.done.wait_until(&mut st, d).timed_out() {
                        break;
                    }
                }
                None => self.done.wait(&mut st),
            }
        }
        st.clone()
    }

    /// Runs `f` with the result once there is one (now, if there already is).
    pub fn on_complete(&self, f: Callback) {
        let st = self.state.lock();
        if let Some(r) = &*st {
            let r = r.clone();
            drop(st);
            f(&r);
            return;
        }
        self.callbacks.lock().push(f);
        drop(st);
    }

    /// Records the result and wakes waiters; returns the callbacks to run.
    pub(super) fn set_result(&self, r: DeliveryResult) -> Vec<Callback> {
        let mut st = self.state.lock();
        *st = Some(r);
        // Taken under the state lock, so `on_complete` cannot slip one in between.
        let callbacks = std::mem::take(&mut *self.callbacks.lock());
        drop(st);
        self.done.notify_all();
        callbacks
    }
}
