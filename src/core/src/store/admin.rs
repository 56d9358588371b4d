//! A writable store's topic administration: creating topics and partitions,
//! changing their configuration, deleting them.

use super::*;

impl Store {
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: &BTreeMap<String, String>,
    ) -> Result<Arc<Topic>> {
        self.create_topic_with_id(name, partitions, overrides, None)
    }

    /// `create_topic` under a topic id chosen elsewhere (a cluster's, from
    /// ZooKeeper), or a new one. With an id, a partition directory already
    /// holding records whose `partition.metadata` names the same topic id (a
    /// Kafka broker's log of this very topic, in a log directory it shared) is
    /// adopted as it is: its records, producer state and leader epochs, with
    /// the recovery point, log start offset and high watermark its checkpoint
    /// entries carried.
    pub fn create_topic_with_id(
        &self,
        name: &str,
        partitions: i32,
        overrides: &BTreeMap<String, String>,
        topic_id: Option<&str>,
    ) -> Result<Arc<Topic>> {
        self.create_topic_as(name, partitions, overrides, topic_id, false)
    }

    /// A cluster's topic: `create_topic_with_id` under the id ZooKeeper names
    /// or, for a topic without one (a Kafka controller below
    /// inter.broker.protocol.version 2.8 gives none, and its brokers write no
    /// `partition.metadata`), under a new local id, adopting directories
    /// with records and no `partition.metadata`: before topic ids, Kafka's
    /// identity of a partition directory is its name. A directory whose
    /// `partition.metadata` names an id is still refused.
    pub fn create_cluster_topic(
        &self,
        name: &str,
        partitions: i32,
        overrides: &BTreeMap<String, String>,
        topic_id: Option<&str>,
    ) -> Result<Arc<Topic>> {
        self.create_topic_as(name, partitions, overrides, topic_id, topic_id.is_none())
    }

    fn create_topic_as(
        &self,
        name: &str,
        partitions: i32,
        overrides: &BTreeMap<String, String>,
        topic_id: Option<&str>,
        adopt_unnamed: bool,
    ) -> Result<Arc<Topic>> {
        self.check_writable("create_topic")?;
        validate_topic_name(name)?;
        if !(1..=MAX_PARTITIONS).contains(&partitions) {
            return Err(Error::InvalidArgument(format!(
                "partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}"
            )));
        }
        let config = Arc::new(self.config.topic_defaults.with_overrides(overrides)?);
        let _admin = self.admin.lock();
        if self.topics.read().contains_key(name) {
            return Err(Error::TopicExists(name.to_string()));
        }
        let id = topic_id.map_or_else(new_topic_id, str::to_string);
        self.refuse_directories_with_records(name, 0..partitions, &id, adopt_unnamed)?;
        // The topic exists once the topics file names it; partitions are made
        // first, and a create that fails part-way (a full disk, no file
        // descriptors left) removes what it made (never what it adopted).
        let tf =
            TopicFile { name: name.to_string(), topic_id: id.clone(), partitions, config: overrides.clone() };
        let logs = self.create_partitions_of(name, 0..partitions, &id, &config, tf, adopt_unnamed)?;
        let topic = Arc::new(Topic {
            name: name.to_string(),
            id,
            overrides: overrides.clone(),
            config,
            partitions: logs,
        });
        self.topics.write().insert(name.to_string(), topic.clone());
        Ok(topic)
    }

    /// Makes (or adopts) partitions `range` of `name`, then writes `tf` to the
    /// topics file; on a failure, removes the partitions it made.
    fn create_partitions_of(
        &self,
        name: &str,
        range: std::ops::Range<i32>,
        id: &str,
        config: &Arc<LogConfig>,
        tf: TopicFile,
        adopt_unnamed: bool,
    ) -> Result<Vec<Arc<PartitionLog>>> {
        let mut made = Vec::with_capacity(range.len());
        let result = range
            .clone()
            .try_for_each(|p| {
                made.push(self.create_partition(name, p, id, config, adopt_unnamed)?);
                Ok(())
            })
            .and_then(|()| self.write_topics_file(TopicChange::Put(tf)));
        if let Err(e) = result {
            for (log, adopted) in &made {
                if !adopted {
                    let _ = log.delete();
                }
            }
            let next = range.start + made.len() as i32;
            if !holds_data(&partition_dir(&self.path, name, next)).unwrap_or(true) {
                let _ = fs::remove_dir_all(partition_dir(&self.path, name, next));
            }
            return Err(e);
        }
        Ok(made.into_iter().map(|(log, _)| log).collect())
    }

    /// One new partition's directory and log, or the one there adopted
    /// (`true`) when its `partition.metadata` names topic `id` (or, with
    /// `adopt_unnamed`, when it has none: it is given one naming `id`).
    fn create_partition(
        &self,
        name: &str,
        p: i32,
        id: &str,
        config: &Arc<LogConfig>,
        adopt_unnamed: bool,
    ) -> Result<(Arc<PartitionLog>, bool)> {
        let dir = partition_dir(&self.path, name, p);
        if holds_data(&dir)? {
            let found = metadata_topic_id(&dir)?;
            if adoptable(found.as_deref(), id, adopt_unnamed) {
                let log = self.adopt_partition(&dir, name, p, config)?;
                if found.is_none() {
                    write_partition_metadata(&dir, id)?;
                }
                return Ok((log, true));
            }
        }
        // Empty (what an interrupted create or grow leaves), a directory under
        // the new partition's name is renamed aside as a stray
        // (`<topic>-<partition>.<id>-stray`); `refuse_directories_with_records`
        // has refused one holding records before anything was made.
        checkpoint::rename_aside(&dir, "stray")?;
        let (log, _) = PartitionLog::open(&dir, name, p, config.clone(), 0, None, true)?;
        let log = Arc::new(log);
        log.set_signal(self.signal.clone());
        if let Err(e) = write_partition_metadata(&dir, id) {
            let _ = log.delete();
            return Err(e);
        }
        Ok((log, false))
    }

    /// Opens a partition directory this store did not make, with the
    /// checkpoint entries kept for it, and recovers it as Kafka would after
    /// the stop its log directory records (clean or not).
    fn adopt_partition(
        &self,
        dir: &Path,
        name: &str,
        p: i32,
        config: &Arc<LogConfig>,
    ) -> Result<Arc<PartitionLog>> {
        let key = (name.to_string(), p);
        let (recovery, start, hw) = {
            let foreign = self.foreign.lock();
            (foreign[0].get(&key).copied(), foreign[1].get(&key).copied(), foreign[2].get(&key).copied())
        };
        let (log, _) = PartitionLog::open(
            dir,
            name,
            p,
            config.clone(),
            recovery.unwrap_or(0),
            start,
            self.clean_open && recovery.is_some(),
        )?;
        if let Some(hw) = hw {
            log.restore_high_watermark(hw);
        }
        log.set_signal(self.signal.clone());
        let mut foreign = self.foreign.lock();
        for m in foreign.iter_mut() {
            m.remove(&key);
        }
        Ok(Arc::new(log))
    }

    /// Changes a topic's config overrides (set `None` to return to the default).
    pub fn alter_topic_config(&self, name: &str, changes: &BTreeMap<String, Option<String>>) -> Result<()> {
        self.check_writable("alter_topic_config")?;
        let _admin = self.admin.lock();
        let old = self.topic(name)?;
        let mut overrides = old.overrides.clone();
        for (k, v) in changes {
            if !crate::config::TOPIC_KEYS.contains(&k.as_str()) {
                return Err(Error::InvalidConfig(format!(
                    "unknown topic config key {k:?} (known: {})",
                    crate::config::TOPIC_KEYS.join(", ")
                )));
            }
            match v {
                Some(v) => overrides.insert(k.clone(), v.clone()),
                None => overrides.remove(k),
            };
        }
        let config = Arc::new(self.config.topic_defaults.with_overrides(&overrides)?);
        let tf = TopicFile {
            name: name.to_string(),
            topic_id: old.id.clone(),
            partitions: old.partitions.len() as i32,
            config: overrides.clone(),
        };
        self.write_topics_file(TopicChange::Put(tf))?;
        for p in &old.partitions {
            p.set_config(config.clone());
        }
        let topic = Topic {
            name: name.to_string(),
            id: old.id.clone(),
            overrides,
            config,
            partitions: old.partitions.clone(),
        };
        self.topics.write().insert(name.to_string(), Arc::new(topic));
        Ok(())
    }

    /// Kafka's CreatePartitions: grows `name` to `new_total` partitions (never
    /// shrinks it). As in `create_topic`, the new partitions' directories are
    /// made first and the topic file is rewritten last, atomically: a crash
    /// before the rename leaves the topic as it was (the stray directories are
    /// replaced by the next grow), one after it leaves the topic grown.
    /// A count not larger than the current one is `InvalidArgument` (Kafka's
    /// INVALID_PARTITIONS).
    pub fn create_partitions(&self, name: &str, new_total: i32) -> Result<Arc<Topic>> {
        self.check_writable("create_partitions")?;
        if is_internal_topic(name) {
            return Err(internal_topic_error(name, "adding partitions"));
        }
        let _admin = self.admin.lock();
        let old = self.topic(name)?;
        let current = old.partitions.len() as i32;
        if new_total <= current {
            return Err(Error::InvalidArgument(format!(
                "topic {name:?} has {current} partitions; the new count must be larger, got {new_total}"
            )));
        }
        if new_total > MAX_PARTITIONS {
            return Err(Error::InvalidArgument(format!(
                "partitions must be between 1 and {MAX_PARTITIONS}, got {new_total}"
            )));
        }
        self.refuse_directories_with_records(name, current..new_total, &old.id, false)?;
        let tf = TopicFile {
            name: name.to_string(),
            topic_id: old.id.clone(),
            partitions: new_total,
            config: old.overrides.clone(),
        };
        let logs = self.create_partitions_of(name, current..new_total, &old.id, &old.config, tf, false)?;
        let mut partitions = old.partitions.clone();
        partitions.extend(logs);
        let topic = Arc::new(Topic {
            name: name.to_string(),
            id: old.id.clone(),
            overrides: old.overrides.clone(),
            config: old.config.clone(),
            partitions,
        });
        self.topics.write().insert(name.to_string(), topic.clone());
        Ok(topic)
    }

    pub fn delete_topic(&self, name: &str) -> Result<()> {
        self.check_writable("delete_topic")?;
        validate_topic_name(name)?;
        if is_internal_topic(name) {
            return Err(internal_topic_error(name, "deleting the topic"));
        }
        let _admin = self.admin.lock();
        let topic = self.topics.write().remove(name).ok_or_else(|| Error::UnknownTopic(name.to_string()))?;
        if let Err(e) = self.write_topics_file(TopicChange::Remove(name)) {
            self.topics.write().insert(name.to_string(), topic);
            return Err(e);
        }
        for p in &topic.partitions {
            p.delete()?;
        }
        self.write_checkpoints()
    }
}

impl Store {
    /// A directory under a new partition's name is not one of this store's (its
    /// deletes rename theirs aside first): another broker's log, Kafka's for
    /// one, or a topic whose entry in the topics file was lost. Holding records
    /// of another topic id (or of none), it is refused before anything is
    /// made, never removed nor served as something else.
    fn refuse_directories_with_records(
        &self,
        name: &str,
        partitions: std::ops::Range<i32>,
        id: &str,
        adopt_unnamed: bool,
    ) -> Result<()> {
        for p in partitions {
            let dir = partition_dir(&self.path, name, p);
            if !holds_data(&dir)? {
                continue;
            }
            let found = metadata_topic_id(&dir)?;
            if !adoptable(found.as_deref(), id, adopt_unnamed) {
                let whose = match found {
                    Some(other) => format!("of topic id {other}, not {id}"),
                    None => "without a partition.metadata naming its topic id".to_string(),
                };
                return Err(Error::InvalidArgument(format!(
                    "{} already holds records {whose} (another broker's, a deleted topic's, or a topic \
                     whose entry in {TOPICS_FILE} was lost): move it away before creating partition {p} of {name}",
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

/// Whether a directory with records, whose `partition.metadata` names
/// `found`, is taken as partition data of topic `id`: the same id, or none
/// where the topic has none either (`adopt_unnamed`).
fn adoptable(found: Option<&str>, id: &str, adopt_unnamed: bool) -> bool {
    found == Some(id) || (found.is_none() && adopt_unnamed)
}

/// Kafka's `partition.metadata`: `version: 0` and the topic id.
fn write_partition_metadata(dir: &Path, id: &str) -> Result<()> {
    checkpoint::write_atomic(
        &dir.join(PARTITION_METADATA),
        format!("version: 0\ntopic_id: {id}\n").as_bytes(),
    )
}

/// The topic id a partition directory's `partition.metadata` names (Kafka's
/// `version: 0` / `topic_id: <id>` lines), `None` without the file.
fn metadata_topic_id(dir: &Path) -> Result<Option<String>> {
    let path = dir.join(PARTITION_METADATA);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::at(&path)(e)),
    };
    let corrupt = |reason: &str| Error::CorruptFile { path: path.clone(), reason: reason.to_string() };
    let mut lines = text.lines().map(|l| l.split_once(':').map(|(k, v)| (k.trim(), v.trim())));
    match lines.next() {
        Some(Some(("version", "0"))) => {}
        Some(Some(("version", v))) => return Err(corrupt(&format!("unknown version {v} (Kafka writes 0)"))),
        _ => return Err(corrupt("the first line is not \"version: 0\"")),
    }
    match lines.next() {
        Some(Some(("topic_id", id))) if !id.is_empty() => Ok(Some(id.to_string())),
        _ => Err(corrupt("the second line is not \"topic_id: <id>\"")),
    }
}

/// Whether a directory holds records: a `.log` file with bytes in it, or a
/// directory (`false` if it is not there). What an interrupted create or grow
/// leaves (an empty log, its preallocated indexes, `partition.metadata`) is not.
fn holds_data(dir: &Path) -> Result<bool> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::at(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(Error::at(dir))?;
        let meta = entry.metadata().map_err(Error::at(dir))?;
        let log = entry.file_name().to_str().is_some_and(|n| n.ends_with(".log"));
        if meta.is_dir() || (log && meta.len() > 0) {
            return Ok(true);
        }
    }
    Ok(false)
}
