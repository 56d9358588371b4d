//! Topic administration in ZooKeeper mode: a topic's znodes written (config
//! first, then the assignment, as Kafka does), and the wait until this
//! broker's view shows the controller's answer.

use super::*;

/// Where a new topic's partitions go.
pub enum Placing {
    /// Placed over the live brokers as Kafka places them (rack-aware).
    Auto { partitions: i32, replication_factor: i32 },
    /// Each partition's replicas as given, preferred leader first.
    Manual(Vec<Vec<i32>>),
}

impl Replication {
    /// Creates a topic's znodes (config first, then the assignment, as Kafka
    /// does); the controller then gives its partitions leaders. Waits up to
    /// `timeout` until this broker's view shows a leader for each.
    pub async fn create_topic(
        &self,
        name: &str,
        placing: Placing,
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
        let assignment = match placing {
            Placing::Auto { partitions, replication_factor } => {
                placement::assign(&view.racks(), partitions, replication_factor, None)
                    .map_err(|e| (E::InvalidReplicationFactor.code(), e.to_string()))?
            }
            Placing::Manual(assignment) => {
                let registered = view.brokers.keys().copied().collect();
                placement::check_manual(&assignment, &registered, None)
                    .map_err(|m| (E::InvalidReplicaAssignment.code(), m))?;
                assignment
            }
        };
        let partitions = assignment.len() as i32;
        if validate_only {
            return Ok(());
        }
        let exists = || (E::TopicAlreadyExists.code(), format!("Topic '{name}' already exists."));
        if client.check_stat(&znodes::topic_path(name)).await.map_err(refusal)?.is_some() {
            return Err(exists());
        }
        let data = znodes::assignment_to_json(&assignment);
        if !write_topic(&client, name, config, &assignment, &data).await? {
            return Err(exists());
        }
        self.wait_until_led(name, partitions, timeout).await;
        Ok(())
    }

    /// The broker coordinating `group`, the leader of its partition of
    /// `__consumer_offsets`, with its address; or Kafka's code and message
    /// for why none is. A cluster without the topic has it created (as
    /// Kafka's first FindCoordinator does) and is told to ask again.
    pub async fn group_coordinator(
        &self,
        group: &str,
        listener: &str,
    ) -> Result<(i32, String, i32), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        use seglog_core::group::{offsets_partition, OFFSETS_TOPIC};
        let view = self.view();
        let Some(topic) = view.topics.get(OFFSETS_TOPIC) else {
            self.create_offsets_topic().await?;
            return Err((E::CoordinatorNotAvailable.code(), format!("{OFFSETS_TOPIC} is being created")));
        };
        let p = offsets_partition(group, topic.assignment.len() as i32);
        let leader = topic.states.get(p as usize).and_then(|s| s.as_ref()).map_or(-1, |s| s.state.leader);
        match view.brokers.get(&leader).and_then(|b| b.endpoint(listener)) {
            Some(e) => Ok((leader, e.host.clone(), e.port)),
            None => Err((
                E::CoordinatorNotAvailable.code(),
                format!("partition {p} of {OFFSETS_TOPIC}, which holds group {group:?}, has no leader"),
            )),
        }
    }

    /// Creates `__consumer_offsets` in ZooKeeper as Kafka's coordinator does
    /// (its config, then its assignment under a new topic id):
    /// `offsets.topic.num.partitions` partitions placed as any topic's are, at
    /// `offsets.topic.replication.factor`, refused while fewer brokers are
    /// live. A store that holds the topic already (written before it joined a
    /// cluster) registers it with its own id and partition count, on this
    /// broker alone, where its committed offsets are.
    async fn create_offsets_topic(&self) -> Result<(), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        use seglog_core::group::{OFFSETS_TOPIC as NAME, OFFSETS_TOPIC_CONFIG};
        let client = self.connected()?;
        let view = view::read(&client).await.map_err(refusal)?;
        if view.topics.contains_key(NAME) {
            return Ok(());
        }
        let (id, assignment) = match self.store.topic(NAME) {
            Ok(t) => (t.id.clone(), vec![vec![self.node_id]; t.partitions.len()]),
            Err(_) => {
                let rf = self.config.offsets_topic_replication_factor;
                let brokers = view.racks();
                if brokers.len() < rf as usize {
                    return Err((
                        E::CoordinatorNotAvailable.code(),
                        format!(
                            "{} live broker(s), fewer than the {rf} replicas of {NAME} \
                             (offsets.topic.replication.factor); it is created once enough brokers are up",
                            brokers.len()
                        ),
                    ));
                }
                let partitions = self.config.offsets_topic_num_partitions;
                let assignment = placement::assign(&brokers, partitions, i32::from(rf), None)
                    .map_err(|e| (E::CoordinatorNotAvailable.code(), e.to_string()))?;
                (znodes::new_topic_id(), assignment)
            }
        };
        let config: BTreeMap<String, String> =
            OFFSETS_TOPIC_CONFIG.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let data = znodes::assignment_with_id_to_json(&assignment, &id);
        // Made meanwhile by another member: as good.
        write_topic(&client, NAME, &config, &assignment, &data).await.map(|_| ())
    }

    /// Waits up to `timeout` until this broker's view is one `done` accepts.
    pub async fn wait_for_view(&self, done: impl Fn(&super::ClusterView) -> bool, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut changed = self.changed.subscribe();
        while !done(&self.view()) && Instant::now() < deadline {
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
        let version = self
            .write_config(
                &znodes::topic_config_path(name),
                &znodes::config_to_json(config),
                &format!("topics/{name}"),
            )
            .await?;
        // This broker's view has it at once too (what a member without a
        // replica of the topic describes), unless a newer one came meanwhile.
        {
            let mut current = self.view.write();
            if current.topics.get(name).is_some_and(|t| t.config_version < version) {
                let mut next = ClusterView::clone(&current);
                if let Some(t) = next.topics.get_mut(name) {
                    t.config = config.clone();
                    t.config_version = version;
                }
                *current = Arc::new(next);
            }
        }
        tokio::task::block_in_place(|| self.apply_config(name, config, version))
            .map_err(|e| (E::UnknownServerError.code(), e.to_string()))
    }

    /// Replaces a dynamic broker config entity (`<default>` or a broker id)
    /// in `/config/brokers/<entity>`; every member takes it from its view.
    pub async fn set_broker_config(
        &self,
        entity: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), (i16, String)> {
        let data = znodes::config_to_json(config);
        self.write_config(&znodes::broker_config_path(entity), &data, &format!("brokers/{entity}")).await?;
        Ok(())
    }

    /// Changes a user's configs in `/config/users/<user>` (see `update_entity_config`).
    /// A user whose name Kafka's sanitizing changes may still have a znode
    /// under its raw name, as brokers before sanitizing wrote it: its
    /// configs are carried over to the sanitized one, and it is deleted.
    pub async fn update_user_config(
        &self,
        user: &str,
        mut change: impl FnMut(&BTreeMap<String, String>) -> BTreeMap<String, String>,
    ) -> Result<(), (i16, String)> {
        let sanitized = znodes::user_config_path(user);
        let raw = format!("{}/{user}", znodes::CONFIG_USERS);
        let client = self.connected()?;
        let legacy = match (raw != sanitized && !user.contains('/')).then_some(()) {
            Some(()) => {
                client.get_data(&raw).await.ok().map(|(d, stat)| (znodes::config_from_json(&d), stat.version))
            }
            None => None,
        };
        let seed = legacy.as_ref().map(|(c, _)| c.clone());
        let entity_path = sanitized.trim_start_matches("/config/").to_string();
        self.update_entity_config(&entity_path, |current| match (&seed, current.is_empty()) {
            (Some(old), true) => change(old),
            _ => change(current),
        })
        .await?;
        if let Some((_, version)) = legacy {
            let _ = client.delete(&raw, Some(version)).await;
        }
        Ok(())
    }

    /// Changes the configs of a user or client entity, `/config/<entity_path>`
    /// (`users/U`, `clients/C`, `users/U/clients/C`, names sanitized), to
    /// what `change` makes of them, conditionally on the znode's version (a
    /// concurrent change is read again and `change` applied to it). The znode
    /// and its parents are created as needed; an empty result deletes it,
    /// unless it has entities under it (a user's clients), as Kafka does.
    pub async fn update_entity_config(
        &self,
        entity_path: &str,
        mut change: impl FnMut(&BTreeMap<String, String>) -> BTreeMap<String, String>,
    ) -> Result<(), (i16, String)> {
        let client = self.connected()?;
        let path = format!("/config/{entity_path}");
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        for _ in 0..10 {
            let (current, version) = match client.get_data(&path).await {
                Ok((d, stat)) => (znodes::config_from_json(&d), Some(stat.version)),
                Err(ZkError::NoNode) => (BTreeMap::new(), None),
                Err(e) => return Err(refusal(e)),
            };
            let wanted = change(&current);
            if version.is_some() && wanted == current {
                return Ok(());
            }
            let written = match (version, wanted.is_empty()) {
                (None, true) => return Ok(()),
                (Some(v), true) => match client.delete(&path, Some(v)).await {
                    Err(ZkError::NotEmpty) => {
                        client.set_data(&path, &znodes::config_to_json(&wanted), Some(v)).await.map(drop)
                    }
                    other => other,
                },
                (Some(v), false) => {
                    client.set_data(&path, &znodes::config_to_json(&wanted), Some(v)).await.map(drop)
                }
                (None, false) => {
                    match client.create(&path, &znodes::config_to_json(&wanted), &persistent).await {
                        Err(ZkError::NoNode) => {
                            // A parent is missing (`/config/users` on a new
                            // cluster, or the user of a user's client id).
                            create_parents(&client, &path, &persistent).await;
                            Err(ZkError::BadVersion)
                        }
                        other => other.map(drop),
                    }
                }
            };
            match written {
                Ok(()) => {
                    self.announce_config_change(&client, entity_path).await?;
                    return Ok(());
                }
                Err(ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode) => continue,
                Err(e) => return Err(refusal(e)),
            }
        }
        Err((
            kafka_protocol::ResponseError::UnknownServerError.code(),
            format!("the configs of {entity_path} kept changing under this change"),
        ))
    }

    /// Changes the ACLs of one resource pattern (`change` applied to them,
    /// conditionally on the znode's version), creating the znode and its
    /// parents or deleting it when none are left; with a Kafka broker live,
    /// the change notification its authorizer reads.
    pub async fn update_acls(
        &self,
        resource: &crate::security::acl::Resource,
        change: impl Fn(&mut std::collections::BTreeSet<crate::security::acl::Ace>),
    ) -> Result<(), (i16, String)> {
        use crate::security::acl;
        let client = self.connected()?;
        let path = acl::znode(resource);
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        for _ in 0..10 {
            let (mut aces, version) = match client.get_data(&path).await {
                Ok((d, stat)) => {
                    (acl::from_json(&serde_json::from_slice(&d).unwrap_or_default()), Some(stat.version))
                }
                Err(ZkError::NoNode) => (Default::default(), None),
                Err(e) => return Err(refusal(e)),
            };
            let before = aces.clone();
            change(&mut aces);
            if aces == before {
                return Ok(());
            }
            let data = acl::to_json(&aces).to_string().into_bytes();
            let written = match (version, aces.is_empty()) {
                (None, true) => Ok(()),
                (Some(v), true) => client.delete(&path, Some(v)).await,
                (Some(v), false) => client.set_data(&path, &data, Some(v)).await.map(drop),
                (None, false) => match client.create(&path, &data, &persistent).await {
                    Err(ZkError::NoNode) => {
                        // Its parents first (`/kafka-acl/Topic`, ...).
                        create_parents(&client, &path, &persistent).await;
                        Err(ZkError::BadVersion)
                    }
                    other => other.map(drop),
                },
            };
            match written {
                Ok(()) => {
                    if self.view().has_kafka_broker() {
                        let (parent, note) = acl::change_notification(resource);
                        let sequential =
                            CreateMode::PersistentSequential.with_acls(zookeeper_client::Acls::anyone_all());
                        let _ = client.create(parent, b"", &persistent).await;
                        client
                            .create(&format!("{parent}/acl_changes_"), &note, &sequential)
                            .await
                            .map_err(refusal)?;
                    }
                    return Ok(());
                }
                Err(ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode) => continue,
                Err(e) => return Err(refusal(e)),
            }
        }
        Err((
            kafka_protocol::ResponseError::UnknownServerError.code(),
            format!("the ACLs of {} kept changing under this change", acl::znode(resource)),
        ))
    }

    /// Writes a config znode (its version after the write) and, while a Kafka
    /// broker is a member, the `/config/changes` notification by which Kafka
    /// brokers learn of it (Kafka's brokers delete old notifications; with
    /// none live, nothing would, so none is written).
    async fn write_config(&self, path: &str, data: &[u8], entity_path: &str) -> Result<i32, (i16, String)> {
        let client = self.connected()?;
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        let version = match client.set_data(path, data, None).await {
            Ok(stat) => stat.version,
            Err(ZkError::NoNode) => {
                client.create(path, data, &persistent).await.map_err(refusal)?;
                0
            }
            Err(e) => return Err(refusal(e)),
        };
        self.announce_config_change(&client, entity_path).await?;
        Ok(version)
    }

    /// The `/config/changes` notification of a changed entity, while a Kafka
    /// broker is a member to read (and delete) it.
    async fn announce_config_change(&self, client: &Client, entity_path: &str) -> Result<(), (i16, String)> {
        if self.view().has_kafka_broker() {
            let sequential = CreateMode::PersistentSequential.with_acls(zookeeper_client::Acls::anyone_all());
            let change = format!("{}/config_change_", znodes::CONFIG_CHANGES);
            client
                .create(&change, &znodes::config_change_to_json(entity_path), &sequential)
                .await
                .map_err(refusal)?;
        }
        Ok(())
    }

    /// Deletes a topic's znodes (its partition states, assignment and
    /// config) in one multi; every member then deletes its replicas.
    pub async fn delete_topic(&self, name: &str, timeout: Duration) -> Result<(), (i16, String)> {
        use kafka_protocol::ResponseError as E;
        let client = self.connected()?;
        let missing = || (E::UnknownTopicOrPartition.code(), format!("The topic '{name}' does not exist."));
        if self.view().has_kafka_broker() {
            if client.check_stat(&znodes::topic_path(name)).await.map_err(refusal)?.is_none() {
                return Err(missing());
            }
            return self.delete_through_kafka_controller(&client, name, timeout).await;
        }
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

    /// A deletion in a cluster with Kafka brokers, asked of the Kafka
    /// controller as Kafka's admin client does it: `/admin/delete_topics/T`.
    /// The controller stops every replica (StopReplica with delete) before it
    /// removes the topic's znodes, so Kafka brokers delete their logs too.
    async fn delete_through_kafka_controller(
        &self,
        client: &Client,
        name: &str,
        timeout: Duration,
    ) -> Result<(), (i16, String)> {
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        match client.mkdir(znodes::DELETE_TOPICS, &persistent).await {
            Ok(()) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(refusal(e)),
        }
        let path = format!("{}/{name}", znodes::DELETE_TOPICS);
        match client.create(&path, b"", &persistent).await {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(refusal(e)),
        }
        log("info", "topic_deletion_asked", &[("topic", &name)]);
        self.wait_until_gone(name, timeout).await;
        Ok(())
    }

    /// Grows a topic to `count` partitions: the new ones placed as a new
    /// topic's would be, with the replication factor of partition 0, written
    /// into the topic znode conditionally; the controller gives them leaders.
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        manual: Option<Vec<Vec<i32>>>,
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
        match manual {
            None => {
                let placed = placement::assign(&view.racks(), count, rf, None)
                    .map_err(|e| (E::InvalidReplicationFactor.code(), e.to_string()))?;
                assignment.extend(placed.into_iter().skip(current as usize));
            }
            Some(added) => {
                if added.len() as i32 != count - current {
                    return Err((
                        E::InvalidReplicaAssignment.code(),
                        format!(
                            "Increasing the number of partitions by {} but {} assignments provided.",
                            count - current,
                            added.len()
                        ),
                    ));
                }
                let registered = view.brokers.keys().copied().collect();
                placement::check_manual(&added, &registered, Some(rf as usize))
                    .map_err(|m| (E::InvalidReplicaAssignment.code(), m))?;
                assignment.extend(added);
            }
        }
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

/// Writes a new topic's znodes as Kafka does: its config (replacing one a
/// deleted topic left), then `data`, its assignment. Ok(false) if the
/// topic's znode was there already.
async fn write_topic(
    client: &Client,
    name: &str,
    config: &BTreeMap<String, String>,
    assignment: &[Vec<i32>],
    data: &[u8],
) -> Result<bool, (i16, String)> {
    let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let path = znodes::topic_config_path(name);
    let json = znodes::config_to_json(config);
    match client.create(&path, &json, &persistent).await {
        Ok(_) => {}
        Err(ZkError::NodeExists) => {
            client.set_data(&path, &json, None).await.map_err(refusal)?;
        }
        Err(e) => return Err(refusal(e)),
    }
    match client.create(&znodes::topic_path(name), data, &persistent).await {
        Ok(_) => {}
        Err(ZkError::NodeExists) => return Ok(false),
        Err(e) => return Err(refusal(e)),
    }
    log(
        "info",
        "topic_created",
        &[("topic", &name), ("partitions", &assignment.len()), ("assignment", &format!("{assignment:?}"))],
    );
    Ok(true)
}

/// Creates the znodes above `path` that are missing (each empty); one made
/// meanwhile by another member is as good.
async fn create_parents(client: &Client, path: &str, mode: &zookeeper_client::CreateOptions<'_>) {
    let mut at = String::new();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    for part in parts.split_last().map_or(&[][..], |(_, above)| above) {
        at.push('/');
        at.push_str(part);
        let _ = client.create(&at, b"", mode).await;
    }
}
