//! Topic administration in ZooKeeper mode: a topic's znodes written (config
//! first, then the assignment, as Kafka does), and the wait until this
//! broker's view shows the controller's answer.

use super::*;

impl Replication {
    /// Creates a topic's znodes (config first, then the assignment, as Kafka
    /// does); the controller then gives its partitions leaders. Waits up to
    /// `timeout` until this broker's view shows a leader for each.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i32,
        config: &BTreeMap<String, String>,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<(), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        let client = self.connected()?;
        // The brokers as ZooKeeper has them now, not as this broker last heard.
        let view = view::read(&client).await.map_err(refusal)?;
        if view.topics.contains_key(name) {
            return Err((E::TopicAlreadyExists.code(), format!("Topic '{name}' already exists.")));
        }
        let brokers: Vec<(i32, Option<String>)> =
            view.brokers.values().map(|b| (b.id, b.rack.clone())).collect();
        let assignment = placement::assign(&brokers, partitions, replication_factor, None)
            .map_err(|e| (E::InvalidReplicationFactor.code(), e.to_string()))?;
        if validate_only {
            return Ok(());
        }
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        if client.check_stat(&znodes::topic_path(name)).await.map_err(refusal)?.is_some() {
            return Err((E::TopicAlreadyExists.code(), format!("Topic '{name}' already exists.")));
        }
        let path = znodes::topic_config_path(name);
        match client.create(&path, &znodes::topic_config_to_json(config), &persistent).await {
            Ok(_) => {}
            Err(ZkError::NodeExists) => {
                client.set_data(&path, &znodes::topic_config_to_json(config), None).await.map_err(refusal)?;
            }
            Err(e) => return Err(refusal(e)),
        }
        match client
            .create(&znodes::topic_path(name), &znodes::assignment_to_json(&assignment), &persistent)
            .await
        {
            Ok(_) => {}
            Err(ZkError::NodeExists) => {
                return Err((E::TopicAlreadyExists.code(), format!("Topic '{name}' already exists.")))
            }
            Err(e) => return Err(refusal(e)),
        }
        log(
            "info",
            "topic_created",
            &[("topic", &name), ("partitions", &partitions), ("assignment", &format!("{assignment:?}"))],
        );
        self.wait_until_led(name, partitions, timeout).await;
        Ok(())
    }

    /// Registers `__consumer_offsets` in ZooKeeper as Kafka's coordinator
    /// does (its config, then its assignment under a topic id), with every
    /// partition on this broker, the coordinator, and one replica: its
    /// offsets are this broker's, not replicated. Returns once this broker
    /// leads the partitions and has made them under the cluster's topic id,
    /// which a Kafka broker later started on this log directory checks. A
    /// store that has the topic already (written before it joined a cluster)
    /// registers it with its own id and partition count.
    pub async fn register_offsets_topic(
        &self,
        partitions: i32,
        config: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<(), (i16, String)> {
        use seglog_core::group::OFFSETS_TOPIC as NAME;
        let client = self.connected()?;
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        if client.check_stat(&znodes::topic_path(NAME)).await.map_err(refusal)?.is_none() {
            let (id, partitions) = match self.store.topic(NAME) {
                Ok(t) => (t.id.clone(), t.partitions.len() as i32),
                Err(_) => (znodes::new_topic_id(), partitions),
            };
            let path = znodes::topic_config_path(NAME);
            match client.create(&path, &znodes::topic_config_to_json(config), &persistent).await {
                Ok(_) | Err(ZkError::NodeExists) => {}
                Err(e) => return Err(refusal(e)),
            }
            let assignment = vec![vec![self.node_id]; partitions as usize];
            let data = znodes::assignment_with_id_to_json(&assignment, &id);
            match client.create(&znodes::topic_path(NAME), &data, &persistent).await {
                Ok(_) => log("info", "topic_created", &[("topic", &NAME), ("partitions", &partitions)]),
                Err(ZkError::NodeExists) => {}
                Err(e) => return Err(refusal(e)),
            }
        }
        let deadline = Instant::now() + timeout;
        let mut changed = self.changed.subscribe();
        loop {
            let view = self.view();
            if let Some(t) = view.topics.get(NAME) {
                // Registered by another member (a coordinator before this
                // one): this broker keeps its own copy, under the same id.
                if !t.assignment.iter().any(|r| r.contains(&self.node_id)) {
                    let partitions = t.assignment.len() as i32;
                    return match self.store.create_topic_with_id(
                        NAME,
                        partitions,
                        config,
                        t.topic_id.as_deref(),
                    ) {
                        Ok(_) | Err(seglog_core::Error::TopicExists(_)) => Ok(()),
                        Err(e) => Err((
                            kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
                            e.to_string(),
                        )),
                    };
                }
                let led = t.states.len() == t.assignment.len()
                    && t.states.iter().all(|s| s.as_ref().is_some_and(|s| s.state.leader >= 0));
                if led && self.store.topic(NAME).is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                let code = kafka_protocol::ResponseError::CoordinatorNotAvailable.code();
                return Err((code, format!("{NAME} was not ready within {timeout:?}")));
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), changed.changed()).await;
        }
    }

    /// Waits up to `timeout` until this broker's view no longer has `name`
    /// (Kafka's DelayedDeleteTopics).
    async fn wait_until_gone(&self, name: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut changed = self.changed.subscribe();
        while self.view().topics.contains_key(name) && Instant::now() < deadline {
            let _ = tokio::time::timeout(Duration::from_millis(50), changed.changed()).await;
        }
    }

    /// Waits up to `timeout` until this broker's view shows `partitions`
    /// partitions of `name`, each with a leader (Kafka's
    /// DelayedCreatePartitions): a client's next request here sees them.
    async fn wait_until_led(&self, name: &str, partitions: i32, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut changed = self.changed.subscribe();
        loop {
            let view = self.view();
            let led = view.topics.get(name).is_some_and(|t| {
                t.states.len() >= partitions as usize
                    && t.states.iter().all(|s| s.as_ref().is_some_and(|s| s.state.leader >= 0))
            });
            if led || Instant::now() >= deadline {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), changed.changed()).await;
        }
    }

    /// Replaces a topic's overrides in `/config/topics/T`; every member
    /// applies them to its replicas when the watch brings them (this one at
    /// once, so that a DescribeConfigs right after reads them).
    pub async fn set_topic_config(
        &self,
        name: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        let client = self.connected()?;
        let path = znodes::topic_config_path(name);
        let data = znodes::topic_config_to_json(config);
        let version = match client.set_data(&path, &data, None).await {
            Ok(stat) => stat.version,
            Err(ZkError::NoNode) => {
                let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
                client.create(&path, &data, &persistent).await.map_err(refusal)?;
                0
            }
            Err(e) => return Err(refusal(e)),
        };
        tokio::task::block_in_place(|| self.apply_config(name, config, version))
            .map_err(|e| (E::UnknownServerError.code(), e.to_string()))
    }

    /// Deletes a topic's znodes (its partition states, assignment and
    /// config) in one multi; every member then deletes its replicas.
    pub async fn delete_topic(&self, name: &str, timeout: Duration) -> Result<(), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        let client = self.connected()?;
        let missing = || (E::UnknownTopicOrPartition.code(), format!("The topic '{name}' does not exist."));
        for _ in 0..5 {
            let Some(stat) = client.check_stat(&znodes::topic_path(name)).await.map_err(refusal)? else {
                return Err(missing());
            };
            let partitions = match client.list_children(&znodes::partitions_path(name)).await {
                Ok(c) => Some(c),
                Err(ZkError::NoNode) => None,
                Err(e) => return Err(refusal(e)),
            };
            let mut multi = client.new_multi_writer();
            let add = |m: &mut zookeeper_client::MultiWriter<'_>, path: &str| {
                m.add_delete(path, None).map_err(refusal)
            };
            if let Some(partitions) = &partitions {
                for p in partitions {
                    let base = format!("{}/{p}", znodes::partitions_path(name));
                    if client.check_stat(&format!("{base}/state")).await.map_err(refusal)?.is_some() {
                        add(&mut multi, &format!("{base}/state"))?;
                    }
                    add(&mut multi, &base)?;
                }
                add(&mut multi, &znodes::partitions_path(name))?;
            }
            multi.add_delete(&znodes::topic_path(name), Some(stat.version)).map_err(refusal)?;
            if client.check_stat(&znodes::topic_config_path(name)).await.map_err(refusal)?.is_some() {
                add(&mut multi, &znodes::topic_config_path(name))?;
            }
            match multi.commit().await {
                Ok(_) => {
                    log("info", "topic_deleted", &[("topic", &name)]);
                    self.wait_until_gone(name, timeout).await;
                    return Ok(());
                }
                // Something changed under it (a state created meanwhile): read again.
                Err(zookeeper_client::MultiWriteError::OperationFailed { .. }) => continue,
                Err(e) => return Err(refusal(e.into())),
            }
        }
        Err((E::UnknownServerError.code(), format!("topic '{name}' kept changing while being deleted")))
    }

    /// Grows a topic to `count` partitions: the new ones placed as a new
    /// topic's would be, with the replication factor of partition 0, written
    /// into the topic znode conditionally; the controller gives them leaders.
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<(), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        let client = self.connected()?;
        let view = view::read(&client).await.map_err(refusal)?;
        let path = znodes::topic_path(name);
        let (data, stat) = match client.get_data(&path).await {
            Ok(d) => d,
            Err(ZkError::NoNode) => {
                return Err((
                    E::UnknownTopicOrPartition.code(),
                    format!("The topic '{name}' does not exist."),
                ))
            }
            Err(e) => return Err(refusal(e)),
        };
        let mut assignment = znodes::assignment_from_json(&data)
            .ok_or((E::UnknownServerError.code(), format!("{path} is not Kafka's topic JSON")))?;
        let current = assignment.len() as i32;
        if count <= current {
            return Err((
                E::InvalidPartitions.code(),
                format!("Topic currently has {current} partitions, which is higher than or equal to the requested {count}."),
            ));
        }
        let rf = assignment.first().map_or(1, |r| r.len() as i32);
        let brokers: Vec<(i32, Option<String>)> =
            view.brokers.values().map(|b| (b.id, b.rack.clone())).collect();
        let placed = placement::assign(&brokers, count, rf, None)
            .map_err(|e| (E::InvalidReplicationFactor.code(), e.to_string()))?;
        assignment.extend(placed.into_iter().skip(current as usize));
        if validate_only {
            return Ok(());
        }
        let json = znodes::assignment_replaced(&data, &assignment)
            .ok_or((E::UnknownServerError.code(), format!("{path} is not Kafka's topic JSON")))?;
        match client.set_data(&path, &json, Some(stat.version)).await {
            Ok(_) => {
                self.wait_until_led(name, count, timeout).await;
                Ok(())
            }
            Err(ZkError::BadVersion) => Err((
                E::ConcurrentTransactions.code(),
                format!("topic '{name}' changed meanwhile: try again"),
            )),
            Err(e) => Err(refusal(e)),
        }
    }
}
