//! Quotas as Kafka measures them: a rate over a few fixed windows
//! (`replication.quota.window.num` windows of
//! `replication.quota.window.size.seconds` for the replication throttles),
//! compared with a bound. As in Kafka's `Rate` over a `SampledStat`, the
//! rate's time span is at least all windows but the current one, so a burst
//! after a quiet period is allowed up to about that span's worth of the
//! bound, and the long-run rate stays under it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Amounts recorded per window, oldest first.
#[derive(Debug)]
pub struct Rate {
    window: Duration,
    windows: usize,
    samples: VecDeque<(Instant, f64)>,
}

impl Rate {
    pub fn new(window: Duration, windows: usize) -> Rate {
        Rate {
            window: window.max(Duration::from_millis(1)),
            windows: windows.max(1),
            samples: VecDeque::new(),
        }
    }

    /// Adds `amount` at `now` to the current window (a new one once the
    /// current one is a window old).
    pub fn record(&mut self, now: Instant, amount: f64) {
        self.purge(now);
        match self.samples.back_mut() {
            Some((start, total)) if now.saturating_duration_since(*start) < self.window => *total += amount,
            _ => {
                self.samples.push_back((now, amount));
                while self.samples.len() > self.windows {
                    self.samples.pop_front();
                }
            }
        }
    }

    /// Per second at `now`: the windows' total over the time since the
    /// oldest one started, counted as at least `windows - 1` whole windows.
    pub fn measure(&mut self, now: Instant) -> f64 {
        self.purge(now);
        let total: f64 = self.samples.iter().map(|s| s.1).sum();
        total / self.span(now).as_secs_f64().max(0.001)
    }

    /// The time the rate at `now` is taken over: since the oldest window
    /// kept began, and at least `windows - 1` whole windows.
    pub fn span(&self, now: Instant) -> Duration {
        let oldest = self.samples.front().map_or(now, |s| s.0);
        let mut elapsed = now.saturating_duration_since(oldest);
        let full = (elapsed.as_nanos() / self.window.as_nanos()) as usize;
        let least = self.windows - 1;
        if full < least {
            elapsed += self.window * (least - full) as u32;
        }
        elapsed
    }

    /// The time since anything was last recorded (`None` if nothing is kept).
    pub fn idle(&self, now: Instant) -> Option<Duration> {
        self.samples.back().map(|s| now.saturating_duration_since(s.0))
    }

    /// Windows older than all the windows kept count no more.
    fn purge(&mut self, now: Instant) {
        let span = self.window * self.windows as u32;
        while self.samples.front().is_some_and(|s| now.saturating_duration_since(s.0) >= span) {
            self.samples.pop_front();
        }
    }
}

/// A rate with an upper bound that can change while it runs (a dynamic
/// config); `i64::MAX` is no bound.
pub struct Quota {
    bound: AtomicI64,
    rate: Mutex<Rate>,
}

impl Quota {
    pub fn new(window: Duration, windows: usize) -> Quota {
        Quota { bound: AtomicI64::new(i64::MAX), rate: Mutex::new(Rate::new(window, windows)) }
    }

    pub fn set_bound(&self, per_second: i64) {
        self.bound.store(per_second, Ordering::Relaxed);
    }

    pub fn bound(&self) -> i64 {
        self.bound.load(Ordering::Relaxed)
    }

    pub fn record(&self, amount: u64) {
        if amount > 0 {
            self.rate.lock().record(Instant::now(), amount as f64);
        }
    }

    /// Whether the measured rate is above the bound.
    pub fn exceeded(&self) -> bool {
        let bound = self.bound();
        bound != i64::MAX && self.rate.lock().measure(Instant::now()) > bound as f64
    }
}

#[cfg(test)]
#[path = "quota_test.rs"]
mod tests;
