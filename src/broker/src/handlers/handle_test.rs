//! `handle` on hostile input: arbitrary bytes, and every served request at
//! every served version with bytes flipped, cut, inserted or overwritten with
//! extreme sizes. Whatever arrives, a request is answered or its connection
//! closed; nothing panics (a panic in a handler would take the connection's
//! task down with no log line, and in `blocking` it is re-raised) and nothing
//! aborts (a failed allocation is not a panic: it ends the whole process).
//!
//! Each property runs in a child copy of this test binary, so an abort fails
//! that one test with the child's message instead of killing the test run.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterConfigsRequest, ApiVersionsRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, DescribeGroupsRequest, DescribeLogDirsRequest, ElectLeadersRequest, FetchRequest,
    FindCoordinatorRequest, GroupId, HeartbeatRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest, MetadataRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, OffsetForLeaderEpochRequest,
    ProduceRequest, RequestHeader, RequestKind, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use seglog_core::log::AppendOrigin;
use seglog_core::record::{Compression as CoreCompression, NewRecord};
use seglog_core::store::Store;
use tokio::sync::watch;

use super::*;
use crate::config::BrokerConfig;
use crate::metrics::Metrics;
use crate::response::Part;

/// A store with topic `t` (2 partitions, a few records each) behind a `Shared`.
fn shared() -> (tempfile::TempDir, Arc<Shared>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &BTreeMap::new(), false).unwrap();
    store.create_topic("t", 2, &BTreeMap::new()).unwrap();
    for p in 0..2 {
        let recs: Vec<NewRecord<'_>> = (0..3)
            .map(|_| NewRecord { key: Some(b"k"), value: Some(b"value"), headers: &[], timestamp: 1000 })
            .collect();
        store
            .partition("t", p)
            .unwrap()
            .append_records(&recs, CoreCompression::None, false, AppendOrigin::Embedded)
            .unwrap();
    }
    let purgatory = Arc::new(crate::purgatory::Purgatory::default());
    let wake = purgatory.clone();
    store.append_signal().set_listener(Some(Arc::new(move |t: &str, p: i32| wake.changed(t, p))));
    // No initial rebalance delay: a seed JoinGroup completes at once.
    let config = BrokerConfig { group_initial_rebalance_delay_ms: 0, ..BrokerConfig::default() };
    let coordinator = crate::coordinator::Coordinator::load(
        store.clone(),
        crate::coordinator::GroupConfig::from_broker(&config),
    )
    .unwrap();
    let metrics = Arc::new(Metrics::default());
    let stopping = tokio::sync::watch::channel(false).1;
    let replica_manager = Arc::new(crate::replica_manager::ReplicaManager::new(
        store.clone(),
        None,
        purgatory,
        metrics.clone(),
        stopping.clone(),
    ));
    let shared = Arc::new(Shared {
        store,
        coordinator,
        config,
        advertised: BrokerConfig::default().listeners,
        cluster_id: "test-cluster".into(),
        metrics,
        request_memory: crate::memory::Memory::default(),
        response_memory: crate::memory::Memory::default(),
        answering: tokio::sync::Semaphore::new(1),
        replica_manager,
        replication: None,
        fetch_sessions: crate::fetch_session::FetchSessions::new(4),
        local_configs: Some(
            crate::dynamic_config::LocalConfigs::open(dir.path(), crate::dynamic_config::LOCAL_FILE).unwrap(),
        ),
        authorizer: Default::default(),
        local_acls: Some(crate::security::acl::LocalAcls::open(dir.path()).unwrap()),
        local_users: Some(
            crate::dynamic_config::LocalConfigs::open(dir.path(), crate::dynamic_config::USERS_FILE).unwrap(),
        ),
        client_quotas: crate::client_quota::ClientQuotas::new(&BrokerConfig::default()),
        local_quotas: Some(crate::client_quota::LocalQuotas::open(dir.path()).unwrap()),
    });
    (dir, shared)
}

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str("t"))
}

/// One RecordBatch v2 as a client sends it.
fn batch() -> Bytes {
    let records: Vec<Record> = (0..2)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: -1,
            timestamp: 2000 + i,
            key: Some(Bytes::from_static(b"key")),
            value: Some(Bytes::from_static(b"a value")),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

fn request(key: ApiKey) -> RequestKind {
    match key {
        ApiKey::Produce => RequestKind::Produce(
            ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![
                TopicProduceData::default().with_name(topic()).with_partition_data(vec![
                    PartitionProduceData::default().with_index(1).with_records(Some(batch())),
                ]),
            ]),
        ),
        ApiKey::Fetch => RequestKind::Fetch(
            FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default().with_topic(topic()).with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(1)
                        .with_partition_max_bytes(1 << 20),
                ])]),
        ),
        ApiKey::ListOffsets => {
            RequestKind::ListOffsets(ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(
                vec![ListOffsetsTopic::default().with_name(topic()).with_partitions(vec![
                    ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-2),
                    ListOffsetsPartition::default().with_partition_index(1).with_timestamp(1500),
                ])],
            ))
        }
        ApiKey::Metadata => RequestKind::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(topic()))]))
                .with_allow_auto_topic_creation(true),
        ),
        ApiKey::InitProducerId => {
            RequestKind::InitProducerId(InitProducerIdRequest::default().with_transaction_timeout_ms(60_000))
        }
        ApiKey::CreateTopics => RequestKind::CreateTopics(
            CreateTopicsRequest::default().with_timeout_ms(1000).with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("created")))
                .with_num_partitions(2)
                .with_replication_factor(1)]),
        ),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(
            DeleteTopicsRequest::default()
                .with_topic_names(vec![TopicName(StrBytes::from_static_str("missing"))])
                .with_timeout_ms(1000),
        ),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(CreatePartitionsRequest::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(ElectLeadersRequest::default()),
        ApiKey::OffsetForLeaderEpoch => {
            RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        ApiKey::ApiVersions => RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("proptest"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        ),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
        ),
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(100)
                .with_protocol_type(StrBytes::from_static_str("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))
                    .with_metadata(Bytes::from_static(b"\x00\x00"))]),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(StrBytes::from_static_str("g")))
                .with_generation_id_or_member_epoch(-1),
        ),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(
            OffsetFetchRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("g"))]),
        ),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(StrBytes::from_static_str("g"))]),
        ),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(
            OffsetDeleteRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::AlterPartitionReassignments => {
            use kafka_protocol::messages::alter_partition_reassignments_request::{
                ReassignablePartition, ReassignableTopic,
            };
            RequestKind::AlterPartitionReassignments(
                kafka_protocol::messages::AlterPartitionReassignmentsRequest::default().with_topics(vec![
                    ReassignableTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("t")))
                        .with_partitions(vec![ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![kafka_protocol::messages::BrokerId(1)]))]),
                ]),
            )
        }
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            kafka_protocol::messages::ListPartitionReassignmentsRequest::default(),
        ),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            kafka_protocol::messages::DescribeAclsRequest::default()
                .with_resource_type_filter(2)
                .with_pattern_type_filter(3)
                .with_resource_name_filter(Some(StrBytes::from_static_str("t")))
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::CreateAcls => {
            use kafka_protocol::messages::create_acls_request::AclCreation;
            RequestKind::CreateAcls(kafka_protocol::messages::CreateAclsRequest::default().with_creations(
                vec![
                AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t"))
                    .with_resource_pattern_type(3)
                    .with_principal(StrBytes::from_static_str("User:alice"))
                    .with_host(StrBytes::from_static_str("*"))
                    .with_operation(3)
                    .with_permission_type(3),
            ],
            ))
        }
        ApiKey::DeleteAcls => {
            use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
            RequestKind::DeleteAcls(kafka_protocol::messages::DeleteAclsRequest::default().with_filters(
                vec![
                DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(3)
                    .with_operation(1)
                    .with_permission_type(1),
            ],
            ))
        }
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("SCRAM-SHA-256")),
        ),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"n,,n=u,r=abc")),
        ),
        ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
            kafka_protocol::messages::DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                kafka_protocol::messages::describe_user_scram_credentials_request::UserName::default()
                    .with_name(StrBytes::from_static_str("alice")),
            ])),
        ),
        ApiKey::AlterUserScramCredentials => {
            use kafka_protocol::messages::alter_user_scram_credentials_request::{
                ScramCredentialDeletion, ScramCredentialUpsertion,
            };
            RequestKind::AlterUserScramCredentials(
                kafka_protocol::messages::AlterUserScramCredentialsRequest::default()
                    .with_upsertions(vec![ScramCredentialUpsertion::default()
                        .with_name(StrBytes::from_static_str("alice"))
                        .with_mechanism(1)
                        .with_iterations(4096)
                        .with_salt(Bytes::from_static(b"salt"))
                        .with_salted_password(Bytes::from_static(&[7; 32]))])
                    .with_deletions(vec![ScramCredentialDeletion::default()
                        .with_name(StrBytes::from_static_str("bob"))
                        .with_mechanism(2)]),
            )
        }
        ApiKey::DescribeClientQuotas => {
            use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
            RequestKind::DescribeClientQuotas(
                kafka_protocol::messages::DescribeClientQuotasRequest::default()
                    .with_components(vec![ComponentData::default()
                        .with_entity_type(StrBytes::from_static_str("user"))
                        .with_match_type(0)
                        .with_match(Some(StrBytes::from_static_str("alice")))])
                    .with_strict(true),
            )
        }
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
            RequestKind::AlterClientQuotas(
                kafka_protocol::messages::AlterClientQuotasRequest::default().with_entries(vec![
                    EntryData::default()
                        .with_entity(vec![
                            EntityData::default()
                                .with_entity_type(StrBytes::from_static_str("user"))
                                .with_entity_name(Some(StrBytes::from_static_str("alice"))),
                            EntityData::default().with_entity_type(StrBytes::from_static_str("client-id")),
                        ])
                        .with_ops(vec![OpData::default()
                            .with_key(StrBytes::from_static_str("producer_byte_rate"))
                            .with_value(1024.0)]),
                ]),
            )
        }
        other => panic!("no seed request for {other:?}: add one here, so the API is fuzzed"),
    }
}

/// A valid frame (header and body, no size prefix) of `key` at `version`.
fn frame(key: ApiKey, version: i16, correlation_id: i32) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("handle-test")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    request(key).encode(&mut buf, version).unwrap();
    buf.freeze()
}

/// A frame of an API the protocol crate lacks, its body encoded by hand.
fn hand_frame(key: i16, version: i16, header_version: i16, body: &[u8]) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(2000 + i32::from(key))
        .with_client_id(Some(StrBytes::from_static_str("handle-test")))
        .encode(&mut buf, header_version)
        .unwrap();
    buf.extend_from_slice(body);
    buf.freeze()
}

/// Every served API at every served version, those encoded by hand too.
fn seeds() -> Vec<Bytes> {
    use crate::replication::controller_requests as ctl;
    use crate::replication::shutdown::wire;
    let mut seeds: Vec<Bytes> = SUPPORTED
        .iter()
        .flat_map(|&(key, lo, hi)| (lo..=hi).map(move |v| frame(key, v, 1000 + i32::from(v))))
        .collect();
    for v in wire::VERSIONS.0..=wire::VERSIONS.1 {
        let mut body = BytesMut::new();
        wire::encode_request(&wire::Request { broker_id: 1, broker_epoch: -1 }, v, &mut body);
        seeds.push(hand_frame(wire::API_KEY, v, wire::request_header_version(v), &body));
    }
    for api in ctl::APIS {
        let stop = vec![("t".to_string(), 0, true), ("t".to_string(), 1, false)];
        let r = ctl::Request { controller_id: 1, controller_epoch: 1, broker_epoch: -1, stop };
        let mut body = BytesMut::new();
        ctl::encode_request(api, &r, &mut body);
        for v in api.versions.0..=api.versions.1 {
            seeds.push(hand_frame(api.key, v, ctl::REQUEST_HEADER_VERSION, &body));
        }
    }
    seeds
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

/// Runs `handle` and checks what came out: no panic (the call returns), and a
/// response, when there is one, carries the request's correlation id. A
/// request still long-polling after the timeout is fine (a Fetch whose
/// max_wait_ms was mutated): it is simply dropped.
fn check(rt: &tokio::runtime::Runtime, shared: &Arc<Shared>, frame: Bytes) -> Result<(), TestCaseError> {
    let start = crate::frame::HeaderStart::peek(&frame);
    let outcome =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(200), handle(shared, frame)).await });
    let Ok(outcome) = outcome else { return Ok(()) };
    match outcome {
        Outcome::Respond { response, .. } => {
            let start = start.expect("a response to a frame shorter than a header");
            prop_assert!(response.len() < i32::MAX as u64);
            let Some(Part::Bytes(first)) = response.parts.first() else {
                return Err(TestCaseError::fail("a response must start with its header bytes"));
            };
            prop_assert!(first.len() >= 4);
            prop_assert_eq!(
                i32::from_be_bytes([first[0], first[1], first[2], first[3]]),
                start.correlation_id
            );
        }
        Outcome::NoResponse { .. } | Outcome::Close { .. } => {}
    }
    Ok(())
}

const CHILD: &str = "SEGLOG_HANDLE_TEST_CHILD";

/// Runs `body` in a child process running only the test `name` (of this
/// module), and fails with the child's output if it did not exit cleanly.
fn in_child(name: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let test = format!("{module}::{name}");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test, "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 passed") || !out.status.success(), "the child ran no test named {test}");
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("seglog-broker ")).collect();
        let tail = tail[tail.len().saturating_sub(30)..].join("\n");
        panic!("{test} failed in its child process ({}):\n{tail}\n{stdout}", out.status);
    }
}

#[test]
fn every_seed_is_a_request_the_broker_answers() {
    // Otherwise the mutations below would start from garbage and prove little.
    let (_dir, shared) = shared();
    let rt = runtime();
    // The coordinator's timer completes joins (the rebalance timeout).
    let (_stop_tx, stop) = watch::channel(false);
    rt.spawn(shared.coordinator.clone().run_timer(stop));
    let mut failed = Vec::new();
    for f in seeds() {
        let start = crate::frame::HeaderStart::peek(&f).unwrap();
        let what = format!("api key {} v{}", start.api_key, start.api_version);
        match rt.block_on(handle(&shared, f)) {
            Outcome::Respond { .. } => {}
            Outcome::Close { reason, .. } => failed.push(format!("{what}: closed: {reason}")),
            Outcome::NoResponse { .. } => failed.push(format!("{what}: no response")),
        }
    }
    assert!(failed.is_empty(), "valid requests not answered:\n{}", failed.join("\n"));
}

#[test]
fn every_truncation_of_every_seed_is_answered_or_closed() {
    in_child("every_truncation_of_every_seed_is_answered_or_closed", || {
        let (_dir, shared) = shared();
        let rt = runtime();
        for f in seeds() {
            for len in 0..f.len() {
                check(&rt, &shared, f.slice(..len)).unwrap();
            }
        }
    });
}

/// One change to a valid frame.
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        xor: u8,
    },
    Truncate {
        at: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    /// A length or count field's worth of bytes set to an extreme.
    SetI32 {
        at: usize,
        value: i32,
    },
    SetI16 {
        at: usize,
        value: i16,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let extreme_i32 = prop_oneof![
        Just(-1i32),
        Just(0),
        Just(i32::MAX),
        Just(i32::MIN),
        Just(0x7fff_fff0),
        Just(1 << 20),
        any::<i32>()
    ];
    let extreme_i16 = prop_oneof![Just(-1i16), Just(0), Just(i16::MAX), Just(i16::MIN), any::<i16>()];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), extreme_i32).prop_map(|(at, value)| Mutation::SetI32 { at, value }),
        (any::<usize>(), extreme_i16).prop_map(|(at, value)| Mutation::SetI16 { at, value }),
    ]
}

fn apply(frame: &[u8], mutations: &[Mutation]) -> Bytes {
    let mut f = frame.to_vec();
    for m in mutations {
        let n = f.len().max(1);
        match m {
            Mutation::Flip { at, xor } => {
                if let Some(b) = f.get_mut(at % n) {
                    *b ^= xor;
                }
            }
            Mutation::Truncate { at } => f.truncate(at % n),
            Mutation::Insert { at, bytes } => {
                let at = at % (f.len() + 1);
                f.splice(at..at, bytes.iter().copied());
            }
            Mutation::SetI32 { at, value } => {
                let at = at % n;
                if at + 4 <= f.len() {
                    f[at..at + 4].copy_from_slice(&value.to_be_bytes());
                }
            }
            Mutation::SetI16 { at, value } => {
                let at = at % n;
                if at + 2 <= f.len() {
                    f[at..at + 2].copy_from_slice(&value.to_be_bytes());
                }
            }
        }
    }
    Bytes::from(f)
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() })
}

#[test]
fn mutated_valid_requests_never_panic() {
    in_child("mutated_valid_requests_never_panic", || {
        let (_dir, shared) = shared();
        let rt = runtime();
        let seeds = seeds();
        let strategy = (0..seeds.len(), proptest::collection::vec(mutation(), 1..4));
        runner(1024)
            .run(&strategy, |(i, mutations)| check(&rt, &shared, apply(&seeds[i], &mutations)))
            .unwrap();
    });
}

#[test]
fn arbitrary_bytes_never_panic() {
    in_child("arbitrary_bytes_never_panic", || {
        let (_dir, shared) = shared();
        let rt = runtime();
        runner(512)
            .run(&proptest::collection::vec(any::<u8>(), 0..256), |bytes| {
                check(&rt, &shared, Bytes::from(bytes))
            })
            .unwrap();
    });
}

#[test]
fn a_served_header_with_an_arbitrary_body_never_panics() {
    in_child("a_served_header_with_an_arbitrary_body_never_panics", || {
        // Random bytes rarely get past the header; these reach every decoder.
        let (_dir, shared) = shared();
        let rt = runtime();
        let served: Vec<(ApiKey, i16)> =
            SUPPORTED.iter().flat_map(|&(k, lo, hi)| (lo..=hi).map(move |v| (k, v))).collect();
        let strategy = (0..served.len(), proptest::collection::vec(any::<u8>(), 0..128));
        runner(512)
            .run(&strategy, |(i, body)| {
                let (key, version) = served[i];
                let mut f = BytesMut::new();
                RequestHeader::default()
                    .with_request_api_key(key as i16)
                    .with_request_api_version(version)
                    .with_correlation_id(7)
                    .encode(&mut f, key.request_header_version(version))
                    .unwrap();
                f.extend_from_slice(&body);
                check(&rt, &shared, f.freeze())
            })
            .unwrap();
    });
}

#[test]
fn an_array_count_beyond_the_frame_closes_the_connection() {
    // ListOffsets v1 whose topics array claims i32::MAX entries in a 20-byte
    // frame: the decoder must fail on the missing bytes, not reserve room for
    // 2^31 topics first (kafka-protocol 0.18 does `Vec::with_capacity(count)`,
    // and the failed allocation aborts the broker's process).
    in_child("an_array_count_beyond_the_frame_closes_the_connection", || {
        let (_dir, shared) = shared();
        let rt = runtime();
        let mut f = Vec::new();
        f.extend_from_slice(&2i16.to_be_bytes()); // ListOffsets
        f.extend_from_slice(&1i16.to_be_bytes()); // v1
        f.extend_from_slice(&9i32.to_be_bytes()); // correlation id
        f.extend_from_slice(&(-1i16).to_be_bytes()); // client id: null
        f.extend_from_slice(&(-1i32).to_be_bytes()); // replica id
        f.extend_from_slice(&i32::MAX.to_be_bytes()); // topics: "2^31 - 1 of them"
        let outcome = rt.block_on(handle(&shared, Bytes::from(f)));
        assert!(matches!(outcome, Outcome::Close { .. }), "a frame that cannot hold its array is malformed");
    });
}
