//! Requests parked until their partitions change (Kafka's
//! `DelayedOperationPurgatory` with partition watch keys): a long-polling
//! Fetch waits for data on its partitions, an acks=all Produce for its
//! partition's high watermark. A change to one partition (an append, a high
//! watermark move) wakes only the requests watching that partition, each
//! once, in the order they began to watch.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;

/// One parked request: woken (a stored permit, so a change between watching
/// and waiting is not missed) by a change to any partition it watches.
#[derive(Default)]
struct Waiter {
    notify: Notify,
}

type Watchers = HashMap<String, HashMap<i32, Vec<Weak<Waiter>>>>;

/// The partitions' watchers, and counters of what they cost.
#[derive(Default)]
pub struct Purgatory {
    watchers: Mutex<Watchers>,
    /// Wake-ups delivered (one per watching request per change).
    pub wakeups: Counter,
    /// Requests watching now.
    pub parked: Gauge,
}

impl Purgatory {
    /// A purgatory whose wake-ups and parked requests these metrics count.
    pub fn new(wakeups: Counter, parked: Gauge) -> Purgatory {
        Purgatory { watchers: Mutex::default(), wakeups, parked }
    }

    /// Starts watching `keys` (topic, partition) for one request; the watch
    /// ends when the returned `Watch` is dropped.
    pub fn watch<'a>(self: &Arc<Self>, keys: impl IntoIterator<Item = (&'a str, i32)>) -> Watch {
        let waiter = Arc::new(Waiter::default());
        let mut keys: Vec<(String, i32)> = keys.into_iter().map(|(t, p)| (t.to_string(), p)).collect();
        keys.sort();
        keys.dedup();
        {
            let mut w = self.watchers.lock();
            for (topic, partition) in &keys {
                w.entry(topic.clone())
                    .or_default()
                    .entry(*partition)
                    .or_default()
                    .push(Arc::downgrade(&waiter));
            }
        }
        self.parked.inc();
        Watch { waiter, keys, purgatory: self.clone() }
    }

    /// Wakes the requests watching `topic`-`partition`, oldest first.
    pub fn changed(&self, topic: &str, partition: i32) {
        let woken: Vec<Arc<Waiter>> = {
            let w = self.watchers.lock();
            match w.get(topic).and_then(|t| t.get(&partition)) {
                Some(list) => list.iter().filter_map(Weak::upgrade).collect(),
                None => return,
            }
        };
        self.wakeups.inc_by(woken.len() as u64);
        for waiter in woken {
            waiter.notify.notify_one();
        }
    }

    /// How many requests watch `topic`-`partition` now.
    pub fn watching(&self, topic: &str, partition: i32) -> usize {
        let w = self.watchers.lock();
        w.get(topic)
            .and_then(|t| t.get(&partition))
            .map_or(0, |l| l.iter().filter(|x| x.strong_count() > 0).count())
    }

    fn unwatch(&self, waiter: &Arc<Waiter>, keys: &[(String, i32)]) {
        let mut w = self.watchers.lock();
        for (topic, partition) in keys {
            let Some(t) = w.get_mut(topic.as_str()) else { continue };
            if let Some(list) = t.get_mut(partition) {
                list.retain(|x| !std::ptr::eq(x.as_ptr(), Arc::as_ptr(waiter)) && x.strong_count() > 0);
                if list.is_empty() {
                    t.remove(partition);
                }
            }
            if t.is_empty() {
                w.remove(topic.as_str());
            }
        }
    }
}

/// A request's watch on its partitions.
pub struct Watch {
    waiter: Arc<Waiter>,
    keys: Vec<(String, i32)>,
    purgatory: Arc<Purgatory>,
}

impl Watch {
    /// Until one of the watched partitions changed since the last call (or
    /// since the watch began).
    pub async fn changed(&self) {
        self.waiter.notify.notified().await
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.purgatory.unwatch(&self.waiter, &self.keys);
        self.purgatory.parked.dec();
    }
}

#[cfg(test)]
#[path = "purgatory_test.rs"]
mod tests;
