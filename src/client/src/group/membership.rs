//! A member's round trips with its coordinator: finding it again when it
//! moves, the heartbeat thread, and the rejoin (JoinGroup, the leader's
//! assignment, SyncGroup) that a heartbeat's answer or a poll asks for.

use super::*;

impl Shared {
    pub(super) fn check_open(&self) -> Result<()> {
        if let Some(why) = self.fatal.lock().clone() {
            return Err(Error::Kafka { code: FENCED_INSTANCE_ID, message: why });
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "the member of group {:?} has left or was closed",
                self.config.group_id
            )));
        }
        Ok(())
    }

    /// Runs `f` on a connection to the group's coordinator; `f` answers its
    /// result and the answer's error code. A coordinator that moved or cannot
    /// be reached is looked up again, after a backoff, a bounded number of times.
    pub(super) fn coordinated<T>(&self, mut f: impl FnMut(&mut Connection) -> Result<(T, i16)>) -> Result<T> {
        let group = &self.config.group_id;
        let retries = self.cluster.config().retries;
        let mut attempt = 0;
        loop {
            let node = self.cluster.coordinator(0, group);
            let out = node.and_then(|node| {
                self.cluster.with_connection(node, &mut f).inspect_err(|e| {
                    if errors::is_connection_error(e) {
                        self.cluster.disconnect(node);
                    }
                })
            });
            let retry = match &out {
                Ok((_, code)) if is_coordinator_error(*code) => {
                    Some(code_error("FindCoordinator", *code, group))
                }
                Ok(_) => None,
                Err(e) if errors::is_connection_error(e) || errors::is_retriable_error(e) => {
                    Some(e.duplicate())
                }
                Err(_) => None,
            };
            match retry {
                None => return out.map(|(t, _)| t),
                Some(e) => {
                    self.cluster.forget_coordinator(0, group);
                    if attempt >= retries || self.closed.load(Ordering::Acquire) && attempt > 0 {
                        return Err(e);
                    }
                    std::thread::sleep(self.cluster.config().backoff(attempt));
                    attempt += 1;
                }
            }
        }
    }

    /// A code saying the group moved on without this member's knowing:
    /// rejoin (forgetting the member id if the coordinator did).
    pub(super) fn moved_on(&self, code: i16, generation: i32) {
        if !matches!(code, ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID | REBALANCE_IN_PROGRESS) {
            return;
        }
        let mut s = self.state.lock();
        if s.generation != generation {
            return; // answered about a generation already left behind
        }
        if code == UNKNOWN_MEMBER_ID {
            s.member_id.clear();
            s.generation = -1;
        }
        self.rejoin.store(true, Ordering::Release);
    }

    pub(super) fn heartbeat_loop(self: Arc<Self>) {
        let interval = Duration::from_millis(self.config.heartbeat_interval_ms as u64);
        let session = Duration::from_millis(self.config.session_timeout_ms as u64);
        let mut last_ok = Instant::now();
        loop {
            {
                let mut g = self.wake_lock.lock();
                if self.closed.load(Ordering::Acquire) {
                    return;
                }
                self.wake.wait_for(&mut g, interval);
            }
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            if self.joining.load(Ordering::Acquire) {
                last_ok = Instant::now();
                continue;
            }
            let (generation, member_id) = {
                let s = self.state.lock();
                (s.generation, s.member_id.clone())
            };
            if generation < 0 || member_id.is_empty() {
                last_ok = Instant::now();
                continue;
            }
            let request = HeartbeatRequest::default()
                .with_group_id(GroupId(str_bytes(&self.config.group_id)))
                .with_generation_id(generation)
                .with_member_id(str_bytes(&member_id))
                .with_group_instance_id(self.config.instance_id.as_deref().map(str_bytes));
            // One attempt per beat: the next beat is the retry.
            let answer = self.cluster.coordinator(0, &self.config.group_id).and_then(|node| {
                self.cluster.with_connection(node, |c| c.send(&request)).inspect_err(|e| {
                    if errors::is_connection_error(e) {
                        self.cluster.disconnect(node);
                    }
                })
            });
            match answer.map(|a| a.error_code) {
                Ok(errors::NONE) => last_ok = Instant::now(),
                Ok(REBALANCE_IN_PROGRESS) => {
                    // Still a member: the session goes on while it rejoins.
                    last_ok = Instant::now();
                    self.moved_on(REBALANCE_IN_PROGRESS, generation);
                }
                Ok(code @ (ILLEGAL_GENERATION | UNKNOWN_MEMBER_ID)) => self.moved_on(code, generation),
                Ok(FENCED_INSTANCE_ID) => {
                    *self.fatal.lock() = Some(format!(
                        "FENCED_INSTANCE_ID: another member of group {:?} took group.instance.id {:?}",
                        self.config.group_id,
                        self.config.instance_id.as_deref().unwrap_or("")
                    ));
                    return;
                }
                Ok(code) if is_coordinator_error(code) => {
                    self.cluster.forget_coordinator(0, &self.config.group_id);
                }
                Ok(_) | Err(_) => {
                    self.cluster.forget_coordinator(0, &self.config.group_id);
                }
            }
            if last_ok.elapsed() >= session {
                // The coordinator has surely dropped this member by now.
                let mut s = self.state.lock();
                if s.generation == generation {
                    s.generation = -1;
                    if self.config.instance_id.is_none() {
                        s.member_id.clear();
                    }
                    self.rejoin.store(true, Ordering::Release);
                }
                last_ok = Instant::now();
            }
        }
    }

    /// JoinGroup and SyncGroup until a generation's assignment arrives.
    pub(super) fn rejoin_group(&self) -> Result<()> {
        struct Joining<'a>(&'a AtomicBool);
        impl Drop for Joining<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        self.joining.store(true, Ordering::Release);
        let _joining = Joining(&self.joining);
        let config = &self.config;
        let group = &config.group_id;
        // JoinGroup and SyncGroup may wait for the other members up to the
        // rebalance timeout (and an empty group's initial delay).
        let wait = Duration::from_millis(config.rebalance_timeout_ms as u64) + Duration::from_secs(5);
        let deadline = Instant::now() + wait * 2;
        loop {
            self.check_open()?;
            if Instant::now() > deadline {
                return Err(Error::Timeout(
                    (wait * 2).as_millis() as u64,
                    format!("joining group {group:?}: no assignment within twice the rebalance timeout"),
                ));
            }
            // Cleared before the round: a rebalance noticed during it flags again.
            self.rejoin.store(false, Ordering::Release);
            let (member_id, topics) = {
                let s = self.state.lock();
                (s.member_id.clone(), s.topics.clone())
            };
            let metadata = encode_subscription(&topics)?;
            let protocols: Vec<JoinGroupRequestProtocol> = config
                .assignors
                .iter()
                .map(|a| {
                    JoinGroupRequestProtocol::default()
                        .with_name(str_bytes(a))
                        .with_metadata(metadata.clone())
                })
                .collect();
            let joined = self.coordinated(|c| {
                let version = c.version(ApiKey::JoinGroup)?;
                if config.instance_id.is_some() && version < 5 {
                    return Err(Error::Kafka {
                        code: errors::UNSUPPORTED_VERSION,
                        message: format!(
                            "static membership (group.instance.id) needs JoinGroup v5; the broker at {} speaks v{version}",
                            c.addr()
                        ),
                    });
                }
                let request = JoinGroupRequest::default()
                    .with_group_id(GroupId(str_bytes(group)))
                    .with_session_timeout_ms(config.session_timeout_ms)
                    .with_rebalance_timeout_ms(config.rebalance_timeout_ms)
                    .with_member_id(str_bytes(&member_id))
                    .with_group_instance_id(config.instance_id.as_deref().map(str_bytes))
                    .with_protocol_type(str_bytes(PROTOCOL_TYPE))
                    .with_protocols(protocols.clone());
                let answer = c.send_at(&request, version, wait)?;
                let code = answer.error_code;
                Ok((answer, code))
            })?;
            match joined.error_code {
                errors::NONE => {}
                MEMBER_ID_REQUIRED => {
                    // KIP-394: join again at once with the id handed out.
                    self.state.lock().member_id = joined.member_id.to_string();
                    self.rejoin.store(true, Ordering::Release);
                    continue;
                }
                UNKNOWN_MEMBER_ID => {
                    let mut s = self.state.lock();
                    s.member_id.clear();
                    s.generation = -1;
                    continue;
                }
                ILLEGAL_GENERATION | REBALANCE_IN_PROGRESS => continue,
                FENCED_INSTANCE_ID => {
                    let why = format!(
                        "FENCED_INSTANCE_ID from JoinGroup: another member of group {group:?} has group.instance.id {:?}",
                        config.instance_id.as_deref().unwrap_or("")
                    );
                    *self.fatal.lock() = Some(why.clone());
                    return Err(Error::Kafka { code: FENCED_INSTANCE_ID, message: why });
                }
                code => return Err(code_error("JoinGroup", code, group)),
            }
            let member_id = joined.member_id.to_string();
            let generation = joined.generation_id;
            let protocol = joined.protocol_name.as_ref().map(|p| p.to_string());
            let leader = joined.leader.to_string();
            {
                let mut s = self.state.lock();
                s.member_id.clone_from(&member_id);
                s.leader.clone_from(&leader);
                s.protocol.clone_from(&protocol);
            }
            let assignments = if leader == member_id && !joined.members.is_empty() {
                let assignor = protocol.as_deref().unwrap_or("range");
                let members = joined
                    .members
                    .iter()
                    .map(|m| {
                        Ok(Subscriber {
                            member_id: m.member_id.to_string(),
                            instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
                            topics: decode_subscription(&m.metadata)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                let wanted: BTreeSet<String> =
                    members.iter().flat_map(|m| m.topics.iter().cloned()).collect();
                let wanted: Vec<String> = wanted.into_iter().collect();
                let metadata = self.cluster.refresh(Some(&wanted), false)?;
                let counts: BTreeMap<String, i32> = metadata
                    .topics
                    .values()
                    .filter(|t| t.error_code == errors::NONE)
                    .map(|t| (t.name.clone(), t.partitions.len() as i32))
                    .collect();
                let plan = assign(assignor, &members, &counts)?;
                plan.into_iter()
                    .map(|(m, parts)| {
                        Ok(SyncGroupRequestAssignment::default()
                            .with_member_id(str_bytes(&m))
                            .with_assignment(encode_assignment(&parts)?))
                    })
                    .collect::<Result<Vec<_>>>()?
            } else {
                Vec::new()
            };
            let request = SyncGroupRequest::default()
                .with_group_id(GroupId(str_bytes(group)))
                .with_generation_id(generation)
                .with_member_id(str_bytes(&member_id))
                .with_group_instance_id(config.instance_id.as_deref().map(str_bytes))
                .with_protocol_type(Some(str_bytes(PROTOCOL_TYPE)))
                .with_protocol_name(protocol.as_deref().map(str_bytes))
                .with_assignments(assignments);
            let synced = self.coordinated(|c| {
                let version = c.version(ApiKey::SyncGroup)?;
                let answer = c.send_at(&request, version, wait)?;
                let code = answer.error_code;
                Ok((answer, code))
            })?;
            match synced.error_code {
                errors::NONE => {}
                UNKNOWN_MEMBER_ID => {
                    let mut s = self.state.lock();
                    s.member_id.clear();
                    s.generation = -1;
                    continue;
                }
                ILLEGAL_GENERATION | REBALANCE_IN_PROGRESS => continue,
                code => return Err(code_error("SyncGroup", code, group)),
            }
            let partitions = decode_assignment(&synced.assignment)?;
            let mut s = self.state.lock();
            s.generation = generation;
            s.assignment = partitions;
            return Ok(());
        }
    }
}
