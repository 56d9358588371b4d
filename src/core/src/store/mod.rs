//! A store: one directory of topic-partitions, laid out as a Kafka log directory,
//! with one writing process (an exclusive lock on `.lock`, which names its PID)
//! and any number of read-only openers.

mod admin;
mod inotify;
mod lock;
mod producer_ids;
mod scheduler;
mod topic;
mod wait;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::checkpoint::{self, CLEANER_OFFSET, LOG_START_OFFSET, RECOVERY_POINT, REPLICATION_OFFSET};
use crate::config::{LogConfig, StoreConfig};
use crate::error::{Error, Result};
use crate::log::{internal_topic_error, is_internal_topic, AppendSignal, LoadReport, PartitionLog};

pub use lock::LOCK_FILE;
use producer_ids::ProducerIdBlock;
pub use producer_ids::{PRODUCER_ID_BLOCK_FILE, PRODUCER_ID_BLOCK_SIZE};
pub use scheduler::MaintenanceReport;
use scheduler::MaintenanceThread;
use topic::{new_topic_id, partition_dir, TopicChange, TopicFile, TopicsFile};
pub use topic::{
    validate_topic_name, PartitionDescription, Topic, TopicDescription, MAX_PARTITIONS, MAX_TOPIC_NAME,
};

pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// Every topic's id, partition count and config overrides, one JSON file
/// beside Kafka's checkpoints (a file, as Kafka's log manager takes every
/// directory in a log directory for a partition's).
pub const TOPICS_FILE: &str = ".topics.json";
/// Where older stores kept one JSON file per topic; read, folded into
/// `TOPICS_FILE` and removed when such a store is opened for writing.
pub const LEGACY_TOPICS_DIR: &str = ".topics";
pub const PARTITION_METADATA: &str = "partition.metadata";

pub struct Store {
    path: PathBuf,
    read_only: bool,
    config: StoreConfig,
    lock: Mutex<Option<File>>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    /// Serialises topic creation and deletion.
    admin: Mutex<()>,
    closed: AtomicBool,
    load_report: LoadReport,
    clean_open: bool,
    signal: Arc<AppendSignal>,
    /// Per partition, the first offset the cleaner has not cleaned.
    cleaner_offsets: Mutex<BTreeMap<(String, i32), i64>>,
    maintenance: Mutex<Option<MaintenanceThread>>,
    /// Serialises checkpoint writes, so that a writer holding older offsets
    /// never renames its file over a newer one.
    checkpoints: Mutex<()>,
    /// The background thread's last failure (see `last_maintenance_error`).
    maintenance_error: Mutex<Option<String>>,
    /// The producer ids in hand (see `allocate_producer_id`).
    producer_ids: Mutex<ProducerIdBlock>,
    /// Checkpoint entries (recovery point, log start, high watermark) of
    /// partition directories in the store that no topic here opens (a log
    /// directory Kafka wrote, before this broker adopts its topics): written
    /// back as they were while the directory is there, never dropped.
    foreign: Mutex<[BTreeMap<(String, i32), i64>; 3]>,
}

/// Removes the partition directories a delete renamed aside and did not finish.
fn finish_deletes(path: &Path) -> Result<()> {
    for entry in fs::read_dir(path).map_err(Error::at(path))? {
        let entry = entry.map_err(Error::at(path))?;
        if entry.file_name().to_str().is_some_and(checkpoint::is_being_deleted) {
            fs::remove_dir_all(entry.path()).map_err(Error::at(entry.path()))?;
        }
    }
    Ok(())
}

impl Store {
    /// Opens (creating the directory if needed) a store for writing, or, with
    /// `read_only`, an existing one for reading beside its writer.
    pub fn open(path: &Path, config: &BTreeMap<String, String>, read_only: bool) -> Result<Arc<Store>> {
        let config = StoreConfig::from_map(config)?;
        match fs::metadata(path) {
            Ok(meta) if !meta.is_dir() => {
                return Err(Error::at(path)(std::io::Error::from_raw_os_error(libc::ENOTDIR)));
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !read_only => {
                fs::create_dir_all(path).map_err(Error::at(path))?;
            }
            Err(e) => return Err(Error::at(path)(e)),
        }
        let lock = if read_only { None } else { Some(lock::acquire(path)?) };
        let clean = !read_only && path.join(CLEAN_SHUTDOWN_FILE).exists();
        let mut store = Store {
            path: path.to_owned(),
            read_only,
            config,
            lock: Mutex::new(lock),
            topics: RwLock::new(BTreeMap::new()),
            admin: Mutex::new(()),
            closed: AtomicBool::new(false),
            load_report: LoadReport::default(),
            clean_open: clean,
            signal: Arc::new(AppendSignal::default()),
            cleaner_offsets: Mutex::new(BTreeMap::new()),
            maintenance: Mutex::new(None),
            checkpoints: Mutex::new(()),
            maintenance_error: Mutex::new(None),
            producer_ids: Mutex::new(ProducerIdBlock::default()),
            foreign: Mutex::new(Default::default()),
        };
        if !read_only {
            // What an interrupted checkpoint or topic-file write left, and
            // partition directories an interrupted delete renamed aside.
            checkpoint::remove_temp_files(path)?;
            finish_deletes(path)?;
        }
        store.load_report = store.load_topics()?;
        if !read_only {
            store.fold_legacy_topic_files()?;
        }
        if !read_only {
            // From here on a crash is an unclean stop: the marker must go first.
            match fs::remove_file(path.join(CLEAN_SHUTDOWN_FILE)) {
                Ok(()) => checkpoint::sync_dir(path)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::at(path.join(CLEAN_SHUTDOWN_FILE))(e)),
            }
            *store.cleaner_offsets.lock() = checkpoint::read_offsets(&path.join(CLEANER_OFFSET))?;
            store.write_checkpoints()?;
        }
        let store = Arc::new(store);
        if !read_only {
            store.start_maintenance()?;
        }
        Ok(store)
    }

    /// The topics file's entries, with those an older store's per-topic
    /// files add (the topics file wins where both name a topic).
    fn topic_files(&self) -> Result<Vec<TopicFile>> {
        let path = self.path.join(TOPICS_FILE);
        let corrupt = |path: &Path, reason: String| Error::CorruptFile { path: path.to_owned(), reason };
        let mut out: BTreeMap<String, TopicFile> = BTreeMap::new();
        match fs::read(&path) {
            Ok(bytes) => {
                let file: TopicsFile = serde_json::from_slice(&bytes)
                    .map_err(|e| corrupt(&path, format!("unreadable topics file: {e}")))?;
                if file.version != 1 {
                    return Err(corrupt(
                        &path,
                        format!("unknown version {} (this seglog reads 1)", file.version),
                    ));
                }
                for tf in file.topics {
                    validate_topic_name(&tf.name).map_err(|e| corrupt(&path, e.to_string()))?;
                    if out.contains_key(&tf.name) {
                        return Err(corrupt(&path, format!("topic {:?} is listed twice", tf.name)));
                    }
                    out.insert(tf.name.clone(), tf);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::at(&path)(e)),
        }
        let dir = self.path.join(LEGACY_TOPICS_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => Some(e),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::at(&dir)(e)),
        };
        for entry in entries.into_iter().flatten() {
            let path = entry.map_err(Error::at(&dir))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = fs::read_to_string(&path).map_err(Error::at(&path))?;
            let tf: TopicFile = serde_json::from_str(&text)
                .map_err(|e| corrupt(&path, format!("unreadable topic file: {e}")))?;
            validate_topic_name(&tf.name).map_err(|e| corrupt(&path, e.to_string()))?;
            out.entry(tf.name.clone()).or_insert(tf);
        }
        Ok(out.into_values().collect())
    }

    /// Rewrites the topics file from the open topics, with `change` applied
    /// (a topic added or replaced, or one removed). Callers hold `admin`.
    fn write_topics_file(&self, change: TopicChange<'_>) -> Result<()> {
        let mut entries: BTreeMap<String, TopicFile> =
            self.topics.read().values().map(|t| (t.name.clone(), TopicFile::of(t))).collect();
        match change {
            TopicChange::Put(tf) => {
                entries.insert(tf.name.clone(), tf);
            }
            TopicChange::Remove(name) => {
                entries.remove(name);
            }
            TopicChange::None => {}
        }
        let file = TopicsFile { version: 1, topics: entries.into_values().collect() };
        let json = serde_json::to_vec_pretty(&file).map_err(|e| Error::InvalidConfig(e.to_string()))?;
        checkpoint::write_atomic(&self.path.join(TOPICS_FILE), &json)
    }

    /// An older store's `.topics/` directory: its topics, open now, are
    /// written to the topics file and the directory removed (a Kafka broker
    /// refuses to start on a log directory holding it).
    fn fold_legacy_topic_files(&self) -> Result<()> {
        let dir = self.path.join(LEGACY_TOPICS_DIR);
        if !dir.is_dir() {
            return Ok(());
        }
        let _admin = self.admin.lock();
        self.write_topics_file(TopicChange::None)?;
        fs::remove_dir_all(&dir).map_err(Error::at(&dir))?;
        checkpoint::sync_dir(&self.path)
    }

    /// Opens every topic listed under `.topics` that is not open yet (a reader
    /// calls this again to see topics the writer created since).
    fn load_topics(&self) -> Result<LoadReport> {
        let files = self.topic_files()?;
        let (recovery, starts, high_watermarks) = if self.read_only {
            (BTreeMap::new(), BTreeMap::new(), BTreeMap::new())
        } else {
            (
                checkpoint::read_offsets(&self.path.join(RECOVERY_POINT))?,
                checkpoint::read_offsets(&self.path.join(LOG_START_OFFSET))?,
                checkpoint::read_offsets(&self.path.join(REPLICATION_OFFSET))?,
            )
        };
        let mut report = LoadReport::default();
        let mut topics = self.topics.write();
        if self.read_only {
            let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
            topics.retain(|n, _| names.contains(&n.as_str()));
        }
        for tf in files {
            // A topic already open is reopened only to add partitions a writer
            // has created since (CreatePartitions); those it has stay as they are.
            let open = topics.get(&tf.name).filter(|t| t.id == tf.topic_id).cloned();
            if open.as_ref().is_some_and(|t| t.partitions.len() as i32 >= tf.partitions) {
                continue;
            }
            let config = match &open {
                Some(t) => t.config.clone(),
                None => Arc::new(self.config.topic_defaults.with_overrides(&tf.config)?),
            };
            let mut partitions = Vec::with_capacity(tf.partitions.max(0) as usize);
            if let Some(t) = &open {
                partitions.extend(t.partitions.iter().cloned());
            }
            for p in partitions.len() as i32..tf.partitions {
                let dir = partition_dir(&self.path, &tf.name, p);
                let log = if self.read_only {
                    PartitionLog::open_read_only_on_demand(&dir, &tf.name, p, config.clone())
                } else {
                    let key = (tf.name.clone(), p);
                    let rp = recovery.get(&key).copied().unwrap_or(0);
                    let (log, r) = PartitionLog::open(
                        &dir,
                        &tf.name,
                        p,
                        config.clone(),
                        rp,
                        starts.get(&key).copied(),
                        self.clean_open,
                    )?;
                    report.recovered_segments += r.recovered_segments;
                    report.truncated_bytes += r.truncated_bytes;
                    report.deleted_segments += r.deleted_segments;
                    report.damaged_segments += r.damaged_segments;
                    report.damaged_snapshots += r.damaged_snapshots;
                    report.damaged_epoch_checkpoints += r.damaged_epoch_checkpoints;
                    if let Some(&hw) = high_watermarks.get(&key) {
                        log.restore_high_watermark(hw);
                    }
                    log
                };
                // Appends to a loaded partition must wake in-process waiters too.
                log.set_signal(self.signal.clone());
                partitions.push(Arc::new(log));
            }
            let topic =
                Topic { name: tf.name.clone(), id: tf.topic_id, overrides: tf.config, config, partitions };
            topics.insert(tf.name, Arc::new(topic));
        }
        if !self.read_only {
            let opened =
                |(t, p): &(String, i32)| topics.get(t).is_some_and(|t| (*p as usize) < t.partitions.len());
            let keep = |m: BTreeMap<(String, i32), i64>| -> BTreeMap<(String, i32), i64> {
                m.into_iter().filter(|(k, _)| !opened(k)).collect()
            };
            *self.foreign.lock() = [keep(recovery), keep(starts), keep(high_watermarks)];
        }
        Ok(report)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }
    /// What opening found: segments scanned, bytes cut from torn tails.
    pub fn load_report(&self) -> &LoadReport {
        &self.load_report
    }
    pub fn was_clean_shutdown(&self) -> bool {
        self.clean_open
    }

    /// A new producer id (Kafka's InitProducerId without a transactional id):
    /// never one handed out before by this store, across restarts and
    /// crashes (see `producer_ids`). A read-only store refuses.
    pub fn allocate_producer_id(&self) -> Result<i64> {
        self.check_writable("allocate_producer_id")?;
        self.producer_ids.lock().allocate(&self.path)
    }

    /// Bumped by every append in this process (see `AppendSignal`).
    pub fn append_signal(&self) -> &Arc<AppendSignal> {
        &self.signal
    }

    fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    fn check_writable(&self, what: &'static str) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::ReadOnly(what));
        }
        Ok(())
    }

    pub fn topics(&self) -> Result<Vec<String>> {
        self.check_open()?;
        if self.read_only {
            self.load_topics()?;
        }
        Ok(self.topics.read().keys().cloned().collect())
    }

    pub fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        self.check_open()?;
        if let Some(t) = self.topics.read().get(name) {
            return Ok(t.clone());
        }
        validate_topic_name(name)?;
        if self.read_only {
            self.load_topics()?;
            if let Some(t) = self.topics.read().get(name) {
                return Ok(t.clone());
            }
        }
        Err(Error::UnknownTopic(name.to_string()))
    }

    /// The topic, created with the store's defaults if it is missing and
    /// `auto.create.topics.enable` allows it.
    pub fn topic_or_create(&self, name: &str) -> Result<Arc<Topic>> {
        match self.topic(name) {
            // Only their coordinator creates internal topics, with their own settings.
            Err(Error::UnknownTopic(_)) if is_internal_topic(name) => {
                Err(internal_topic_error(name, "creating the topic on first use"))
            }
            Err(Error::UnknownTopic(_)) if self.config.auto_create_topics && !self.read_only => {
                match self.create_topic(name, self.config.num_partitions, &BTreeMap::new()) {
                    Err(Error::TopicExists(_)) => self.topic(name),
                    other => other,
                }
            }
            other => other,
        }
    }

    pub fn partition(&self, topic: &str, partition: i32) -> Result<Arc<PartitionLog>> {
        match self.topic(topic)?.partition(partition) {
            Ok(log) => Ok(log.clone()),
            // A reader looks again: the writer may have added partitions since.
            Err(Error::UnknownPartition { .. }) if self.read_only => {
                self.load_topics()?;
                Ok(self.topic(topic)?.partition(partition)?.clone())
            }
            Err(e) => Err(e),
        }
    }

    /// Kafka's DeleteRecords: moves the log start offset up and writes the
    /// checkpoint at once, so readers in other processes see it. `before` -1
    /// means the high watermark (the log end: everything); other negatives are
    /// refused.
    pub fn delete_records(&self, topic: &str, partition: i32, before: i64) -> Result<()> {
        self.check_writable("delete_records")?;
        if is_internal_topic(topic) {
            return Err(internal_topic_error(topic, "deleting records"));
        }
        let log = self.partition(topic, partition)?;
        let before = match before {
            -1 => log.high_watermark(),
            b if b < 0 => {
                return Err(Error::InvalidArgument(format!(
                    "before_offset {b}: expected an offset >= 0, or -1 for the high watermark"
                )))
            }
            // Only what every in-sync replica has (all of it, unreplicated).
            b if b > log.high_watermark() => {
                return Err(Error::OffsetOutOfRange {
                    topic: topic.to_string(),
                    partition,
                    offset: b,
                    start: log.log_start_offset(),
                    end: log.high_watermark(),
                })
            }
            b => b,
        };
        log.delete_records_before(before)?;
        self.write_checkpoints()
    }

    pub fn describe(&self, name: &str) -> Result<TopicDescription> {
        let t = self.topic(name)?;
        let partitions = t
            .partitions
            .iter()
            .map(|p| {
                if self.read_only {
                    p.catch_up()?;
                }
                Ok(PartitionDescription {
                    partition: p.partition(),
                    log_start_offset: p.log_start_offset(),
                    log_end_offset: p.log_end_offset(),
                    size_bytes: p.size_bytes(),
                    segment_count: p.segment_count(),
                    recovery_point: p.recovery_point(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(TopicDescription {
            name: t.name.clone(),
            topic_id: t.id.clone(),
            partitions,
            config: t.config.to_map(),
            overrides: t.overrides.clone(),
            last_maintenance_error: self.last_maintenance_error(),
        })
    }

    fn all_partitions(&self) -> Vec<Arc<PartitionLog>> {
        self.topics.read().values().flat_map(|t| t.partitions.iter().cloned()).collect()
    }

    /// Kafka's per-directory checkpoints: recovery points, log start offsets
    /// and the high watermarks of logs replication touched (a replicated
    /// broker writes them every `replica.high.watermark.checkpoint.interval.ms`).
    pub fn checkpoint(&self) -> Result<()> {
        self.check_writable("write checkpoints")?;
        self.write_checkpoints()
    }

    fn write_checkpoints(&self) -> Result<()> {
        // Offsets are read under the lock too: a snapshot taken before another
        // writer's must not be written after it.
        let _one_writer = self.checkpoints.lock();
        let mut rp = BTreeMap::new();
        let mut starts = BTreeMap::new();
        let mut hws = BTreeMap::new();
        {
            // Directories this store does not open keep their entries while they are there.
            let foreign = self.foreign.lock();
            let present = |(t, p): &(String, i32)| partition_dir(&self.path, t, *p).is_dir();
            for (into, from) in [&mut rp, &mut starts, &mut hws].into_iter().zip(foreign.iter()) {
                into.extend(from.iter().filter(|(k, _)| present(k)).map(|(k, v)| (k.clone(), *v)));
            }
        }
        for p in self.all_partitions() {
            let key = (p.topic().to_string(), p.partition());
            rp.insert(key.clone(), p.recovery_point());
            starts.insert(key.clone(), p.log_start_offset());
            if let Some(hw) = p.checkpointed_high_watermark() {
                hws.insert(key, hw);
            }
        }
        checkpoint::write_offsets(&self.path.join(RECOVERY_POINT), &rp)?;
        checkpoint::write_offsets(&self.path.join(LOG_START_OFFSET), &starts)?;
        checkpoint::write_offsets(&self.path.join(REPLICATION_OFFSET), &hws)?;
        let live: BTreeMap<(String, i32), i64> = self
            .cleaner_offsets
            .lock()
            .iter()
            .filter(|(k, _)| rp.contains_key(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        checkpoint::write_offsets(&self.path.join(CLEANER_OFFSET), &live)?;
        Ok(())
    }

    /// Flushes every partition (log and indexes) and writes the checkpoints.
    pub fn flush(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Ok(());
        }
        for p in self.all_partitions() {
            p.flush()?;
        }
        self.write_checkpoints()
    }

    /// Flushes and seals every partition, writes the checkpoints and the clean
    /// shutdown marker, and releases the lock. Idempotent.
    pub fn close(&self) -> Result<()> {
        self.stop_maintenance();
        let _admin = self.admin.lock();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if self.read_only {
            for p in self.all_partitions() {
                p.close()?;
            }
            return Ok(());
        }
        let mut first_err = None;
        for p in self.all_partitions() {
            // Waits for a retention or cleaning pass in progress on it.
            let _m = p.lock_maintenance();
            if let Err(e) = p.close().and_then(|_| p.remove_deleted_files(true).map(|_| ())) {
                first_err.get_or_insert(e);
            }
        }
        // A log that had a failed write is not vouched for: the next open checks it.
        let clean = !self.all_partitions().iter().any(|p| p.had_write_error());
        if first_err.is_none() {
            match self.write_checkpoints().and_then(|_| {
                if !clean {
                    return Ok(());
                }
                checkpoint::write_atomic(
                    &self.path.join(CLEAN_SHUTDOWN_FILE),
                    br#"{"version":0,"brokerEpoch":-1}"#,
                )
            }) {
                Ok(()) => {}
                Err(e) => first_err = Some(e),
            }
        }
        if let Some(f) = self.lock.lock().take() {
            let _ = f.unlock();
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

#[cfg(test)]
#[path = "store_test.rs"]
mod tests;
