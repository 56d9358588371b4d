//! Admin requests: CreateTopics and DeleteTopics, sent to the controller as
//! Kafka's admin client does; and consumer groups as kafka-consumer-groups
//! manages them: ListGroups (every broker), then DescribeGroups, OffsetFetch,
//! OffsetCommit and DeleteGroups at each group's coordinator. A broker that
//! does not serve one answers with UNSUPPORTED_VERSION naming the API.

use std::collections::BTreeMap;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteGroupsRequest, DeleteTopicsRequest, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use seglog_core::error::{Error, Result};

use crate::cluster::Cluster;
use crate::errors::{self, About};

/// A topic to create: -1 partitions or replication factor for the broker's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

fn timeout_ms(cluster: &Cluster) -> i32 {
    i32::try_from(cluster.config().request_timeout.as_millis()).unwrap_or(i32::MAX)
}

/// The node to send admin requests to: the controller, or any broker.
fn controller(cluster: &Cluster) -> Result<i32> {
    let m = cluster.refresh(Some(&[]), false)?;
    Ok(if m.brokers.contains_key(&m.controller_id) {
        m.controller_id
    } else {
        m.brokers.keys().next().copied().unwrap_or(-1)
    })
}

/// Creates `topics`; one result per topic, in order.
pub fn create_topics(cluster: &Cluster, topics: &[NewTopic]) -> Result<Vec<Result<()>>> {
    let request = CreateTopicsRequest::default().with_timeout_ms(timeout_ms(cluster)).with_topics(
        topics
            .iter()
            .map(|t| {
                CreatableTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.name.clone())))
                    .with_num_partitions(t.partitions)
                    .with_replication_factor(t.replication_factor)
                    .with_configs(
                        t.configs
                            .iter()
                            .map(|(k, v)| {
                                CreatableTopicConfig::default()
                                    .with_name(StrBytes::from_string(k.clone()))
                                    .with_value(Some(StrBytes::from_string(v.clone())))
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    let answer = cluster.send(controller(cluster)?, &request)?;
    Ok(topics
        .iter()
        .map(|t| {
            let r = answer.topics.iter().find(|r| r.name.0.as_str() == t.name);
            match r {
                Some(r) if r.error_code == errors::NONE => Ok(()),
                Some(r) => {
                    let message = r.error_message.as_ref().map(|m| m.to_string());
                    Err(errors::from_code(
                        r.error_code,
                        About {
                            api: "CreateTopics",
                            topic: &t.name,
                            partition: -1,
                            message: message.as_deref(),
                        },
                    ))
                }
                None => Err(errors::protocol(
                    "the controller",
                    format!("no CreateTopics answer for {:?}", t.name),
                )),
            }
        })
        .collect())
}

/// Deletes `topics`; one result per topic, in order.
pub fn delete_topics(cluster: &Cluster, topics: &[String]) -> Result<Vec<Result<()>>> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(timeout_ms(cluster))
        .with_topic_names(topics.iter().map(|t| TopicName(StrBytes::from_string(t.clone()))).collect());
    let answer = cluster.send(controller(cluster)?, &request)?;
    for t in topics {
        cluster.invalidate(t);
    }
    Ok(topics
        .iter()
        .map(|t| {
            let r = answer.responses.iter().find(|r| r.name.as_ref().is_some_and(|n| n.0.as_str() == t));
            match r {
                Some(r) if r.error_code == errors::NONE => Ok(()),
                Some(r) => {
                    let message = r.error_message.as_ref().map(|m| m.to_string());
                    Err(errors::from_code(
                        r.error_code,
                        About { api: "DeleteTopics", topic: t, partition: -1, message: message.as_deref() },
                    ))
                }
                None => Err(errors::protocol("the controller", format!("no DeleteTopics answer for {t:?}"))),
            }
        })
        .collect())
}

/// A group as ListGroups names it; `state` only from brokers that say it (v4+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: Option<String>,
}

/// A member of a group as DescribeGroups shows it; metadata and assignment
/// are the group protocol's bytes (for a consumer group, its subscription and
/// its ConsumerProtocolAssignment), empty unless the group is Stable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// A group as DescribeGroups shows it: an unknown group is "Dead".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// (offset, metadata) per (topic, partition), as committed.
pub type GroupOffsets = seglog_core::group::CommittedOffsets;

const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;

/// The error for a group-level code, naming the API and the group.
fn group_error(code: i16, api: &str, group: &str, message: Option<&str>) -> Error {
    let broker_says = message.filter(|m| !m.is_empty()).map(|m| format!(": {m}")).unwrap_or_default();
    Error::Kafka {
        code,
        message: format!("{} from {api} for group {group:?}{broker_says}", errors::code_name(code)),
    }
}

/// Runs `op` against the coordinator of `group`; `op` answers Err(code) for a
/// group-level error code. A moved or loading coordinator, or a cut
/// connection, is asked for again and retried, up to `config.retries` times.
fn at_coordinator<T>(
    cluster: &Cluster,
    group: &str,
    api: &str,
    mut op: impl FnMut(i32) -> Result<std::result::Result<T, (i16, Option<String>)>>,
) -> Result<T> {
    let mut attempt = 0;
    loop {
        let node = cluster.coordinator(0, group)?;
        let failure = match op(node) {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err((code, message))) => {
                let e = group_error(code, api, group, message.as_deref());
                let moved = matches!(
                    code,
                    NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS
                );
                if !moved {
                    return Err(e);
                }
                e
            }
            Err(e) if errors::is_connection_error(&e) => {
                cluster.disconnect(node);
                e
            }
            Err(e) => return Err(e),
        };
        cluster.forget_coordinator(0, group);
        if attempt >= cluster.config().retries {
            return Err(failure);
        }
        std::thread::sleep(cluster.config().backoff(attempt));
        attempt += 1;
    }
}

fn group_id(group: &str) -> GroupId {
    GroupId(StrBytes::from_string(group.to_string()))
}

/// Every group of every broker (ListGroups goes to each), sorted by id.
pub fn list_groups(cluster: &Cluster) -> Result<Vec<ListedGroup>> {
    let m = cluster.refresh(Some(&[]), false)?;
    let mut out: BTreeMap<String, ListedGroup> = BTreeMap::new();
    for node in m.brokers.keys() {
        let answer = cluster.send(*node, &ListGroupsRequest::default())?;
        if answer.error_code != errors::NONE {
            return Err(errors::from_code(
                answer.error_code,
                About { api: "ListGroups", topic: "", partition: -1, message: None },
            ));
        }
        for g in answer.groups {
            let state = Some(g.group_state.to_string()).filter(|s| !s.is_empty());
            let id = g.group_id.0.to_string();
            out.insert(
                id.clone(),
                ListedGroup { group_id: id, protocol_type: g.protocol_type.to_string(), state },
            );
        }
    }
    Ok(out.into_values().collect())
}

/// Describes each group at its coordinator; one result per group, in order.
pub fn describe_groups(cluster: &Cluster, groups: &[String]) -> Vec<Result<GroupDescription>> {
    groups
        .iter()
        .map(|group| {
            at_coordinator(cluster, group, "DescribeGroups", |node| {
                let request = DescribeGroupsRequest::default().with_groups(vec![group_id(group)]);
                let answer = cluster.send(node, &request)?;
                let Some(g) = answer.groups.into_iter().find(|g| g.group_id.0.as_str() == group) else {
                    return Err(errors::protocol(
                        "the coordinator",
                        format!("no DescribeGroups answer for {group:?}"),
                    ));
                };
                if g.error_code != errors::NONE {
                    return Ok(Err((g.error_code, g.error_message.map(|m| m.to_string()))));
                }
                Ok(Ok(GroupDescription {
                    group_id: group.clone(),
                    state: g.group_state.to_string(),
                    protocol_type: g.protocol_type.to_string(),
                    protocol: g.protocol_data.to_string(),
                    members: g
                        .members
                        .into_iter()
                        .map(|m| MemberDescription {
                            member_id: m.member_id.to_string(),
                            group_instance_id: m.group_instance_id.map(|i| i.to_string()),
                            client_id: m.client_id.to_string(),
                            client_host: m.client_host.to_string(),
                            metadata: m.member_metadata.to_vec(),
                            assignment: m.member_assignment.to_vec(),
                        })
                        .collect(),
                }))
            })
        })
        .collect()
}

/// OffsetFetch's topics for `partitions`, each topic once with its partitions
/// (what a group member and the admin calls both ask).
pub(crate) fn offset_fetch_topics(partitions: &[(String, i32)]) -> Vec<OffsetFetchRequestTopic> {
    let mut topics: Vec<OffsetFetchRequestTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partition_indexes.push(*partition),
            None => topics.push(
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![*partition]),
            ),
        }
    }
    topics
}

/// The committed offsets of `group`: of `partitions`, or (None) of every
/// partition it has committed. Partitions without a committed offset are absent.
pub fn fetch_offsets(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[(String, i32)]>,
) -> Result<GroupOffsets> {
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(partitions.map(offset_fetch_topics));
    at_coordinator(cluster, group, "OffsetFetch", |node| {
        let answer = cluster.send(node, &request)?;
        if answer.error_code != errors::NONE {
            return Ok(Err((answer.error_code, None)));
        }
        Ok(Ok(committed_offsets(&answer)?))
    })
}

/// The offsets an OffsetFetch answer holds (partitions without a committed
/// offset left out); the first partition's error fails it.
pub(crate) fn committed_offsets(answer: &OffsetFetchResponse) -> Result<GroupOffsets> {
    let mut out = GroupOffsets::new();
    for t in &answer.topics {
        for p in &t.partitions {
            if p.error_code != errors::NONE {
                let about = About {
                    api: "OffsetFetch",
                    topic: t.name.0.as_str(),
                    partition: p.partition_index,
                    message: None,
                };
                return Err(errors::from_code(p.error_code, about));
            }
            if p.committed_offset >= 0 {
                let metadata = p.metadata.as_ref().map(|m| m.to_string()).unwrap_or_default();
                out.insert((t.name.0.to_string(), p.partition_index), (p.committed_offset, metadata));
            }
        }
    }
    Ok(out)
}

/// Commits `offsets` for `group` as a tool does, not as a member: generation
/// -1 and no member id, which a coordinator takes only while the group has no
/// members (else UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION). The first
/// partition's error fails the whole call.
pub fn commit_offsets(cluster: &Cluster, group: &str, offsets: &GroupOffsets) -> Result<()> {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for ((topic, partition), (offset, metadata)) in offsets {
        let p = OffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_leader_epoch(-1)
            .with_committed_metadata(Some(StrBytes::from_string(metadata.clone())));
        match topics.last_mut() {
            Some(t) if t.name.0.as_str() == topic => t.partitions.push(p),
            _ => topics.push(
                OffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(group_id(group))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::default())
        .with_retention_time_ms(-1)
        .with_topics(topics);
    at_coordinator(cluster, group, "OffsetCommit", |node| {
        let answer = cluster.send(node, &request)?;
        for t in &answer.topics {
            for p in &t.partitions {
                match p.error_code {
                    errors::NONE => {}
                    // Partition-level errors about the topic name it; the rest are the group's.
                    code @ (3 | 12) => {
                        return Err(errors::from_code(
                            code,
                            About {
                                api: "OffsetCommit",
                                topic: t.name.0.as_str(),
                                partition: p.partition_index,
                                message: None,
                            },
                        ))
                    }
                    code => return Ok(Err((code, None))),
                }
            }
        }
        Ok(Ok(()))
    })
}

/// Deletes each group (with its offsets) at its coordinator, which refuses
/// one with members (NON_EMPTY_GROUP); one result per group, in order.
pub fn delete_groups(cluster: &Cluster, groups: &[String]) -> Vec<Result<()>> {
    groups
        .iter()
        .map(|group| {
            at_coordinator(cluster, group, "DeleteGroups", |node| {
                let request = DeleteGroupsRequest::default().with_groups_names(vec![group_id(group)]);
                let answer = cluster.send(node, &request)?;
                match answer.results.iter().find(|r| r.group_id.0.as_str() == group) {
                    Some(r) if r.error_code == errors::NONE => Ok(Ok(())),
                    Some(r) => Ok(Err((r.error_code, None))),
                    None => Err(errors::protocol(
                        "the coordinator",
                        format!("no DeleteGroups answer for {group:?}"),
                    )),
                }
            })
        })
        .collect()
}
