//! Group administration: ListGroups, DescribeGroups, DeleteGroups and
//! OffsetDelete, as the admin tools and clients ask them.

use super::*;

impl Coordinator {
    /// ListGroups: every group but those being deleted.
    pub fn list_groups(&self) -> Vec<GroupListing> {
        let groups = self.groups.lock();
        let mut out: Vec<GroupListing> = groups
            .values()
            .filter(|g| !g.is(GroupState::Dead))
            .map(|g| GroupListing {
                group_id: g.id.clone(),
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                state: g.state,
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DescribeGroups: an unknown group is described as Dead with no error,
    /// as Kafka does; members' metadata and assignments only when Stable.
    pub fn describe_groups(&self, ids: &[String]) -> Vec<GroupDescription> {
        let groups = self.groups.lock();
        ids.iter()
            .map(|id| {
                let mut d = GroupDescription {
                    error: NONE,
                    group_id: id.clone(),
                    state: GroupState::Dead,
                    protocol_type: String::new(),
                    protocol: String::new(),
                    generation_id: -1,
                    members: Vec::new(),
                };
                if let Err(code) = check_group_id(id, true).and_then(|()| self.serving(id)) {
                    d.error = code;
                    return d;
                }
                let Some(g) = groups.get(id) else { return d };
                let stable = g.is(GroupState::Stable);
                d.state = g.state;
                d.protocol_type = g.protocol_type.clone().unwrap_or_default();
                d.generation_id = g.generation_id;
                if stable {
                    d.protocol = g.protocol_name.clone().unwrap_or_default();
                }
                d.members = g
                    .members
                    .values()
                    .map(|m| MemberDescription {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        metadata: if stable {
                            m.metadata(&d.protocol).cloned().unwrap_or_default()
                        } else {
                            Bytes::new()
                        },
                        assignment: if stable { m.assignment.clone() } else { Bytes::new() },
                    })
                    .collect();
                d
            })
            .collect()
    }

    /// DeleteGroups: empty groups are deleted with their offsets (tombstones
    /// written); others get NON_EMPTY_GROUP, unknown ones GROUP_ID_NOT_FOUND.
    pub async fn delete_groups(self: &Arc<Self>, ids: &[String]) -> Vec<(String, i16)> {
        let now = now_ms();
        let mut out = Vec::with_capacity(ids.len());
        let mut doomed = Vec::new();
        {
            let mut groups = self.groups.lock();
            for id in ids {
                let code = if let Err(code) = check_group_id(id, true).and_then(|()| self.serving(id)) {
                    code
                } else {
                    match groups.get_mut(id) {
                        None => GROUP_ID_NOT_FOUND,
                        Some(g) if g.is(GroupState::Dead) => GROUP_ID_NOT_FOUND,
                        Some(g) if g.is(GroupState::Empty) => {
                            g.transition(GroupState::Dead, now);
                            doomed.push(GroupWrite {
                                group: id.clone(),
                                seq: self.seq.fetch_add(1, Ordering::Relaxed),
                                value: None,
                                offset_tombstones: g.offsets.keys().cloned().collect(),
                            });
                            NONE
                        }
                        Some(_) => NON_EMPTY_GROUP,
                    }
                };
                out.push((id.clone(), code));
            }
        }
        for w in doomed {
            let id = w.group.clone();
            let result = self.write_group(w).await;
            let mut groups = self.groups.lock();
            match result {
                Ok(()) => {
                    if groups.get(&id).is_some_and(|g| g.is(GroupState::Dead)) {
                        groups.remove(&id);
                    }
                }
                Err(code) => {
                    if let Some(g) = groups.get_mut(&id) {
                        g.transition(GroupState::Empty, now);
                    }
                    for r in out.iter_mut().filter(|r| r.0 == id) {
                        r.1 = code;
                    }
                }
            }
        }
        out
    }

    /// OffsetDelete: removes committed offsets of partitions the group does
    /// not consume (GROUP_SUBSCRIBED_TO_TOPIC for those it does).
    #[allow(clippy::type_complexity)]
    pub async fn delete_offsets(
        self: &Arc<Self>,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> std::result::Result<Vec<(String, i32, i16)>, i16> {
        check_group_id(group_id, true)?;
        self.serving(group_id)?;
        let mut out = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        {
            let mut groups = self.groups.lock();
            let g = match groups.get_mut(group_id) {
                None => return Err(GROUP_ID_NOT_FOUND),
                Some(g) if g.is(GroupState::Dead) => return Err(GROUP_ID_NOT_FOUND),
                Some(g) => g,
            };
            let subscribed = match g.state {
                GroupState::Empty => Some(Vec::new()),
                _ if g.protocol_type.as_deref() == Some("consumer") => g.subscribed_topics(),
                _ => return Err(NON_EMPTY_GROUP),
            };
            for (t, p) in partitions {
                let code = if self.store.partition(t, *p).is_err() {
                    UNKNOWN_TOPIC_OR_PARTITION
                } else if subscribed.as_ref().is_none_or(|s| s.contains(t)) {
                    GROUP_SUBSCRIBED_TO_TOPIC
                } else {
                    if g.offsets.remove(&(t.clone(), *p)).is_some() {
                        tombstones.push(CoordinatorRecord::Offset {
                            key: OffsetCommitKey {
                                group: group_id.to_string(),
                                topic: t.clone(),
                                partition: *p,
                            },
                            value: None,
                        });
                    }
                    NONE
                };
                out.push((t.clone(), *p, code));
            }
        }
        if !tombstones.is_empty() {
            let me = self.clone();
            let group = group_id.to_string();
            let written = match blocking(move || me.write_records(&group, tombstones, None)).await {
                Ok(w) => self.replicated(w).await,
                Err(e) => {
                    log("warn", "offset_delete_failed", &[("group", &group_id), ("error", &e)]);
                    Err(write_error_code(&e))
                }
            };
            if let Err(code) = written {
                for r in out.iter_mut().filter(|r| r.2 == NONE) {
                    r.2 = code;
                }
            }
        }
        Ok(out)
    }

    /// Expires members and member ids, completes due joins and (every
    /// `offsets.retention.check.interval.ms`) removes expired offsets and the
    /// empty groups left without any. Returns the writes to make.
    pub(crate) fn tick_at(&self, now: i64) -> Vec<PendingWrite> {
        let mut writes = Vec::new();
        let retention = now >= self.next_retention_check.load(Ordering::Relaxed);
        if retention {
            self.next_retention_check
                .store(now.saturating_add(self.cfg.retention_check_interval_ms), Ordering::Relaxed);
        }
        let mut groups = self.groups.lock();
        let mut gone = Vec::new();
        for g in groups.values_mut() {
            let mut ctx = self.ctx(now);
            for id in rebalance::expire(g, &mut ctx) {
                log("info", "group_member_expired", &[("group", &g.id), ("member", &id)]);
            }
            writes.extend(Self::group_writes(ctx.writes));
            if !retention || g.is(GroupState::Dead) {
                continue;
            }
            let expired = offsets::expired_offsets(g, now, self.cfg.retention_ms);
            for tp in &expired {
                g.offsets.remove(tp);
            }
            if g.is(GroupState::Empty)
                && g.offsets.is_empty()
                && g.members.is_empty()
                && g.pending_members.is_empty()
            {
                gone.push(g.id.clone());
                if g.generation_id == 0 && g.protocol_type.is_none() && expired.is_empty() {
                    continue; // never written: nothing to delete in the log
                }
                g.transition(GroupState::Dead, now);
                writes.push((
                    g.id.clone(),
                    Vec::new(),
                    Some(GroupWrite {
                        group: g.id.clone(),
                        seq: self.seq.fetch_add(1, Ordering::Relaxed),
                        value: None,
                        offset_tombstones: expired,
                    }),
                ));
            } else if !expired.is_empty() {
                let records = expired
                    .into_iter()
                    .map(|(topic, partition)| CoordinatorRecord::Offset {
                        key: OffsetCommitKey { group: g.id.clone(), topic, partition },
                        value: None,
                    })
                    .collect();
                writes.push((g.id.clone(), records, None));
            }
        }
        for id in gone {
            groups.remove(&id);
        }
        writes
    }
}
