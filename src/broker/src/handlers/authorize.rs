//! Authorization of every request, in one place, by Kafka's rules (which
//! operation on which resource each API needs, and the error code a client
//! gets without it). Produce, Fetch and Metadata are authorized per topic
//! in their handlers (a client gets the topics it may have); every other API
//! is checked here before its handler runs: if any topic, group or cluster
//! permission it needs is missing, the whole request is refused, each of its
//! items with Kafka's error (TOPIC_, GROUP_ or CLUSTER_AUTHORIZATION_FAILED).

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

use crate::security::acl::{Operation, ResourceType, CLUSTER_NAME};
use crate::server::Shared;

const TOPIC: i16 = 29;
const GROUP: i16 = 30;
const CLUSTER: i16 = 31;

fn topic(shared: &Shared, op: Operation, name: &str) -> bool {
    shared.authorize(op, ResourceType::Topic, name)
}

fn group(shared: &Shared, op: Operation, name: &str) -> bool {
    shared.authorize(op, ResourceType::Group, name)
}

fn cluster(shared: &Shared, op: Operation) -> bool {
    shared.authorize(op, ResourceType::Cluster, CLUSTER_NAME)
}

fn msg(code: i16) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(match code {
        TOPIC => "Topic authorization failed.",
        GROUP => "Group authorization failed.",
        _ => "Cluster authorization failed.",
    }))
}

/// Creating a topic: CREATE on the cluster, or on the topic.
fn may_create(shared: &Shared, name: &str) -> bool {
    cluster(shared, Operation::Create) || topic(shared, Operation::Create, name)
}

/// The error response refusing `request`, or `None` when it is allowed.
pub fn refusal(shared: &Shared, request: &RequestKind) -> Option<ResponseKind> {
    use Operation::*;
    if !shared.authorizer.enabled {
        return None;
    }
    Some(match request {
        RequestKind::JoinGroup(r) if !group(shared, Read, &r.group_id) => ResponseKind::JoinGroup(
            JoinGroupResponse::default()
                .with_error_code(GROUP)
                .with_generation_id(-1)
                .with_member_id(r.member_id.clone()),
        ),
        RequestKind::SyncGroup(r) if !group(shared, Read, &r.group_id) => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(GROUP))
        }
        RequestKind::Heartbeat(r) if !group(shared, Read, &r.group_id) => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(GROUP))
        }
        RequestKind::LeaveGroup(r) if !group(shared, Read, &r.group_id) => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(GROUP))
        }
        RequestKind::FindCoordinator(r) if r.key_type == 0 && !group(shared, Describe, &r.key) => {
            ResponseKind::FindCoordinator(
                FindCoordinatorResponse::default()
                    .with_error_code(GROUP)
                    .with_error_message(msg(GROUP))
                    .with_node_id(BrokerId(-1))
                    .with_host(StrBytes::from_static_str(""))
                    .with_port(-1),
            )
        }
        RequestKind::OffsetCommit(r) => {
            let code = if !group(shared, Read, &r.group_id) {
                GROUP
            } else if r.topics.iter().any(|t| !topic(shared, Read, &t.name)) {
                TOPIC
            } else {
                return None;
            };
            ResponseKind::OffsetCommit(
                OffsetCommitResponse::default().with_topics(
                    r.topics
                        .iter()
                        .map(|t| {
                            offset_commit_response::OffsetCommitResponseTopic::default()
                                .with_name(t.name.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            offset_commit_response::OffsetCommitResponsePartition::default()
                                                .with_partition_index(p.partition_index)
                                                .with_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::OffsetFetch(r) if !group(shared, Describe, &r.group_id) => {
            ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_error_code(GROUP))
        }
        RequestKind::OffsetDelete(r) if !group(shared, Delete, &r.group_id) => {
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(GROUP))
        }
        RequestKind::DescribeGroups(r) if r.groups.iter().any(|g| !group(shared, Describe, g)) => {
            ResponseKind::DescribeGroups(
                DescribeGroupsResponse::default().with_groups(
                    r.groups
                        .iter()
                        .map(|g| {
                            describe_groups_response::DescribedGroup::default()
                                .with_group_id(g.clone())
                                .with_error_code(if group(shared, Describe, g) { 0 } else { GROUP })
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DeleteGroups(r) if r.groups_names.iter().any(|g| !group(shared, Delete, g)) => {
            ResponseKind::DeleteGroups(
                DeleteGroupsResponse::default().with_results(
                    r.groups_names
                        .iter()
                        .map(|g| {
                            delete_groups_response::DeletableGroupResult::default()
                                .with_group_id(g.clone())
                                .with_error_code(if group(shared, Delete, g) { 0 } else { GROUP })
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::ListOffsets(r) if r.topics.iter().any(|t| !topic(shared, Describe, &t.name)) => {
            ResponseKind::ListOffsets(
                ListOffsetsResponse::default().with_topics(
                    r.topics
                        .iter()
                        .map(|t| {
                            let code = if topic(shared, Describe, &t.name) {
                                E::UnknownServerError.code()
                            } else {
                                TOPIC
                            };
                            list_offsets_response::ListOffsetsTopicResponse::default()
                                .with_name(t.name.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            list_offsets_response::ListOffsetsPartitionResponse::default()
                                                .with_partition_index(p.partition_index)
                                                .with_error_code(code)
                                                .with_offset(-1)
                                                .with_timestamp(-1)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            let allowed = if r.replica_id.0 >= 0 {
                cluster(shared, ClusterAction)
            } else {
                r.topics.iter().all(|t| topic(shared, Describe, &t.topic))
            };
            if allowed {
                return None;
            }
            ResponseKind::OffsetForLeaderEpoch(
                OffsetForLeaderEpochResponse::default().with_topics(
                    r.topics
                        .iter()
                        .map(|t| {
                            offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
                                .with_topic(t.topic.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            offset_for_leader_epoch_response::EpochEndOffset::default()
                                                .with_partition(p.partition)
                                                .with_error_code(TOPIC)
                                                .with_leader_epoch(-1)
                                                .with_end_offset(-1)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::CreateTopics(r) if r.topics.iter().any(|t| !may_create(shared, &t.name)) => {
            ResponseKind::CreateTopics(
                CreateTopicsResponse::default().with_topics(
                    r.topics
                        .iter()
                        .map(|t| {
                            create_topics_response::CreatableTopicResult::default()
                                .with_name(t.name.clone())
                                .with_error_code(TOPIC)
                                .with_error_message(msg(TOPIC))
                                .with_num_partitions(-1)
                                .with_replication_factor(-1)
                                .with_configs(None)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DeleteTopics(r) => {
            let names: Vec<TopicName> =
                r.topic_names.iter().cloned().chain(r.topics.iter().filter_map(|t| t.name.clone())).collect();
            if names.iter().all(|n| topic(shared, Delete, n)) {
                return None;
            }
            ResponseKind::DeleteTopics(
                DeleteTopicsResponse::default().with_responses(
                    names
                        .into_iter()
                        .map(|n| {
                            delete_topics_response::DeletableTopicResult::default()
                                .with_name(Some(n))
                                .with_error_code(TOPIC)
                                .with_error_message(msg(TOPIC))
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::CreatePartitions(r) if r.topics.iter().any(|t| !topic(shared, Alter, &t.name)) => {
            ResponseKind::CreatePartitions(
                CreatePartitionsResponse::default().with_results(
                    r.topics
                        .iter()
                        .map(|t| {
                            create_partitions_response::CreatePartitionsTopicResult::default()
                                .with_name(t.name.clone())
                                .with_error_code(TOPIC)
                                .with_error_message(msg(TOPIC))
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DeleteRecords(r) if r.topics.iter().any(|t| !topic(shared, Delete, &t.name)) => {
            ResponseKind::DeleteRecords(
                DeleteRecordsResponse::default().with_topics(
                    r.topics
                        .iter()
                        .map(|t| {
                            delete_records_response::DeleteRecordsTopicResult::default()
                                .with_name(t.name.clone())
                                .with_partitions(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            delete_records_response::DeleteRecordsPartitionResult::default()
                                                .with_partition_index(p.partition_index)
                                                .with_low_watermark(-1)
                                                .with_error_code(TOPIC)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DescribeConfigs(r) => {
            let codes: Vec<i16> = r
                .resources
                .iter()
                .map(|c| config_code(shared, c.resource_type, &c.resource_name, DescribeConfigs))
                .collect();
            if codes.iter().all(|c| *c == 0) {
                return None;
            }
            ResponseKind::DescribeConfigs(
                DescribeConfigsResponse::default().with_results(
                    r.resources
                        .iter()
                        .zip(codes)
                        .map(|(c, code)| {
                            let code = if code == 0 { E::UnknownServerError.code() } else { code };
                            describe_configs_response::DescribeConfigsResult::default()
                                .with_error_code(code)
                                .with_error_message(msg(code))
                                .with_resource_type(c.resource_type)
                                .with_resource_name(c.resource_name.clone())
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::AlterConfigs(r) => {
            let items: Vec<(i8, StrBytes)> =
                r.resources.iter().map(|c| (c.resource_type, c.resource_name.clone())).collect();
            let refused = alter_config_refusals(shared, &items)?;
            ResponseKind::AlterConfigs(
                AlterConfigsResponse::default().with_responses(
                    refused
                        .into_iter()
                        .map(|(t, n, code)| {
                            alter_configs_response::AlterConfigsResourceResponse::default()
                                .with_error_code(code)
                                .with_error_message(msg(code))
                                .with_resource_type(t)
                                .with_resource_name(n)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            let items: Vec<(i8, StrBytes)> =
                r.resources.iter().map(|c| (c.resource_type, c.resource_name.clone())).collect();
            let refused = alter_config_refusals(shared, &items)?;
            ResponseKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsResponse::default().with_responses(
                    refused
                        .into_iter()
                        .map(|(t, n, code)| {
                            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                                .with_error_code(code)
                                .with_error_message(msg(code))
                                .with_resource_type(t)
                                .with_resource_name(n)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::InitProducerId(_)
            if !cluster(shared, IdempotentWrite) && !shared.authorize_any(Write, ResourceType::Topic) =>
        {
            ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_error_code(CLUSTER)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )
        }
        // The error alone: librdkafka frees a refused user's result twice.
        RequestKind::DescribeUserScramCredentials(_) if !cluster(shared, Describe) => {
            ResponseKind::DescribeUserScramCredentials(
                DescribeUserScramCredentialsResponse::default()
                    .with_error_code(CLUSTER)
                    .with_error_message(msg(CLUSTER)),
            )
        }
        RequestKind::AlterUserScramCredentials(r) if !cluster(shared, Alter) => {
            let users: std::collections::BTreeSet<&StrBytes> =
                r.deletions.iter().map(|d| &d.name).chain(r.upsertions.iter().map(|u| &u.name)).collect();
            ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .into_iter()
                        .map(|u| {
                            alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                                .with_user(u.clone())
                                .with_error_code(CLUSTER)
                                .with_error_message(msg(CLUSTER))
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::DescribeClientQuotas(_) if !cluster(shared, DescribeConfigs) => {
            ResponseKind::DescribeClientQuotas(
                DescribeClientQuotasResponse::default()
                    .with_error_code(CLUSTER)
                    .with_error_message(msg(CLUSTER)),
            )
        }
        RequestKind::AlterClientQuotas(r) if !cluster(shared, AlterConfigs) => {
            ResponseKind::AlterClientQuotas(
                AlterClientQuotasResponse::default().with_entries(
                    r.entries
                        .iter()
                        .map(|e| {
                            alter_client_quotas_response::EntryData::default()
                                .with_error_code(CLUSTER)
                                .with_error_message(msg(CLUSTER))
                                .with_entity(
                                    e.entity
                                        .iter()
                                        .map(|d| {
                                            alter_client_quotas_response::EntityData::default()
                                                .with_entity_type(d.entity_type.clone())
                                                .with_entity_name(d.entity_name.clone())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::ElectLeaders(_) if !cluster(shared, Alter) => {
            ResponseKind::ElectLeaders(ElectLeadersResponse::default().with_error_code(CLUSTER))
        }
        RequestKind::AlterPartitionReassignments(_) if !cluster(shared, Alter) => {
            ResponseKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default()
                    .with_error_code(CLUSTER)
                    .with_error_message(msg(CLUSTER)),
            )
        }
        RequestKind::ListPartitionReassignments(_) if !cluster(shared, Describe) => {
            ResponseKind::ListPartitionReassignments(
                ListPartitionReassignmentsResponse::default()
                    .with_error_code(CLUSTER)
                    .with_error_message(msg(CLUSTER)),
            )
        }
        RequestKind::DescribeLogDirs(_) if !cluster(shared, Describe) => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(CLUSTER))
        }
        _ => return None,
    })
}

/// DESCRIBE_CONFIGS or ALTER_CONFIGS on a topic (2) or on the cluster for a
/// broker (4); 0 when allowed.
fn config_code(shared: &Shared, resource_type: i8, name: &str, op: Operation) -> i16 {
    match resource_type {
        2 if !topic(shared, op, name) => TOPIC,
        4 | 8 if !cluster(shared, op) => CLUSTER,
        _ => 0,
    }
}

/// Every resource's error when any of them may not be altered.
fn alter_config_refusals(shared: &Shared, items: &[(i8, StrBytes)]) -> Option<Vec<(i8, StrBytes, i16)>> {
    let codes: Vec<i16> =
        items.iter().map(|(t, n)| config_code(shared, *t, n, Operation::AlterConfigs)).collect();
    if codes.iter().all(|c| *c == 0) {
        return None;
    }
    Some(
        items
            .iter()
            .zip(codes)
            .map(|((t, n), c)| (*t, n.clone(), if c == 0 { E::UnknownServerError.code() } else { c }))
            .collect(),
    )
}

/// ListGroups: without DESCRIBE on the cluster, only the groups the client
/// may DESCRIBE.
pub fn filter(shared: &Shared, response: &mut ResponseKind) {
    if !shared.authorizer.enabled {
        return;
    }
    if let ResponseKind::ListGroups(r) = response {
        if !cluster(shared, Operation::Describe) {
            r.groups.retain(|g| group(shared, Operation::Describe, &g.group_id));
        }
    }
}
