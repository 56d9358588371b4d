//! Kafka's producer design for an embedded log: `send` encodes the record into
//! an open RecordBatch per partition and returns at once; a sender thread
//! compresses ready batches, appends them, fsyncs them for `acks=all`, and
//! completes the batch's delivery cell, which every record of it shares.
//!
//! A batch is ready when it reaches `batch_size`, when it has waited `linger`,
//! or on `flush`. Memory held by unsent batches is bounded by `buffer_memory`:
//! past it, `send` reports `WouldBlock` and the caller waits for space.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use super::partitioner::{partition_for_key, StickyPartitioner};
use crate::clock::now_ms;
use crate::error::{Error, Result};
use crate::log::{AppendOrigin, PartitionLog};
use crate::record::HeaderRef;
use crate::record::{BatchBuilder, Compression, NewRecord};
use crate::store::{Store, Topic};

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
type TopicCache = HashMap<String, (Arc<str>, Arc<Topic>)>;
type Callback = Box<dyn FnOnce(&DeliveryResult) + Send>;

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
    fn set_result(&self, r: DeliveryResult) -> Vec<Callback> {
        let mut st = self.state.lock();
        *st = Some(r);
        // Taken under the state lock, so `on_complete` cannot slip one in between.
        let callbacks = std::mem::take(&mut *self.callbacks.lock());
        drop(st);
        self.done.notify_all();
        callbacks
    }
}

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

struct OpenBatch {
    builder: BatchBuilder,
    cell: Arc<DeliveryCell>,
    created: Instant,
}

struct ReadyBatch {
    log: Arc<PartitionLog>,
    builder: BatchBuilder,
    cell: Arc<DeliveryCell>,
    bytes: usize,
}

struct PartitionState {
    log: Arc<PartitionLog>,
    open: Option<OpenBatch>,
}

struct Accumulator {
    partitions: HashMap<(Arc<str>, i32), PartitionState>,
    ready: VecDeque<ReadyBatch>,
    in_flight: Vec<Arc<DeliveryCell>>,
    buffered: usize,
    sticky: StickyPartitioner,
    flush_now: bool,
    closing: bool,
    sender_idle: bool,
}

struct Shared {
    acc: Mutex<Accumulator>,
    /// Wakes the sender.
    work: Condvar,
    /// Wakes senders blocked on a full buffer.
    space: Condvar,
    config: ProducerConfig,
}

pub struct Producer {
    store: Arc<Store>,
    shared: Arc<Shared>,
    topics: RwLock<TopicCache>,
    sender: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl Shared {
    /// Moves an open batch to the ready queue.
    fn seal(&self, acc: &mut Accumulator, key: &(Arc<str>, i32)) {
        let Some(ps) = acc.partitions.get_mut(key) else { return };
        let Some(open) = ps.open.take() else { return };
        let log = ps.log.clone();
        let bytes = open.builder.size_in_bytes();
        acc.ready.push_back(ReadyBatch { log, builder: open.builder, cell: open.cell, bytes });
        acc.sticky.batch_done(&key.0, key.1);
    }
}

impl Producer {
    pub fn new(store: Arc<Store>, config: ProducerConfig) -> Result<Arc<Producer>> {
        if store.is_read_only() {
            return Err(Error::ReadOnly("a Producer"));
        }
        if config.batch_size == 0 {
            return Err(Error::InvalidConfig("batch_size must be at least 1".into()));
        }
        let seed = (now_ms() as u64) ^ u64::from(std::process::id()).rotate_left(32) | 1;
        let shared = Arc::new(Shared {
            acc: Mutex::new(Accumulator {
                partitions: HashMap::new(),
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
            store,
            shared,
            topics: RwLock::new(HashMap::new()),
            sender: Mutex::new(Some(handle)),
            closed: AtomicBool::new(false),
        }))
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.shared.config
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ClientClosed("producer"));
        }
        Ok(())
    }

    /// The topic (auto-created if the store allows), cached by name.
    pub fn topic(&self, name: &str) -> Result<(Arc<str>, Arc<Topic>)> {
        if let Some(t) = self.topics.read().get(name) {
            return Ok(t.clone());
        }
        if crate::log::is_internal_topic(name) {
            return Err(crate::log::internal_topic_error(name, "producing"));
        }
        let t = self.store.topic_or_create(name)?;
        let entry = (Arc::<str>::from(name), t);
        self.topics.write().insert(name.to_string(), entry.clone());
        Ok(entry)
    }

    fn choose_partition(
        &self,
        acc: &mut Accumulator,
        name: &Arc<str>,
        topic: &Topic,
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
        let max = t.config.max_message_bytes;
        if size + crate::record::batch::HEADER_LEN > max {
            return Err(Error::RecordTooLarge { size: size + crate::record::batch::HEADER_LEN, max });
        }
        if key.is_none() {
            t.partition(0)?.check_key(None)?;
        }
        let now = now_ms();
        let timestamp = match timestamp {
            Some(ts) => {
                check_send_timestamp(ts)?;
                t.partition(0)?.check_timestamp(ts, now)?;
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
                .is_some_and(|o| !o.builder.is_empty() && o.builder.size_in_bytes() + size > limit)
        };
        let p = match partition {
            Some(p) => {
                t.partition(p)?;
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
        if would_overflow(&acc, p) {
            self.shared.seal(&mut acc, &pkey);
        }
        let acc = &mut *acc;
        let ps = match acc.partitions.get_mut(&pkey) {
            Some(ps) => ps,
            None => {
                let log = t.partition(p)?.clone();
                acc.partitions.entry(pkey.clone()).or_insert(PartitionState { log, open: None })
            }
        };
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
            self.shared.seal(acc, &pkey);
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
    /// (no per-record future), which `BatchSink::finish` queues behind whatever
    /// `send` left open, so the order per partition is kept.
    pub fn batch_sink(&self, topic: &str) -> Result<BatchSink<'_>> {
        self.check_open()?;
        let (name, t) = self.topic(topic)?;
        let limit = self.shared.config.batch_size.max(64 * 1024).min(t.config.max_message_bytes).min(1 << 20);
        let n = t.partitions.len();
        let seed = (now_ms() as u64) ^ u64::from(std::process::id()).rotate_left(32);
        Ok(BatchSink {
            sticky: StickyPartitioner::new(seed),
            producer: self,
            name,
            topic: t,
            limit,
            open: (0..n).map(|_| None).collect(),
            done: Vec::new(),
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

/// See `Producer::batch_sink`.
pub struct BatchSink<'p> {
    producer: &'p Producer,
    name: Arc<str>,
    topic: Arc<Topic>,
    limit: usize,
    open: Vec<Option<BatchBuilder>>,
    done: Vec<(i32, BatchBuilder)>,
    sticky: StickyPartitioner,
    /// The last timestamp found good (a bulk send gives many records one).
    checked_timestamp: Option<i64>,
}

impl BatchSink<'_> {
    pub fn partitions(&self) -> i32 {
        self.open.len() as i32
    }

    /// Adds a record to `partition`, or, without one, to the partition Kafka's
    /// default partitioner picks (by key, else sticky).
    pub fn add(&mut self, partition: Option<i32>, rec: &NewRecord<'_>) -> Result<()> {
        let partition = match (partition, rec.key) {
            (Some(p), _) => p,
            (None, Some(k)) => partition_for_key(k, self.partitions()),
            (None, None) => self.sticky.partition(&self.name, self.partitions()),
        };
        let n = self.open.len() as i32;
        let Some(slot) = usize::try_from(partition).ok().and_then(|p| self.open.get_mut(p)) else {
            return Err(Error::UnknownPartition { topic: self.name.to_string(), partition, count: n });
        };
        if rec.key.is_none() {
            self.topic.partition(partition)?.check_key(None)?;
        }
        if self.checked_timestamp != Some(rec.timestamp) {
            check_send_timestamp(rec.timestamp)?;
            self.topic.partition(partition)?.check_timestamp(rec.timestamp, now_ms())?;
            self.checked_timestamp = Some(rec.timestamp);
        }
        let size = rec.value.map_or(0, <[u8]>::len)
            + rec.key.map_or(0, <[u8]>::len)
            + rec.headers.iter().map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len) + 10).sum::<usize>()
            + 21;
        let max = self.topic.config.max_message_bytes;
        if size + crate::record::batch::HEADER_LEN > max {
            return Err(Error::RecordTooLarge { size: size + crate::record::batch::HEADER_LEN, max });
        }
        let compression = self.producer.shared.config.compression;
        let limit = self.limit;
        if slot.as_ref().is_some_and(|b| !b.is_empty() && b.size_in_bytes() + size > limit) {
            if let Some(full) = slot.take() {
                self.done.push((partition, full));
                self.sticky.batch_done(&self.name, partition);
            }
        }
        slot.get_or_insert_with(|| BatchBuilder::with_capacity(compression, limit)).append(rec);
        Ok(())
    }

    /// Queues every batch and returns, per partition, its batches' delivery
    /// cells with their record counts.
    pub fn finish(mut self) -> Result<BatchCells> {
        for (p, b) in self.open.iter_mut().enumerate() {
            if let Some(b) = b.take().filter(|b| !b.is_empty()) {
                self.done.push((p as i32, b));
            }
        }
        let shared = &self.producer.shared;
        let mut result: BatchCells = Vec::new();
        {
            let mut acc = shared.acc.lock();
            if acc.closing {
                return Err(Error::ClientClosed("producer"));
            }
            for (p, builder) in self.done {
                let pkey = (self.name.clone(), p);
                if !acc.partitions.contains_key(&pkey) {
                    let log = self.topic.partition(p)?.clone();
                    acc.partitions.insert(pkey.clone(), PartitionState { log, open: None });
                }
                shared.seal(&mut acc, &pkey);
                let log = acc.partitions[&pkey].log.clone();
                let cell = Arc::new(DeliveryCell::default());
                let count = builder.len();
                let bytes = builder.size_in_bytes();
                acc.buffered += bytes;
                acc.ready.push_back(ReadyBatch { log, builder, cell: cell.clone(), bytes });
                match result.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, v)) => v.push((cell, count)),
                    None => result.push((p, vec![(cell, count)])),
                }
            }
            acc.sender_idle = false;
        }
        shared.work.notify_one();
        Ok(result)
    }
}

/// A producer's record has a timestamp >= 0 or none at all (Kafka's
/// `ProducerRecord` rule), whatever the topic's timestamp type.
fn check_send_timestamp(ts: i64) -> Result<()> {
    if ts < 0 {
        return Err(Error::InvalidTimestamp(format!(
            "timestamp {ts} is negative: give a time in ms since the epoch (>= 0), or None for now"
        )));
    }
    Ok(())
}

fn sender_loop(shared: &Shared) {
    let linger = shared.config.linger;
    loop {
        let batch: Vec<ReadyBatch> = {
            let mut acc = shared.acc.lock();
            loop {
                // Open batches past their linger time (all of them on flush/close).
                let now = Instant::now();
                let force = acc.flush_now || acc.closing;
                let expired: Vec<(Arc<str>, i32)> = acc
                    .partitions
                    .iter()
                    .filter(|(_, ps)| ps.open.as_ref().is_some_and(|o| force || now >= o.created + linger))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &expired {
                    shared.seal(&mut acc, k);
                }
                acc.flush_now = false;
                if !acc.ready.is_empty() {
                    break;
                }
                if acc.closing {
                    return;
                }
                let next = acc
                    .partitions
                    .values()
                    .filter_map(|ps| ps.open.as_ref())
                    .map(|o| o.created + linger)
                    .min();
                acc.sender_idle = true;
                match next {
                    Some(deadline) => {
                        shared.work.wait_until(&mut acc, deadline);
                    }
                    None => shared.work.wait(&mut acc),
                }
                acc.sender_idle = false;
            }
            let batch: Vec<ReadyBatch> = acc.ready.drain(..).collect();
            acc.in_flight.extend(batch.iter().map(|b| b.cell.clone()));
            batch
        };
        let mut done: Vec<(Arc<DeliveryCell>, DeliveryResult)> = Vec::with_capacity(batch.len());
        let mut durable: Vec<(Arc<PartitionLog>, i64, usize)> = Vec::new();
        let mut freed = 0;
        for b in batch {
            freed += b.bytes;
            let r = b.builder.build().and_then(|buf| b.log.append_as_leader(buf, AppendOrigin::Embedded));
            match r {
                Ok(info) => {
                    let idx = done.len();
                    done.push((
                        b.cell,
                        Ok(Delivered {
                            base_offset: info.base_offset,
                            log_append_time: info.log_append_time,
                        }),
                    ));
                    if shared.config.acks == Acks::Durable {
                        durable.push((b.log, info.last_offset + 1, idx));
                    }
                }
                Err(e) => done.push((b.cell, Err(Arc::new(e)))),
            }
        }
        // One fsync per partition covers every batch appended to it above.
        let mut synced: Vec<(*const PartitionLog, std::result::Result<(), Arc<Error>>)> = Vec::new();
        for (log, end, idx) in durable.iter().rev() {
            let key = Arc::as_ptr(log);
            let r = match synced.iter().find(|(k, _)| *k == key) {
                Some((_, r)) => r.clone(),
                None => {
                    let r = log.wait_durable(*end).map_err(Arc::new);
                    synced.push((key, r.clone()));
                    r
                }
            };
            if let Err(e) = r {
                done[*idx].1 = Err(e);
            }
        }
        // Every result is set before any callback runs: a callback may wait for
        // the GIL, held by a thread that is waiting for one of these results.
        let callbacks: Vec<(Vec<Callback>, DeliveryResult)> =
            done.iter().map(|(cell, r)| (cell.set_result(r.clone()), r.clone())).collect();
        let mut acc = shared.acc.lock();
        acc.buffered = acc.buffered.saturating_sub(freed);
        acc.in_flight.retain(|c| c.result().is_none());
        drop(acc);
        shared.space.notify_all();
        for (fs, r) in callbacks {
            for f in fs {
                f(&r);
            }
        }
    }
}
