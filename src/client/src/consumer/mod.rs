//! The consumer engine behind `seglog.Consumer`: subscription and assignment,
//! positions and their resets, fetching and the records fetched but not yet
//! handed out, commits and auto-commit, as Kafka's consumer keeps them. It
//! reads through a [`Source`] (a store in this process or a cluster) and
//! commits through a [`Membership`]; the records it hands out are of the
//! caller's type `R`, made by a [`Decode`] from the batches read (Python
//! objects, for the bindings), so a poll's bookkeeping is Rust's whatever
//! the caller.
//!
//! Like Kafka's, a consumer is used by one thread at a time.

pub mod chunk;
pub mod membership;
pub mod source;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use seglog_core::client::columns::Columns;
use seglog_core::client::consumer_read::DecodedBatch;
use seglog_core::error::{Error, Result};
use seglog_core::group::CommittedOffsets;
use seglog_core::log::is_internal_topic;

pub use chunk::{Chunk, Record};
pub use membership::Membership;
pub use source::{BrokerSource, Source, StoreSource, TopicPartition, Want};

/// What a read of a few records copies per record wanted (when that is below
/// `max_partition_fetch_bytes`): a generous guess at a record's size, so that
/// a poll of small records still gets about as many as it asked for.
const BYTES_PER_POLLED_RECORD: u64 = 1024;
/// A poll for at most this many records reads only about their worth of log
/// (a seek and a lookup), leaving the rest of what it read unparsed.
const FEW_RECORDS: usize = 16;
/// How long one wait lasts at most while nothing is assigned (a group member
/// gets its partitions in a later poll).
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// `auto.offset.reset`: where a partition without a committed offset starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// NoOffsetForPartition.
    None,
}

impl OffsetReset {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "earliest" => Ok(OffsetReset::Earliest),
            "latest" => Ok(OffsetReset::Latest),
            "none" => Ok(OffsetReset::None),
            other => Err(Error::InvalidArgument(format!(
                "auto_offset_reset must be earliest, latest or none; got {other:?}"
            ))),
        }
    }
}

/// The consumer's settings, in Kafka's consumer keys.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub auto_offset_reset: OffsetReset,
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    /// `max.partition.fetch.bytes`.
    pub max_partition_fetch_bytes: u64,
    /// How often a subscription looks for new topics and partitions.
    pub metadata_max_age: Duration,
    /// `fetch.max.wait.ms`: the longest one wait for data lasts.
    pub fetch_max_wait: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            auto_offset_reset: OffsetReset::Latest,
            enable_auto_commit: true,
            auto_commit_interval: Duration::from_secs(5),
            max_partition_fetch_bytes: 1 << 20,
            metadata_max_age: Duration::from_secs(1),
            fetch_max_wait: Duration::from_millis(500),
        }
    }
}

/// Turns the batches of a read into the caller's records: those at or after
/// `from`, at most `limit`.
pub trait Decode<R> {
    fn decode(
        &mut self,
        tp: &TopicPartition,
        batches: &[DecodedBatch],
        from: i64,
        limit: usize,
    ) -> Result<Vec<R>>;
}

/// A partition's records fetched but not handed out yet.
enum Pending<R> {
    /// As read, decoded when a poll takes from them (Kafka's completed fetch).
    Raw { batches: Vec<DecodedBatch>, from: i64, limit: usize },
    /// Decoded; the chunk's cursor moves as they are handed out.
    Ready(Arc<Chunk<R>>),
}

/// Records a poll hands out: which of a partition's chunk's records.
pub type Taken<R> = (TopicPartition, Arc<Chunk<R>>, std::ops::Range<usize>);

/// What a subscription asks for.
struct Subscription {
    names: BTreeSet<String>,
    pattern: Option<regex::Regex>,
}

pub struct Consumer<R> {
    source: Box<dyn Source>,
    membership: Option<Membership>,
    config: ConsumerConfig,
    subscription: Option<Subscription>,
    manual: bool,
    assignment: Vec<TopicPartition>,
    positions: HashMap<TopicPartition, i64>,
    pending: HashMap<TopicPartition, Pending<R>>,
    committed: CommittedOffsets,
    metadata_checked: Option<Instant>,
    last_commit: Instant,
    /// Where the next poll starts, so that no partition starves the others.
    next_partition: usize,
    closed: bool,
}

fn tp_name(tp: &TopicPartition) -> String {
    format!("{}-{}", tp.0, tp.1)
}

impl<R: Record> Consumer<R> {
    /// A consumer of `source`; with a membership, its group's committed
    /// offsets are loaded now.
    pub fn new(
        source: Box<dyn Source>,
        membership: Option<Membership>,
        config: ConsumerConfig,
    ) -> Result<Self> {
        let committed = match &membership {
            Some(m) => m.committed(None)?,
            None => CommittedOffsets::new(),
        };
        Ok(Consumer {
            source,
            membership,
            config,
            subscription: None,
            manual: false,
            assignment: Vec::new(),
            positions: HashMap::new(),
            pending: HashMap::new(),
            committed,
            metadata_checked: None,
            last_commit: Instant::now(),
            next_partition: 0,
            closed: false,
        })
    }

    pub fn source(&self) -> &dyn Source {
        &*self.source
    }

    pub fn membership(&self) -> Option<&Membership> {
        self.membership.as_ref()
    }

    fn check(&self) -> Result<()> {
        if self.closed {
            return Err(Error::ClientClosed("consumer"));
        }
        Ok(())
    }

    /// The topics there are, internal ones included (as Kafka's
    /// `listTopics`), sorted.
    pub fn topics(&self) -> Result<Vec<String>> {
        self.check()?;
        let mut topics = self.source.topics()?;
        topics.sort();
        Ok(topics)
    }

    /// How many partitions `topic` has; None if there is no such topic.
    pub fn partition_count(&self, topic: &str) -> Result<Option<i32>> {
        self.check()?;
        match self.source.partition_count(topic) {
            Ok(n) => Ok(Some(n)),
            Err(Error::UnknownTopic(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    // -- subscription and assignment ---------------------------------------

    /// Subscribes to topics by name, or to every topic (internal ones aside)
    /// whose whole name matches `pattern` (a regular expression, as Kafka's
    /// consumer protocol takes RE2/J's).
    pub fn subscribe(&mut self, names: &[String], pattern: Option<&str>) -> Result<()> {
        self.check()?;
        if self.manual {
            return Err(Error::IllegalState("subscribe() after assign(): use one or the other".into()));
        }
        if pattern.is_none() && names.is_empty() {
            return Err(Error::InvalidArgument("subscribe() needs topics or a pattern".into()));
        }
        let pattern = pattern
            .map(|p| regex::Regex::new(&format!("^(?:{p})$")))
            .transpose()
            .map_err(|e| Error::InvalidArgument(format!("invalid subscription pattern: {e}")))?;
        self.subscription = Some(Subscription { names: names.iter().cloned().collect(), pattern });
        self.refresh_assignment(true, false)
    }

    /// The topics subscribed by name (None without a subscription).
    pub fn subscription(&self) -> Option<Vec<String>> {
        self.subscription.as_ref().map(|s| s.names.iter().cloned().collect())
    }

    /// Drops the subscription or the manual assignment.
    pub fn unsubscribe(&mut self) -> Result<()> {
        self.check()?;
        self.subscription = None;
        self.manual = false;
        self.set_assignment(Vec::new());
        Ok(())
    }

    /// Consumes exactly these partitions (no group membership changes).
    pub fn assign(&mut self, partitions: Vec<TopicPartition>) -> Result<()> {
        self.check()?;
        if self.subscription.is_some() {
            return Err(Error::IllegalState("assign() after subscribe(): use one or the other".into()));
        }
        for (topic, partition) in &partitions {
            let count = self.source.partition_count(topic)?;
            if !(0..count).contains(partition) {
                return Err(Error::UnknownPartition { topic: topic.clone(), partition: *partition, count });
            }
        }
        self.manual = true;
        self.set_assignment(partitions);
        Ok(())
    }

    /// The partitions assigned. A member of a group through a broker gets
    /// them when it joins, in a poll (as in Kafka): none until then.
    pub fn assignment(&mut self) -> Result<&[TopicPartition]> {
        self.check()?;
        self.refresh_assignment(false, false)?;
        Ok(&self.assignment)
    }

    fn set_assignment(&mut self, partitions: Vec<TopicPartition>) {
        let mut seen = BTreeSet::new();
        self.assignment = partitions.into_iter().filter(|tp| seen.insert(tp.clone())).collect();
        let assigned: BTreeSet<&TopicPartition> = self.assignment.iter().collect();
        self.positions.retain(|tp, _| assigned.contains(tp));
        self.pending.retain(|tp, p| {
            let keep = assigned.contains(tp);
            if let (false, Pending::Ready(chunk)) = (keep, p) {
                chunk.clear();
            }
            keep
        });
    }

    fn assigned(&self, tp: &TopicPartition) -> Result<()> {
        if self.assignment.contains(tp) {
            return Ok(());
        }
        Err(Error::IllegalState(format!("{} is not assigned to this consumer", tp_name(tp))))
    }

    fn refresh_assignment(&mut self, force: bool, join: bool) -> Result<()> {
        if self.subscription.is_none() {
            return Ok(());
        }
        let stale = self.metadata_checked.is_none_or(|t| t.elapsed() >= self.config.metadata_max_age);
        if force || stale {
            self.metadata_checked = Some(Instant::now());
            let wanted = self.wanted_topics()?;
            match self.membership.as_ref().and_then(Membership::coordinated) {
                // The subscription goes to the coordinator as names (a pattern
                // is matched here, as Kafka's consumers do); a change rejoins.
                Some(member) => {
                    let mut names: BTreeSet<String> = wanted.into_iter().collect();
                    names.extend(self.subscription.iter().flat_map(|s| s.names.iter().cloned()));
                    member.subscribe(&names.into_iter().collect::<Vec<_>>());
                }
                None => {
                    let mut tps = Vec::new();
                    for topic in wanted {
                        let count = self.source.partition_count(&topic)?;
                        tps.extend((0..count).map(|p| (topic.clone(), p)));
                    }
                    if tps != self.assignment {
                        self.set_assignment(tps);
                    }
                }
            }
        }
        if join && self.membership.as_ref().is_some_and(|m| m.coordinated().is_some()) {
            self.follow_group()?;
        }
        Ok(())
    }

    /// The existing topics the subscription names or matches.
    fn wanted_topics(&self) -> Result<Vec<String>> {
        let Some(sub) = &self.subscription else { return Ok(Vec::new()) };
        let mut topics = self.source.topics()?;
        topics.sort();
        Ok(topics
            .into_iter()
            .filter(|t| {
                sub.names.contains(t)
                    || (!is_internal_topic(t) && sub.pattern.as_ref().is_some_and(|p| p.is_match(t)))
            })
            .collect())
    }

    /// Rejoins when the group rebalances (committing first with auto-commit,
    /// as Kafka's consumers do), and takes the assignment.
    fn follow_group(&mut self) -> Result<()> {
        let Some(member) = self.membership.as_ref().and_then(Membership::coordinated) else { return Ok(()) };
        if member.needs_rejoin() && self.config.enable_auto_commit && member.generation() >= 0 {
            match self.commit(None) {
                // The group moved on already: the new owner starts from the last commit.
                Err(Error::CommitFailed { .. }) | Ok(()) => {}
                Err(e) => return Err(e),
            }
        }
        let Some(membership) = &self.membership else { return Ok(()) };
        let Some(assignment) = membership.poll_assignment()? else { return Ok(()) };
        if !assignment.changed {
            return Ok(());
        }
        let new: Vec<TopicPartition> =
            assignment.partitions.iter().filter(|tp| !self.assignment.contains(tp)).cloned().collect();
        if !new.is_empty() {
            // Another member may have committed them since this one last had them.
            let fresh = membership.committed(Some(&new))?;
            for tp in &new {
                match fresh.get(tp) {
                    Some(c) => self.committed.insert(tp.clone(), c.clone()),
                    None => self.committed.remove(tp),
                };
            }
        }
        self.set_assignment(assignment.partitions);
        Ok(())
    }

    // -- positions ----------------------------------------------------------

    fn reset(&self, tp: &TopicPartition, strategy: OffsetReset) -> Result<i64> {
        let (start, end) = self.source.offsets(tp)?;
        match strategy {
            OffsetReset::Earliest => Ok(start),
            OffsetReset::Latest => Ok(end),
            OffsetReset::None => Err(Error::NoOffsetForPartition(format!(
                "no committed offset for {} and auto_offset_reset='none'",
                tp_name(tp)
            ))),
        }
    }

    /// The position past what was fetched: the committed offset, or a reset,
    /// when the partition has none yet.
    fn fetch_position(&mut self, tp: &TopicPartition) -> Result<i64> {
        if let Some(&pos) = self.positions.get(tp) {
            return Ok(pos);
        }
        let pos = match self.committed.get(tp) {
            Some((offset, _)) => *offset,
            None => self.reset(tp, self.config.auto_offset_reset)?,
        };
        self.positions.insert(tp.clone(), pos);
        Ok(pos)
    }

    /// The offset of the next record this consumer will return.
    pub fn position(&mut self, tp: &TopicPartition) -> Result<i64> {
        self.check()?;
        self.assigned(tp)?;
        match self.pending.get(tp) {
            Some(Pending::Raw { from, .. }) => Ok(*from),
            Some(Pending::Ready(chunk)) => match chunk.position() {
                Some(pos) => Ok(pos),
                None => self.fetch_position(tp),
            },
            None => self.fetch_position(tp),
        }
    }

    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<()> {
        self.check()?;
        if self.subscription.is_some() {
            self.refresh_assignment(false, false)?;
        }
        self.assigned(tp)?;
        if offset < 0 {
            return Err(Error::InvalidArgument(format!("offset must be >= 0, got {offset}")));
        }
        self.drop_pending(tp);
        self.positions.insert(tp.clone(), offset);
        Ok(())
    }

    /// Seeks `partitions` (every assigned one, if empty) to their log start
    /// (Earliest) or end (Latest).
    pub fn seek_to(&mut self, partitions: &[TopicPartition], to: OffsetReset) -> Result<()> {
        self.check()?;
        let tps = if partitions.is_empty() { self.assignment()?.to_vec() } else { partitions.to_vec() };
        for tp in &tps {
            let offset = self.reset(tp, to)?;
            self.seek(tp, offset)?;
        }
        Ok(())
    }

    /// (log start offset, high watermark) of each partition.
    pub fn offsets(&self, partitions: &[TopicPartition]) -> Result<Vec<(i64, i64)>> {
        self.check()?;
        partitions.iter().map(|tp| self.source.offsets(tp)).collect()
    }

    /// The first (offset, timestamp) at or after each time, or None.
    pub fn offsets_for_times(&self, times: &[(TopicPartition, i64)]) -> Result<Vec<Option<(i64, i64)>>> {
        self.check()?;
        times.iter().map(|(tp, ts)| self.source.offset_for_time(tp, *ts)).collect()
    }

    // -- fetching -----------------------------------------------------------

    fn drop_pending(&mut self, tp: &TopicPartition) {
        if let Some(Pending::Ready(chunk)) = self.pending.remove(tp) {
            // An iterator handing them out stops too.
            chunk.clear();
        }
    }

    /// The assigned partitions in turn, starting where the last poll left off.
    fn in_turn(&self) -> impl Iterator<Item = usize> + '_ {
        let n = self.assignment.len();
        (0..n).map(move |k| (self.next_partition + k) % n)
    }

    /// Reads the assigned partitions that have nothing pending (their
    /// answers kept raw until taken), waiting up to `wait` for data. `limit`
    /// is the records the caller wants (None: as many as a fetch holds).
    fn fill(&mut self, limit: Option<usize>, wait: Duration) -> Result<()> {
        let mut fetch = self.config.max_partition_fetch_bytes;
        let mut few = usize::MAX;
        if let Some(limit) = limit {
            // A poll for a few records (a seek and a lookup) reads about their
            // worth of log, not a whole fetch: copying 1 MiB out of the page
            // cache to hand out one record would be most of such a poll. Always
            // at least one batch, as with any fetch size.
            fetch = fetch.min((limit as u64).saturating_mul(BYTES_PER_POLLED_RECORD));
            if limit <= FEW_RECORDS {
                few = limit;
            }
        }
        let order: Vec<usize> = self.in_turn().collect();
        let mut wants = Vec::new();
        for i in order {
            let tp = self.assignment[i].clone();
            if self.pending.contains_key(&tp) {
                continue;
            }
            let offset = self.fetch_position(&tp)?;
            wants.push(Want { tp, offset, max_bytes: fetch, max_records: few });
        }
        if wants.is_empty() {
            if !wait.is_zero() && self.pending.is_empty() {
                std::thread::sleep(wait.min(IDLE_WAIT));
            }
            return Ok(());
        }
        let budget = limit.unwrap_or(1);
        for (want, read) in wants.iter().zip(self.source.read(&wants, budget, wait)) {
            match read {
                None => {}
                Some(Ok(batches)) => {
                    if let Some(last) = batches.last() {
                        let next = last.next_offset();
                        if batches.iter().any(|b| b.has_records_from(want.offset)) {
                            self.pending.insert(
                                want.tp.clone(),
                                Pending::Raw { batches, from: want.offset, limit: few },
                            );
                        } else if next > want.offset {
                            // Batches a cleaning emptied: step past them.
                            self.positions.insert(want.tp.clone(), next);
                        }
                    }
                }
                Some(Err(Error::OffsetOutOfRange { .. }))
                    if self.config.auto_offset_reset != OffsetReset::None =>
                {
                    // As Kafka's: a position gone (e.g. deleted by retention) is reset.
                    let reset = self.reset(&want.tp, self.config.auto_offset_reset)?;
                    self.positions.insert(want.tp.clone(), reset);
                }
                Some(Err(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// The partition's chunk of decoded records, decoding what was read
    /// (None when nothing is pending).
    fn ready(&mut self, tp: &TopicPartition, decode: &mut dyn Decode<R>) -> Result<Option<Arc<Chunk<R>>>> {
        let chunk = match self.pending.remove(tp) {
            None => return Ok(None),
            Some(Pending::Ready(chunk)) => chunk,
            Some(Pending::Raw { batches, from, limit }) => {
                let records = decode.decode(tp, &batches, from, limit)?;
                let next = match records.last() {
                    Some(last) if records.len() >= limit => last.offset() + 1,
                    _ => batches.last().map_or(from, |b| b.next_offset().max(from)),
                };
                self.positions.insert(tp.clone(), next);
                Arc::new(Chunk::new(records))
            }
        };
        if chunk.is_empty() {
            return Ok(None);
        }
        self.pending.insert(tp.clone(), Pending::Ready(chunk.clone()));
        Ok(Some(chunk))
    }

    /// Up to `limit` records from what is pending, partitions in turn.
    fn take_pending(&mut self, limit: usize, decode: &mut dyn Decode<R>) -> Result<Vec<Taken<R>>> {
        let mut out = Vec::new();
        let mut left = limit;
        let order: Vec<usize> = self.in_turn().collect();
        for i in order {
            if left == 0 {
                break;
            }
            let tp = self.assignment[i].clone();
            if let Some(chunk) = self.ready(&tp, decode)? {
                let range = chunk.take(left);
                left -= range.len();
                if chunk.is_empty() {
                    self.pending.remove(&tp);
                }
                out.push((tp, chunk, range));
            }
        }
        Ok(out)
    }

    /// Records from the assigned partitions, at most `limit`: the chunks they
    /// are in and which of each chunk's records. With nothing to return,
    /// waits up to `timeout` for data to land.
    pub fn poll(
        &mut self,
        limit: usize,
        timeout: Duration,
        decode: &mut dyn Decode<R>,
    ) -> Result<Vec<Taken<R>>> {
        self.check()?;
        if limit == 0 {
            return Err(Error::InvalidArgument("max_records must be positive".into()));
        }
        self.maybe_auto_commit()?;
        let deadline = Instant::now() + timeout;
        let mut wait = Duration::ZERO;
        loop {
            self.refresh_assignment(false, true)?;
            let mut out = self.take_pending(limit, decode)?;
            let got: usize = out.iter().map(|(_, _, r)| r.len()).sum();
            if got < limit {
                self.fill(Some(limit - got), wait)?;
                out.extend(self.take_pending(limit - got, decode)?);
            }
            if !self.assignment.is_empty() {
                self.next_partition = (self.next_partition + 1) % self.assignment.len();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !out.is_empty() || left.is_zero() {
                return Ok(out);
            }
            wait = left.min(self.config.fetch_max_wait);
        }
    }

    /// The next partition's chunk to hand out record by record (in turn),
    /// waiting up to `timeout` for one; None when it passes.
    pub fn next_chunk(
        &mut self,
        timeout: Duration,
        decode: &mut dyn Decode<R>,
    ) -> Result<Option<Arc<Chunk<R>>>> {
        self.check()?;
        self.maybe_auto_commit()?;
        self.refresh_assignment(false, true)?;
        // Every assigned partition gets its position now (as Kafka's poll
        // sets them all), so that a commit after an early stop covers those
        // whose records were not reached yet.
        for tp in self.assignment.clone() {
            self.fetch_position(&tp)?;
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut wait = Duration::ZERO;
        loop {
            for pass in 0..2 {
                let order: Vec<usize> = self.in_turn().collect();
                for i in order {
                    let tp = self.assignment[i].clone();
                    if let Some(chunk) = self.ready(&tp, decode)? {
                        self.next_partition = (i + 1) % self.assignment.len();
                        return Ok(Some(chunk));
                    }
                }
                if pass == 0 {
                    self.fill(None, wait)?;
                }
            }
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
            if left.is_zero() {
                return Ok(None);
            }
            wait = left.min(self.config.fetch_max_wait);
            self.refresh_assignment(false, true)?;
        }
    }

    /// Records as Arrow columns (Spark's Kafka source's), at most
    /// `max_records`, waiting up to `timeout` for some.
    pub fn poll_columns(&mut self, max_records: usize, timeout: Duration) -> Result<Columns> {
        self.check()?;
        if max_records == 0 {
            return Err(Error::InvalidArgument("max_records must be positive".into()));
        }
        self.maybe_auto_commit()?;
        let deadline = Instant::now() + timeout;
        loop {
            self.refresh_assignment(false, true)?;
            // What iteration or a poll left pending is read again from its position.
            for tp in self.pending.keys().cloned().collect::<Vec<_>>() {
                let pos = self.position(&tp)?;
                self.drop_pending(&tp);
                self.positions.insert(tp, pos);
            }
            let mut requests = Vec::with_capacity(self.assignment.len());
            for tp in self.assignment.clone() {
                let pos = self.fetch_position(&tp)?;
                requests.push((tp, pos));
            }
            let max_bytes = self.config.max_partition_fetch_bytes;
            let (columns, nexts) = match self.source.read_columns(&requests, max_records, max_bytes) {
                Err(Error::OffsetOutOfRange { .. }) if self.config.auto_offset_reset != OffsetReset::None => {
                    for (tp, pos) in &requests {
                        let (start, end) = self.source.offsets(tp)?;
                        if !(start..=end).contains(pos) {
                            let reset = self.reset(tp, self.config.auto_offset_reset)?;
                            self.positions.insert(tp.clone(), reset);
                        }
                    }
                    continue;
                }
                other => other?,
            };
            for ((tp, _), next) in requests.iter().zip(nexts) {
                if let Some(n) = next {
                    self.positions.insert(tp.clone(), n);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if columns.rows > 0 || left.is_zero() {
                return Ok(columns);
            }
            if self.assignment.is_empty() {
                std::thread::sleep(left.min(IDLE_WAIT));
                continue;
            }
            let wants: Vec<Want> = requests
                .iter()
                .map(|(tp, pos)| Want { tp: tp.clone(), offset: *pos, max_bytes: 1, max_records: 1 })
                .collect();
            // Waits for data; what the wait read is read again as columns.
            let _ = self.source.read(&wants, 1, left.min(self.config.fetch_max_wait));
        }
    }

    // -- commits ------------------------------------------------------------

    fn need_group(&self) -> Result<&Membership> {
        self.membership.as_ref().ok_or_else(|| Error::IllegalState("commit needs a group_id".into()))
    }

    /// Commits `offsets`, or every assigned partition's position (of those
    /// this consumer has a position for). Durable when this returns.
    pub fn commit(&mut self, offsets: Option<CommittedOffsets>) -> Result<()> {
        self.check()?;
        self.need_group()?;
        let offsets = match offsets {
            Some(o) => o,
            None => {
                let mut todo = CommittedOffsets::new();
                for tp in self.assignment.clone() {
                    if self.positions.contains_key(&tp) || self.pending.contains_key(&tp) {
                        todo.insert(tp.clone(), (self.position(&tp)?, String::new()));
                    }
                }
                todo
            }
        };
        let Some(membership) = self.membership.as_mut() else { return Ok(()) };
        membership.commit(&offsets)?;
        self.committed.extend(offsets);
        self.last_commit = Instant::now();
        Ok(())
    }

    /// The group's last committed offset of a partition (asked afresh
    /// through a broker: other members commit too).
    pub fn committed(&self, tp: &TopicPartition) -> Result<Option<(i64, String)>> {
        self.check()?;
        let group = self.need_group()?;
        if group.coordinated().is_some() {
            return Ok(group.committed(Some(std::slice::from_ref(tp)))?.remove(tp));
        }
        Ok(self.committed.get(tp).cloned())
    }

    fn maybe_auto_commit(&mut self) -> Result<()> {
        if self.membership.is_some()
            && self.config.enable_auto_commit
            && self.last_commit.elapsed() >= self.config.auto_commit_interval
        {
            self.commit(None)?;
        }
        Ok(())
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Commits the positions (with auto-commit and `autocommit`), leaves the
    /// group, stops. The group's leaving fails quietly (its error is
    /// returned in the Ok) once the commit succeeded.
    pub fn close(&mut self, autocommit: bool) -> Result<Option<Error>> {
        if self.closed {
            return Ok(None);
        }
        let committed = if autocommit && self.config.enable_auto_commit && self.membership.is_some() {
            self.commit(None)
        } else {
            Ok(())
        };
        self.closed = true;
        for (_, p) in self.pending.drain() {
            if let Pending::Ready(chunk) = p {
                chunk.clear();
            }
        }
        let left = self.membership.as_ref().map_or(Ok(()), |m| m.close(true));
        committed?;
        Ok(left.err())
    }
}

impl<R> Drop for Consumer<R> {
    fn drop(&mut self) {
        if !self.closed {
            if let Some(m) = &self.membership {
                let _ = m.close(false);
            }
        }
    }
}

#[cfg(test)]
#[path = "consumer_test.rs"]
mod tests;
