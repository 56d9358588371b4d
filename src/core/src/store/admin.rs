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
        self.refuse_directories_with_records(name, 0..partitions)?;
        let id = new_topic_id();
        let mut logs = Vec::with_capacity(partitions as usize);
        // The topic exists once its file does; partitions are made first, and a
        // create that fails part-way (a full disk, no file descriptors left)
        // removes what it made.
        let tf =
            TopicFile { name: name.to_string(), topic_id: id.clone(), partitions, config: overrides.clone() };
        let made = (0..partitions)
            .try_for_each(|p| {
                logs.push(self.create_partition(name, p, &id, &config)?);
                Ok(())
            })
            .and_then(|()| self.write_topic_file(&tf));
        if let Err(e) = made {
            for log in &logs {
                let _ = log.delete();
            }
            let _ = fs::remove_dir_all(partition_dir(&self.path, name, logs.len() as i32));
            return Err(e);
        }
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

    /// One new partition's directory and log.
    fn create_partition(
        &self,
        name: &str,
        p: i32,
        id: &str,
        config: &Arc<LogConfig>,
    ) -> Result<Arc<PartitionLog>> {
        let dir = partition_dir(&self.path, name, p);
        // Empty (what an interrupted create or grow leaves), a directory under
        // the new partition's name is renamed aside as a stray
        // (`<topic>-<partition>.<id>-stray`); `refuse_directories_with_records`
        // has refused one holding records before anything was made.
        checkpoint::rename_aside(&dir, "stray")?;
        let (log, _) = PartitionLog::open(&dir, name, p, config.clone(), 0, None, true)?;
        let log = Arc::new(log);
        log.set_signal(self.signal.clone());
        if let Err(e) = checkpoint::write_atomic(
            &dir.join(PARTITION_METADATA),
            format!("version: 0\ntopic_id: {id}\n").as_bytes(),
        ) {
            let _ = log.delete();
            return Err(e);
        }
        Ok(log)
    }

    fn write_topic_file(&self, tf: &TopicFile) -> Result<()> {
        let dir = self.path.join(TOPICS_DIR);
        fs::create_dir_all(&dir).map_err(Error::at(&dir))?;
        let json = serde_json::to_vec_pretty(tf).map_err(|e| Error::InvalidConfig(e.to_string()))?;
        checkpoint::write_atomic(&dir.join(format!("{}.json", tf.name)), &json)
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
        self.write_topic_file(&tf)?;
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
        self.refuse_directories_with_records(name, current..new_total)?;
        let mut logs = Vec::with_capacity((new_total - current) as usize);
        let tf = TopicFile {
            name: name.to_string(),
            topic_id: old.id.clone(),
            partitions: new_total,
            config: old.overrides.clone(),
        };
        let made = (current..new_total)
            .try_for_each(|p| {
                logs.push(self.create_partition(name, p, &old.id, &old.config)?);
                Ok(())
            })
            .and_then(|()| self.write_topic_file(&tf));
        if let Err(e) = made {
            for log in &logs {
                let _ = log.delete();
            }
            let _ = fs::remove_dir_all(partition_dir(&self.path, name, current + logs.len() as i32));
            return Err(e);
        }
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
        let file = self.path.join(TOPICS_DIR).join(format!("{name}.json"));
        fs::remove_file(&file).map_err(Error::at(&file))?;
        checkpoint::sync_dir(&self.path.join(TOPICS_DIR))?;
        for p in &topic.partitions {
            p.delete()?;
        }
        self.write_checkpoints()
    }
}

impl Store {
    /// A directory under a new partition's name is not one of this store's (its
    /// deletes rename theirs aside first): another broker's log, Kafka's for
    /// one, or a topic whose file was lost. Holding records, it is refused before
    /// anything is made, never removed nor served as something else.
    fn refuse_directories_with_records(&self, name: &str, partitions: std::ops::Range<i32>) -> Result<()> {
        for p in partitions {
            let dir = partition_dir(&self.path, name, p);
            if holds_data(&dir)? {
                return Err(Error::InvalidArgument(format!(
                    "{} already holds records this store did not write (another broker's, or a topic \
                     whose file in {TOPICS_DIR} was lost): move it away before creating partition {p} of {name}",
                    dir.display()
                )));
            }
        }
        Ok(())
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
