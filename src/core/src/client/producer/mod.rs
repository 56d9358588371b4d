//! Kafka's producer design for an embedded log: `send` encodes the record into
//! an open RecordBatch per partition and returns at once; a sender thread
//! compresses ready batches, appends them, fsyncs them for `acks=all`, and
//! completes the batch's delivery cell, which every record of it shares.
//!
//! A batch is ready when it reaches `batch_size`, when it has waited `linger`,
//! or on `flush`. Memory held by unsent batches is bounded by `buffer_memory`:
//! past it, `send` reports `WouldBlock` and the caller waits for space.

mod accumulator;
mod delivery;
mod destination;
mod sender;
mod sink;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::partitioner::{partition_for_key, StickyPartitioner};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::record::HeaderRef;
use crate::record::{BatchBuilder, Compression, NewRecord};
use crate::store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// 0 and 1: acknowledged once in the log (the OS page cache).
    Written,
    /// "all": acknowledged once fdatasynced; concurrent batches share fsyncs.
    Durable,
}

impl Acks {
    /// Kafka's `acks` setting: 0 and 1 wait for the write, "all" (or -1) for fsync.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "0" | "1" => Ok(Acks::Written),
            "all" | "-1" => Ok(Acks::Durable),
            other => Err(Error::InvalidArgument(format!("acks must be 0, 1 or \"all\"; got {other:?}"))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub batch_size: usize,
    pub linger: Duration,
    pub compression: Compression,
    pub acks: Acks,
    pub buffer_memory: usize,
    pub max_block: Duration,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            batch_size: 16 * 1024,
            linger: Duration::from_millis(5),
            compression: Compression::None,
            acks: Acks::Written,
            buffer_memory: 32 << 20,
            max_block: Duration::from_secs(60),
        }
    }
}

use accumulator::{Accumulator, FastMap, OpenBatch, PartitionState, Shared};
pub use delivery::{BatchCells, Delivered, DeliveryCell, DeliveryResult};
pub use destination::{Appended, Destination, PartitionTarget, StoreDestination, TopicTarget};
use sender::sender_loop;
pub use sink::BatchSink;

type TopicCache = FastMap<String, (Arc<str>, Arc<TopicTarget>)>;

/// What `send` hands back for one record.
#[derive(Clone)]
pub struct Sent {
    pub cell: Arc<DeliveryCell>,
    pub topic: Arc<str>,
    pub partition: i32,
    pub index: i32,
    pub timestamp: i64,
}

pub enum SendOutcome {
    Sent(Sent),
    /// `buffer_memory` is full: call `wait_for_space` with this many bytes and
    /// send again.
    WouldBlock(usize),
}

pub struct Producer {
    destination: Arc<dyn Destination>,
    shared: Arc<Shared>,
    topics: RwLock<TopicCache>,
    sender: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl Producer {
    /// A producer appending to a store open (for writing) in this process.
    pub fn new(store: Arc<Store>, config: ProducerConfig) -> Result<Arc<Producer>> {
        if store.is_read_only() {
            return Err(Error::ReadOnly("a Producer"));
        }
        Producer::to(Arc::new(StoreDestination(store)), config)
    }

    /// A producer appending to `destination`.
    pub fn to(destination: Arc<dyn Destination>, config: ProducerConfig) -> Result<Arc<Producer>> {
        if config.batch_size == 0 {
            return Err(Error::InvalidConfig("batch_size must be at least 1".into()));
        }
        let seed = (now_ms() as u64) ^ u64::from(std::process::id()).rotate_left(32) | 1;
        let shared = Arc::new(Shared {
            acc: Mutex::new(Accumulator {
                partitions: FastMap::default(),
                ready: VecDeque::new(),
                in_flight: Vec::new(),
                buffered: 0,
                sticky: StickyPartitioner::new(seed),
                flush_now: false,
                closing: false,
                sender_idle: false,
            }),
            work: Condvar::new(),
            space: Condvar::new(),
            config,
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("seglog-producer".into())
            .spawn(move || sender_loop(&s))
            .map_err(Error::Io)?;
        Ok(Arc::new(Producer {
            destination,
            shared,
            topics: RwLock::new(FastMap::default()),
            sender: Mutex::new(Some(handle)),
            closed: AtomicBool::new(false),
        }))
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.shared.config
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ClientClosed("producer"));
        }
        Ok(())
    }

    /// Whether the topic was looked up already (`topic` answers at once).
    pub fn knows_topic(&self, name: &str) -> bool {
        self.topics.read().contains_key(name)
    }

    /// The topic (auto-created where allowed), cached by name.
    pub fn topic(&self, name: &str) -> Result<(Arc<str>, Arc<TopicTarget>)> {
        if let Some(t) = self.topics.read().get(name) {
            return Ok(t.clone());
        }
        if crate::log::is_internal_topic(name) {
            return Err(crate::log::internal_topic_error(name, "producing"));
        }
        let t = Arc::new(self.destination.topic(name)?);
        let entry = (Arc::<str>::from(name), t);
        self.topics.write().insert(name.to_string(), entry.clone());
        Ok(entry)
    }

    fn choose_partition(
        &self,
        acc: &mut Accumulator,
        name: &Arc<str>,
        topic: &TopicTarget,
        key: Option<&[u8]>,
    ) -> i32 {
        let n = topic.partitions.len() as i32;
        if let Some(k) = key {
            return partition_for_key(k, n);
        }
        acc.sticky.partition(name, n)
    }

    /// Adds one record to its partition's open batch. Never blocks: with the
    /// buffer full it returns `WouldBlock`.
    pub fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[HeaderRef<'_>],
        timestamp: Option<i64>,
    ) -> Result<SendOutcome> {
        self.check_open()?;
        let (name, t) = self.topic(topic)?;
        let config = &self.shared.config;
        let size = key.map_or(0, <[u8]>::len)
            + value.map_or(0, <[u8]>::len)
            + headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 10).sum::<usize>()
            + 21;
        let max = t.max_message_bytes;
        if size + crate::record::batch::HEADER_LEN > max {
            return Err(Error::RecordTooLarge { size: size + crate::record::batch::HEADER_LEN, max });
        }
        if key.is_none() {
            t.partition(topic, 0)?.check_key(None)?;
        }
        let now = now_ms();
        let timestamp = match timestamp {
            Some(ts) => {
                check_send_timestamp(ts)?;
                t.partition(topic, 0)?.check_timestamp(ts, now)?;
                ts
            }
            None => now,
        };
        let mut acc = self.shared.acc.lock();
        if acc.closing {
            // close() ran since the check above: no sender is left for this record.
            return Err(Error::ClientClosed("producer"));
        }
        if acc.buffered + size > config.buffer_memory && acc.buffered > 0 {
            return Ok(SendOutcome::WouldBlock(size));
        }
        let limit = config.batch_size.min(max);
        let would_overflow = |acc: &Accumulator, p: i32| {
            acc.partitions
                .get(&(name.clone(), p))
                .and_then(|ps| ps.open.as_ref())
                .is_some_and(|o| o.would_overflow(size, limit))
        };
        let p = match partition {
            Some(p) => {
                t.partition(topic, p)?;
                p
            }
            None => {
                let p = self.choose_partition(&mut acc, &name, &t, key);
                if key.is_none() && would_overflow(&acc, p) {
                    // The sticky partition's batch is full: seal it and move on
                    // first, so that each batch is a run of consecutive sends.
                    self.shared.seal(&mut acc, &(name.clone(), p));
                    self.choose_partition(&mut acc, &name, &t, None)
                } else {
                    p
                }
            }
        };
        let pkey = (name.clone(), p);
        let acc = &mut *acc;
        let ps = match acc.partitions.get_mut(&pkey) {
            Some(ps) => ps,
            None => {
                let log = t.partition(topic, p)?.clone();
                acc.partitions.entry(pkey.clone()).or_insert(PartitionState { log, open: None })
            }
        };
        // A record that would take the open batch past the limit starts the next.
        if ps.open.as_ref().is_some_and(|o| o.would_overflow(size, limit)) {
            ps.seal_into(&pkey, &mut acc.ready, &mut acc.sticky);
        }
        let open = ps.open.get_or_insert_with(|| OpenBatch {
            builder: BatchBuilder::with_capacity(config.compression, limit.min(1 << 20)),
            cell: Arc::new(DeliveryCell::default()),
            created: Instant::now(),
        });
        let index = open.builder.len();
        // Buffered bytes are the builders' own sizes, header included, so that
        // what the sender frees matches exactly what was counted here.
        let before = if index == 0 { 0 } else { open.builder.size_in_bytes() };
        open.builder.append(&NewRecord { timestamp, key, value, headers });
        let cell = open.cell.clone();
        let now_full = open.builder.size_in_bytes() >= limit;
        acc.buffered += open.builder.size_in_bytes() - before;
        if now_full {
            ps.seal_into(&pkey, &mut acc.ready, &mut acc.sticky);
        }
        if acc.sender_idle && (now_full || config.linger.is_zero() || !acc.ready.is_empty()) {
            acc.sender_idle = false;
            self.shared.work.notify_one();
        } else if acc.sender_idle && index == 0 {
            // A new batch starts its linger clock: let the sender know when to wake.
            acc.sender_idle = false;
            self.shared.work.notify_one();
        }
        Ok(SendOutcome::Sent(Sent { cell, topic: name, partition: p, index, timestamp }))
    }

    /// Starts a bulk append to `topic`: records go straight into whole batches
    /// (no per-record future), each queued when full (and the rest by
    /// `BatchSink::finish`) behind whatever `send` left open, so the order per
    /// partition is kept.
    pub fn batch_sink(&self, topic: &str) -> Result<BatchSink<'_>> {
        self.check_open()?;
        let (name, t) = self.topic(topic)?;
        let limit = self.shared.config.batch_size.max(64 * 1024).min(t.max_message_bytes).min(1 << 20);
        let n = t.partitions.len();
        let seed = (now_ms() as u64) ^ u64::from(std::process::id()).rotate_left(32);
        Ok(BatchSink {
            sticky: StickyPartitioner::new(seed),
            producer: self,
            name,
            topic: t,
            limit,
            open: (0..n).map(|_| None).collect(),
            cells: Vec::new(),
            checked_timestamp: None,
        })
    }

    /// Waits (up to `max_block`) until the buffer has room for `needed` more
    /// bytes, sending lingering batches at once to make that room.
    pub fn wait_for_space(&self, needed: usize) -> Result<()> {
        let deadline = Instant::now() + self.shared.config.max_block;
        let mut acc = self.shared.acc.lock();
        while acc.buffered > 0 && acc.buffered + needed > self.shared.config.buffer_memory {
            acc.flush_now = true;
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::ClientClosed("producer"));
            }
            acc.sender_idle = false;
            self.shared.work.notify_one();
            if self.shared.space.wait_until(&mut acc, deadline).timed_out() {
                return Err(Error::Timeout(
                    self.shared.config.max_block.as_millis() as u64,
                    "the producer's buffer_memory stayed full".into(),
                ));
            }
        }
        Ok(())
    }

    fn on_sender_thread(&self) -> bool {
        self.sender.lock().as_ref().is_some_and(|h| h.thread().id() == std::thread::current().id())
    }

    /// Sends every open batch now and waits until all records sent before this
    /// call are delivered (or failed).
    pub fn flush(&self, timeout: Option<Duration>) -> Result<()> {
        if self.on_sender_thread() {
            // Only this thread sends: waiting here would wait for ourselves.
            return Err(Error::InvalidArgument(
                "flush() and close() cannot be called from a delivery callback".into(),
            ));
        }
        let cells: Vec<Arc<DeliveryCell>> = {
            let mut acc = self.shared.acc.lock();
            let keys: Vec<(Arc<str>, i32)> = acc.partitions.keys().cloned().collect();
            for k in &keys {
                self.shared.seal(&mut acc, k);
            }
            acc.flush_now = true;
            acc.sender_idle = false;
            let mut cells: Vec<_> = acc.ready.iter().map(|b| b.cell.clone()).collect();
            cells.extend(acc.in_flight.iter().cloned());
            cells
        };
        self.shared.work.notify_one();
        let deadline = timeout.map(|t| Instant::now() + t);
        for c in cells {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if c.wait(left).is_none() {
                return Err(Error::Timeout(
                    timeout.map_or(0, |t| t.as_millis() as u64),
                    "flush did not finish".into(),
                ));
            }
        }
        Ok(())
    }

    /// Flushes, then stops the sender thread (waiting for it to end if `join`).
    /// Later sends fail.
    pub fn close(&self, timeout: Option<Duration>, join: bool) -> Result<()> {
        if self.on_sender_thread() {
            return Err(Error::InvalidArgument(
                "flush() and close() cannot be called from a delivery callback".into(),
            ));
        }
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let flushed = self.flush(timeout);
        self.shared.acc.lock().closing = true;
        self.shared.work.notify_all();
        self.shared.space.notify_all();
        let handle = self.sender.lock().take();
        if let (true, Some(h)) = (join, handle) {
            let _ = h.join();
        }
        flushed
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    pub fn ensure_open(&self) -> Result<()> {
        self.check_open()
    }
}

impl Drop for Producer {
    /// Delivers what is pending but does not join the sender: a destructor may
    /// run where the sender cannot finish (holding a lock its callbacks need).
    fn drop(&mut self) {
        let _ = self.close(Some(Duration::from_secs(30)), false);
    }
}

/// A producer's record has a timestamp >= 0 or none at all (Kafka's
/// `ProducerRecord` rule), whatever the topic's timestamp type.
pub(super) fn check_send_timestamp(ts: i64) -> Result<()> {
    if ts < 0 {
        return Err(Error::InvalidTimestamp(format!(
            "timestamp {ts} is negative: give a time in ms since the epoch (>= 0), or None for now"
        )));
    }
    Ok(())
}
