//! The coordinator on a fake clock: sequences of joins, syncs, heartbeats and
//! leaves driven with explicit times, then checked against Kafka's answers.

use super::*;
use tokio::sync::oneshot::Receiver;

const T0: i64 = 1_000_000;

fn config() -> GroupConfig {
    GroupConfig {
        min_session_timeout_ms: 100,
        max_session_timeout_ms: 60_000,
        initial_rebalance_delay_ms: 0,
        max_size: 3,
        offsets_partitions: 4,
        commit_timeout_ms: 1_000,
        retention_ms: 60_000,
        retention_check_interval_ms: 1_000,
        metadata_max_bytes: 16,
    }
}

fn open(dir: &std::path::Path, cfg: GroupConfig) -> Arc<Coordinator> {
    let store = Store::open(dir, &Default::default(), false).unwrap();
    store.create_topic("t", 2, &Default::default()).unwrap();
    Coordinator::load(store, cfg).unwrap()
}

fn setup() -> (tempfile::TempDir, Arc<Coordinator>) {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config());
    (dir, c)
}

fn req(member: &str, protocols: &[(&str, &[u8])]) -> JoinGroup {
    JoinGroup {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 1_000,
        rebalance_timeout_ms: 5_000,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(n, m)| Protocol { name: n.to_string(), metadata: Bytes::copy_from_slice(m) })
            .collect(),
        require_known_member_id: false,
    }
}

fn range() -> JoinGroup {
    req("", &[("range", b"r")])
}

/// Runs the writes an operation asked for, as the async API would.
fn write(c: &Coordinator, writes: Vec<GroupWrite>) {
    for w in writes {
        c.write_records(&w.group.clone(), Vec::new(), Some(w)).unwrap();
    }
}

fn join(c: &Coordinator, r: &JoinGroup, now: i64) -> JoinOutcome {
    let (o, writes) = c.join_at(r, now);
    write(c, writes);
    o
}

fn ready(o: JoinOutcome) -> JoinResponse {
    match o {
        JoinOutcome::Ready(r) => r,
        JoinOutcome::Wait(_) => panic!("waits"),
        JoinOutcome::AfterWrite(_, r) => panic!("after a write: {r:?}"),
    }
}

fn waiting(o: JoinOutcome) -> Receiver<JoinResponse> {
    match o {
        JoinOutcome::Wait(rx) => rx,
        JoinOutcome::Ready(r) | JoinOutcome::AfterWrite(_, r) => panic!("did not wait: {r:?}"),
    }
}

fn sync(
    c: &Coordinator,
    member: &str,
    generation: i32,
    assignments: &[(&str, &[u8])],
    now: i64,
) -> SyncOutcome {
    let r = SyncGroup {
        group_id: "g".into(),
        generation_id: generation,
        member_id: member.into(),
        assignments: assignments.iter().map(|(m, a)| (m.to_string(), Bytes::copy_from_slice(a))).collect(),
        ..Default::default()
    };
    let (o, writes) = c.sync_at(&r, now);
    write(c, writes);
    match o {
        SyncOutcome::LeaderWrite { write: w, generation, assignment, rx } => {
            let result =
                c.write_records("g", Vec::new(), Some(w)).map(|_| ()).map_err(|_| COORDINATOR_NOT_AVAILABLE);
            let writes = c.assignment_stored_at("g", generation, assignment, result, now);
            write(c, writes);
            SyncOutcome::Wait(rx)
        }
        other => other,
    }
}

fn synced(o: SyncOutcome) -> SyncResponse {
    match o {
        SyncOutcome::Ready(r) => r,
        SyncOutcome::Wait(mut rx) => rx.try_recv().expect("answered"),
        SyncOutcome::LeaderWrite { .. } => unreachable!(),
    }
}

/// A one-member Stable group: (member id, generation).
fn stable_one(c: &Coordinator, now: i64) -> (String, i32) {
    let mut rx = waiting(join(c, &range(), now));
    let j = rx.try_recv().unwrap();
    assert_eq!((j.error, j.generation_id, j.leader.as_str()), (NONE, 1, j.member_id.as_str()));
    let s = synced(sync(c, &j.member_id, 1, &[(&j.member_id, b"A")], now));
    assert_eq!((s.error, &s.assignment[..]), (NONE, &b"A"[..]));
    (j.member_id, 1)
}

#[test]
fn the_workspace_s_error_codes_are_kafkas() {
    // Every code of seglog's one table (seglog_core::error::kafka_codes), against
    // the protocol crate's, which is generated from Kafka's own.
    use kafka_protocol::ResponseError as E;
    for (ours, theirs) in [
        (UNKNOWN_SERVER_ERROR, E::UnknownServerError),
        (OFFSET_OUT_OF_RANGE, E::OffsetOutOfRange),
        (CORRUPT_MESSAGE, E::CorruptMessage),
        (UNKNOWN_TOPIC_OR_PARTITION, E::UnknownTopicOrPartition),
        (LEADER_NOT_AVAILABLE, E::LeaderNotAvailable),
        (NOT_LEADER_OR_FOLLOWER, E::NotLeaderOrFollower),
        (MESSAGE_TOO_LARGE, E::MessageTooLarge),
        (OFFSET_METADATA_TOO_LARGE, E::OffsetMetadataTooLarge),
        (COORDINATOR_LOAD_IN_PROGRESS, E::CoordinatorLoadInProgress),
        (COORDINATOR_NOT_AVAILABLE, E::CoordinatorNotAvailable),
        (NOT_COORDINATOR, E::NotCoordinator),
        (INVALID_TOPIC_EXCEPTION, E::InvalidTopicException),
        (RECORD_LIST_TOO_LARGE, E::RecordListTooLarge),
        (ILLEGAL_GENERATION, E::IllegalGeneration),
        (INCONSISTENT_GROUP_PROTOCOL, E::InconsistentGroupProtocol),
        (INVALID_GROUP_ID, E::InvalidGroupId),
        (UNKNOWN_MEMBER_ID, E::UnknownMemberId),
        (INVALID_SESSION_TIMEOUT, E::InvalidSessionTimeout),
        (REBALANCE_IN_PROGRESS, E::RebalanceInProgress),
        (INVALID_COMMIT_OFFSET_SIZE, E::InvalidCommitOffsetSize),
        (INVALID_TIMESTAMP, E::InvalidTimestamp),
        (UNSUPPORTED_VERSION, E::UnsupportedVersion),
        (TOPIC_ALREADY_EXISTS, E::TopicAlreadyExists),
        (INVALID_CONFIG, E::InvalidConfig),
        (INVALID_REQUEST, E::InvalidRequest),
        (OUT_OF_ORDER_SEQUENCE_NUMBER, E::OutOfOrderSequenceNumber),
        (DUPLICATE_SEQUENCE_NUMBER, E::DuplicateSequenceNumber),
        (INVALID_PRODUCER_EPOCH, E::InvalidProducerEpoch),
        (KAFKA_STORAGE_ERROR, E::KafkaStorageError),
        (UNKNOWN_PRODUCER_ID, E::UnknownProducerId),
        (NON_EMPTY_GROUP, E::NonEmptyGroup),
        (GROUP_ID_NOT_FOUND, E::GroupIdNotFound),
        (FENCED_LEADER_EPOCH, E::FencedLeaderEpoch),
        (UNKNOWN_LEADER_EPOCH, E::UnknownLeaderEpoch),
        (UNSUPPORTED_COMPRESSION_TYPE, E::UnsupportedCompressionType),
        (MEMBER_ID_REQUIRED, E::MemberIdRequired),
        (GROUP_MAX_SIZE_REACHED, E::GroupMaxSizeReached),
        (FENCED_INSTANCE_ID, E::FencedInstanceId),
        (GROUP_SUBSCRIBED_TO_TOPIC, E::GroupSubscribedToTopic),
        (INVALID_RECORD, E::InvalidRecord),
    ] {
        assert_eq!(ours, theirs.code(), "{theirs:?}");
    }
    assert_eq!(E::try_from_code(NONE), None);
}

#[test]
fn bad_joins_get_kafkas_errors() {
    let (_d, c) = setup();
    let mut r = range();
    r.session_timeout_ms = 50;
    assert_eq!(ready(join(&c, &r, T0)).error, INVALID_SESSION_TIMEOUT);
    r.session_timeout_ms = 120_000;
    assert_eq!(ready(join(&c, &r, T0)).error, INVALID_SESSION_TIMEOUT);
    let mut r = range();
    r.group_id = "x".repeat(MAX_GROUP_ID_BYTES + 1);
    assert_eq!(ready(join(&c, &r, T0)).error, INVALID_GROUP_ID);
    r.group_id = String::new();
    assert_eq!(ready(join(&c, &r, T0)).error, INVALID_GROUP_ID);
    assert_eq!(ready(join(&c, &req("", &[]), T0)).error, INCONSISTENT_GROUP_PROTOCOL);
    let huge = vec![0u8; MAX_MEMBER_METADATA_BYTES + 1];
    assert_eq!(ready(join(&c, &req("", &[("range", &huge)]), T0)).error, INVALID_REQUEST);
    assert_eq!(ready(join(&c, &req("nobody", &[("range", b"")]), T0)).error, UNKNOWN_MEMBER_ID);
    // None of these left a group behind.
    assert!(c.list_groups().is_empty());
    // A member of another protocol type or with no common protocol cannot join.
    let (m1, _) = stable_one(&c, T0);
    let mut other = range();
    other.protocol_type = "connect".into();
    assert_eq!(ready(join(&c, &other, T0)).error, INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(ready(join(&c, &req("", &[("roundrobin", b"")]), T0)).error, INCONSISTENT_GROUP_PROTOCOL);
    assert_eq!(c.heartbeat_at("g", &m1, None, 7, T0), ILLEGAL_GENERATION);
    assert_eq!(c.heartbeat_at("g", "stranger", None, 1, T0), UNKNOWN_MEMBER_ID);
    assert_eq!(c.heartbeat_at("nogroup", &m1, None, 1, T0), UNKNOWN_MEMBER_ID);
    assert_eq!(synced(sync(&c, &m1, 9, &[], T0)).error, ILLEGAL_GENERATION);
    assert_eq!(synced(sync(&c, "stranger", 1, &[], T0)).error, UNKNOWN_MEMBER_ID);
    assert_eq!(c.heartbeat_at("g", &m1, None, 1, T0), NONE);
}

#[test]
fn kip_394_a_first_join_gets_its_member_id_and_must_come_back_with_it() {
    let (_d, c) = setup();
    let mut r = range();
    r.require_known_member_id = true;
    let first = ready(join(&c, &r, T0));
    assert_eq!(first.error, MEMBER_ID_REQUIRED);
    assert!(first.member_id.starts_with("c-"), "{}", first.member_id);
    r.member_id = first.member_id.clone();
    let j = waiting(join(&c, &r, T0)).try_recv().unwrap();
    assert_eq!((j.error, j.generation_id, j.member_id.clone()), (NONE, 1, first.member_id.clone()));
    assert_eq!(j.leader, first.member_id);
    assert_eq!(j.members.len(), 1);
    assert_eq!(&j.members[0].metadata[..], b"r");
}

#[test]
fn a_member_id_never_claimed_holds_the_join_until_it_expires() {
    let (_d, c) = setup();
    let (m1, _) = stable_one(&c, T0);
    let mut r = range();
    r.require_known_member_id = true;
    let pending = ready(join(&c, &r, T0));
    assert_eq!(pending.error, MEMBER_ID_REQUIRED);
    // m1 rejoins (a rebalance for another reason: new protocols).
    let mut rx = waiting(join(&c, &req(&m1, &[("range", b"r2")]), T0));
    assert!(rx.try_recv().is_err(), "waits for the pending member");
    write(&c, c.tick_at(T0 + 500).into_iter().flat_map(|w| w.2).collect());
    assert!(rx.try_recv().is_err());
    // Its session (1 s) passes: the join completes without it.
    write(&c, c.tick_at(T0 + 1_001).into_iter().flat_map(|w| w.2).collect());
    let j = rx.try_recv().unwrap();
    assert_eq!((j.error, j.generation_id, j.members.len()), (NONE, 2, 1));
}

#[test]
fn a_second_member_triggers_a_rebalance_and_the_leader_assigns() {
    let (_d, c) = setup();
    let (m1, _) = stable_one(&c, T0);
    let mut rx2 = waiting(join(&c, &req("", &[("roundrobin", b"x"), ("range", b"r")]), T0 + 10));
    assert_eq!(c.group_state("g"), Some((GroupState::PreparingRebalance, 1)));
    assert_eq!(c.heartbeat_at("g", &m1, None, 1, T0 + 20), REBALANCE_IN_PROGRESS);
    // Offsets may still be committed while preparing.
    let mut rx1 = waiting(join(&c, &req(&m1, &[("range", b"r")]), T0 + 30));
    let j1 = rx1.try_recv().unwrap();
    let j2 = rx2.try_recv().unwrap();
    assert_eq!((j1.generation_id, j2.generation_id), (2, 2));
    assert_eq!(j1.protocol_name.as_deref(), Some("range"), "the only protocol both support");
    assert_eq!(j1.leader, m1);
    assert_eq!(j1.members.len(), 2);
    assert!(j2.members.is_empty());
    assert_eq!(c.heartbeat_at("g", &j2.member_id, None, 2, T0 + 40), NONE);
    // The follower waits for the leader's assignment; the leader's sync answers both.
    let follower = sync(&c, &j2.member_id, 2, &[], T0 + 50);
    let SyncOutcome::Wait(mut frx) = follower else { panic!("follower waits") };
    assert!(frx.try_recv().is_err());
    let leader = synced(sync(&c, &m1, 2, &[(&m1, b"P0"), (&j2.member_id, b"P1")], T0 + 60));
    assert_eq!(&leader.assignment[..], b"P0");
    assert_eq!(&frx.try_recv().unwrap().assignment[..], b"P1");
    assert_eq!(c.group_state("g"), Some((GroupState::Stable, 2)));
    // A stable member's sync gets its assignment again.
    assert_eq!(&synced(sync(&c, &j2.member_id, 2, &[], T0 + 70)).assignment[..], b"P1");
    // A third is welcome; a fourth is over group.max.size (3).
    let _rx3 = waiting(join(&c, &range(), T0 + 80));
    let _rx1 = waiting(join(&c, &req(&m1, &[("range", b"r")]), T0 + 80));
    let _rx2 = waiting(join(&c, &req(&j2.member_id, &[("range", b"r")]), T0 + 80));
    assert_eq!(ready(join(&c, &range(), T0 + 90)).error, GROUP_MAX_SIZE_REACHED);
}

#[test]
fn protocols_are_chosen_by_vote_among_those_all_support() {
    let (_d, c) = setup();
    let mut a = waiting(join(&c, &req("", &[("a", b""), ("b", b""), ("c", b"")]), T0)).try_recv().unwrap();
    assert_eq!(a.protocol_name.as_deref(), Some("a"));
    synced(sync(&c, &a.member_id, 1, &[], T0));
    let mut rb = waiting(join(&c, &req("", &[("b", b""), ("c", b"")]), T0));
    let mut rc = waiting(join(&c, &req("", &[("c", b""), ("b", b"")]), T0));
    let mut ra = waiting(join(&c, &req(&a.member_id, &[("b", b""), ("a", b"")]), T0));
    a = ra.try_recv().unwrap();
    // b gets two votes (a, b), c one.
    assert_eq!(a.protocol_name.as_deref(), Some("b"));
    assert_eq!(rb.try_recv().unwrap().protocol_name.as_deref(), Some("b"));
    assert_eq!(rc.try_recv().unwrap().generation_id, 2);
}

#[test]
fn a_silent_member_expires_after_its_session_and_the_rest_rebalance() {
    let (_d, c) = setup();
    let (m1, _) = stable_one(&c, T0);
    let mut rx2 = waiting(join(&c, &range(), T0));
    let mut rx1 = waiting(join(&c, &req(&m1, &[("range", b"r")]), T0));
    let j2 = rx2.try_recv().unwrap();
    rx1.try_recv().unwrap();
    synced(sync(&c, &m1, 2, &[], T0));
    assert_eq!(c.group_state("g"), Some((GroupState::Stable, 2)));
    // m1 keeps heart-beating; m2 goes silent.
    for t in (T0 + 300..T0 + 1_500).step_by(300) {
        assert_eq!(c.heartbeat_at("g", &m1, None, 2, t), NONE, "at {t}");
        write(&c, c.tick_at(t).into_iter().flat_map(|w| w.2).collect());
    }
    assert_eq!(c.heartbeat_at("g", &j2.member_id, None, 2, T0 + 1_500), UNKNOWN_MEMBER_ID);
    assert_eq!(c.heartbeat_at("g", &m1, None, 2, T0 + 1_500), REBALANCE_IN_PROGRESS);
    let j1 = waiting(join(&c, &req(&m1, &[("range", b"r")]), T0 + 1_500)).try_recv().unwrap();
    assert_eq!((j1.generation_id, j1.members.len()), (3, 1));
}

#[test]
fn members_that_do_not_rejoin_in_the_rebalance_timeout_are_dropped() {
    let (_d, c) = setup();
    let (m1, _) = stable_one(&c, T0);
    let mut rx2 = waiting(join(&c, &range(), T0));
    let j2 = waiting(join(&c, &req(&m1, &[("range", b"r")]), T0)).try_recv().unwrap();
    let m2 = rx2.try_recv().unwrap().member_id;
    synced(sync(&c, &m1, 2, &[], T0));
    let _ = j2;
    // A third member joins; m1 rejoins; m2 only heartbeats (a stuck poll loop).
    let mut rx3 = waiting(join(&c, &range(), T0 + 100));
    let mut rx1 = waiting(join(&c, &req(&m1, &[("range", b"r")]), T0 + 100));
    for t in (T0 + 400..T0 + 5_100).step_by(400) {
        c.heartbeat_at("g", &m2, None, 2, t);
        write(&c, c.tick_at(t).into_iter().flat_map(|w| w.2).collect());
    }
    assert!(rx1.try_recv().is_err());
    write(&c, c.tick_at(T0 + 5_101).into_iter().flat_map(|w| w.2).collect());
    let j1 = rx1.try_recv().unwrap();
    assert_eq!((j1.generation_id, j1.members.len()), (3, 2));
    assert_eq!(rx3.try_recv().unwrap().generation_id, 3);
    assert_eq!(c.heartbeat_at("g", &m2, None, 2, T0 + 5_200), UNKNOWN_MEMBER_ID);
}

#[test]
fn leaving_members_rebalance_the_rest_and_the_last_empties_the_group() {
    let (_d, c) = setup();
    let (m1, _) = stable_one(&c, T0);
    let ((top, codes), writes) = c.leave_at("g", &[(m1.clone(), None), ("ghost".into(), None)], T0);
    write(&c, writes);
    assert_eq!((top, codes), (NONE, vec![NONE, UNKNOWN_MEMBER_ID]));
    assert_eq!(c.group_state("g"), Some((GroupState::Empty, 2)));
    let ((top, codes), _) = c.leave_at("nogroup", &[("x".into(), None)], T0);
    assert_eq!((top, codes), (NONE, vec![UNKNOWN_MEMBER_ID]));
}

#[test]
fn a_restarted_static_member_takes_its_place_without_a_rebalance() {
    let (_d, c) = setup();
    let mut r = range();
    r.group_instance_id = Some("i-1".into());
    let j = waiting(join(&c, &r, T0)).try_recv().unwrap();
    let old = j.member_id.clone();
    synced(sync(&c, &old, 1, &[(&old, b"A")], T0));
    // Restart: same instance id, no member id, same protocols.
    let o = join(&c, &r, T0 + 100);
    let JoinOutcome::AfterWrite(w, answer) = o else { panic!("no rebalance expected") };
    c.write_records("g", Vec::new(), Some(w)).unwrap();
    assert_eq!((answer.error, answer.generation_id), (NONE, 1));
    assert_ne!(answer.member_id, old);
    assert_eq!(answer.leader, old, "the old leader id, so the new member does not assign");
    assert_eq!(c.group_state("g"), Some((GroupState::Stable, 1)));
    let s = synced(sync(&c, &answer.member_id, 1, &[], T0 + 100));
    assert_eq!(&s.assignment[..], b"A");
    // The old incarnation is fenced.
    assert_eq!(c.heartbeat_at("g", &old, Some("i-1"), 1, T0 + 100), FENCED_INSTANCE_ID);
    assert_eq!(c.heartbeat_at("g", &answer.member_id, Some("i-1"), 1, T0 + 100), NONE);
    // A restart with which the group's protocol would change rebalances.
    let mut changed = req("", &[("roundrobin", b""), ("range", b"r")]);
    changed.group_instance_id = Some("i-1".into());
    let j = waiting(join(&c, &changed, T0 + 200)).try_recv().unwrap();
    assert_eq!(j.generation_id, 2);
}

#[test]
fn commits_follow_kafkas_rules_and_survive_a_reload() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let commit =
        |c: &Arc<Coordinator>, group: &str, generation: i32, member: &str, offset: i64, metadata: &str| {
            rt.block_on(c.commit_offsets(OffsetCommit {
                group_id: group.into(),
                generation_id: generation,
                member_id: member.into(),
                group_instance_id: None,
                offsets: vec![
                    PartitionCommit {
                        topic: "t".into(),
                        partition: 0,
                        offset,
                        leader_epoch: -1,
                        metadata: metadata.into(),
                    },
                    PartitionCommit {
                        topic: "nope".into(),
                        partition: 0,
                        offset,
                        leader_epoch: -1,
                        metadata: String::new(),
                    },
                ],
            }))
            .into_iter()
            .map(|x| x.2)
            .collect::<Vec<_>>()
        };
    // A group that only stores offsets (generation -1, no member id).
    assert_eq!(commit(&c, "simple", -1, "", 5, "m"), [NONE, UNKNOWN_TOPIC_OR_PARTITION]);
    assert_eq!(
        commit(&c, "simple", -1, "", 6, &"x".repeat(17)),
        [OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION]
    );
    // A generation of a group that does not exist.
    assert_eq!(commit(&c, "gone", 3, "m", 1, ""), [ILLEGAL_GENERATION, ILLEGAL_GENERATION]);
    // A group with members takes commits from its members only.
    let (m1, generation) = stable_one(&c, now_ms());
    assert_eq!(commit(&c, "g", -1, "", 1, "")[0], UNKNOWN_MEMBER_ID);
    assert_eq!(commit(&c, "g", generation + 1, &m1, 1, "")[0], ILLEGAL_GENERATION);
    assert_eq!(commit(&c, "g", generation, &m1, 42, "meta")[0], NONE);
    // An embedded consumer's commit to the same store is seen.
    let mut embedded = seglog_core::group::CommittedOffsets::new();
    embedded.insert(("t".into(), 1), (7, "e".into()));
    seglog_core::group::commit(&c.store, "simple", &embedded).unwrap();
    let fetched = rt.block_on(c.fetch_offsets("simple", None)).unwrap();
    let got: Vec<_> =
        fetched.iter().map(|(t, p, o)| (t.as_str(), *p, o.as_ref().map(|o| o.offset))).collect();
    assert_eq!(got, [("t", 0, Some(5)), ("t", 1, Some(7))]);
    let fetched = rt.block_on(c.fetch_offsets("g", Some(vec![("t".into(), 0), ("t".into(), 1)]))).unwrap();
    assert_eq!(fetched[0].2.as_ref().map(|o| (o.offset, o.metadata.as_str())), Some((42, "meta")));
    assert_eq!(fetched[1].2, None);
    // A reload rebuilds the groups (Stable, generation, leader, assignment) and offsets.
    let store = c.store.clone();
    c.shutdown();
    drop(c);
    let c = Coordinator::load(store.clone(), config()).unwrap();
    assert_eq!(c.group_state("g"), Some((GroupState::Stable, 1)));
    assert_eq!(c.heartbeat_at("g", &m1, None, 1, now_ms()), NONE);
    assert_eq!(&synced(sync(&c, &m1, 1, &[], now_ms())).assignment[..], b"A");
    let d = &c.describe_groups(&["g".into(), "unknown".into()]);
    assert_eq!((d[0].state, d[0].protocol.as_str(), d[0].members.len()), (GroupState::Stable, "range", 1));
    assert_eq!((d[1].state, d[1].error), (GroupState::Dead, NONE));
    let fetched = rt.block_on(c.fetch_offsets("simple", None)).unwrap();
    assert_eq!(fetched.len(), 2);
    // And the embedded consumer's reader sees the network commits.
    let (seen, _) = seglog_core::group::load_committed(&store, "g").unwrap();
    assert_eq!(seen.get(&("t".to_string(), 0)), Some(&(42, "meta".to_string())));
}

#[test]
fn empty_groups_are_deleted_and_their_offsets_expire() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(dir.path(), config());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let commit = |group: &str| {
        rt.block_on(c.commit_offsets(OffsetCommit {
            group_id: group.into(),
            generation_id: -1,
            offsets: vec![PartitionCommit {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                ..Default::default()
            }],
            ..Default::default()
        }))[0]
            .2
    };
    assert_eq!(commit("a"), NONE);
    assert_eq!(commit("b"), NONE);
    let (m1, _) = stable_one(&c, now_ms());
    let member_commit = rt.block_on(c.commit_offsets(OffsetCommit {
        group_id: "g".into(),
        generation_id: 1,
        member_id: m1.clone(),
        offsets: vec![PartitionCommit { topic: "t".into(), partition: 1, offset: 9, ..Default::default() }],
        ..Default::default()
    }));
    assert_eq!(member_commit[0].2, NONE);
    let ids: Vec<String> = ["a", "g", "zz"].iter().map(|s| s.to_string()).collect();
    let codes: Vec<i16> = rt.block_on(c.delete_groups(&ids)).into_iter().map(|x| x.1).collect();
    assert_eq!(codes, [NONE, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND]);
    assert_eq!(c.group_state("a"), None);
    // OffsetDelete: a stable consumer group's subscribed topics are refused.
    assert_eq!(rt.block_on(c.delete_offsets("zz", &[("t".into(), 0)])), Err(GROUP_ID_NOT_FOUND));
    // Retention: "b" (commit-time based) expires a minute after its commit.
    let now = now_ms();
    assert_eq!(c.heartbeat_at("g", &m1, None, 1, now + 61_000), NONE);
    let writes = c.tick_at(now + 61_000);
    rt.block_on(c.write_all(writes));
    assert_eq!(c.group_state("b"), None);
    assert!(c.group_state("g").is_some(), "a group with members keeps its offsets");
    let store = c.store.clone();
    let c2 = Coordinator::load(store, config()).unwrap();
    assert_eq!(c2.group_state("a"), None, "deleted groups stay deleted");
    assert_eq!(c2.group_state("b"), None, "expired groups stay expired");
    assert_eq!(c2.group_state("g").map(|s| s.0), Some(GroupState::Stable));
    let kept = rt.block_on(c2.fetch_offsets("g", None)).unwrap();
    assert_eq!(kept.len(), 1);
}

#[test]
fn shutdown_answers_waiting_members() {
    let (_d, c) = setup();
    let (m1, _) = stable_one(&c, T0);
    let _rx2 = waiting(join(&c, &range(), T0));
    let mut rx2b = waiting(join(&c, &range(), T0));
    let _ = m1;
    c.shutdown();
    assert_eq!(rx2b.try_recv().unwrap().error, COORDINATOR_NOT_AVAILABLE);
    assert_eq!(ready(join(&c, &range(), T0)).error, COORDINATOR_NOT_AVAILABLE);
}

#[test]
fn a_cluster_members_coordinator_serves_the_partitions_it_leads() {
    use seglog_core::group::{offsets_partition, CommittedOffsets};
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Offsets of two groups in different partitions of __consumer_offsets.
    let single = open(dir.path(), config());
    let store = single.store.clone();
    seglog_core::group::offsets_topic(&store, 4).unwrap();
    let (a, pa) = ("a".to_string(), offsets_partition("a", 4));
    let b = (0..100).map(|i| format!("b{i}")).find(|g| offsets_partition(g, 4) != pa).unwrap();
    let pb = offsets_partition(&b, 4);
    let commit = |group: &str, offset: i64| {
        let mut o = CommittedOffsets::new();
        o.insert(("t".into(), 0), (offset, String::new()));
        seglog_core::group::commit(&store, group, &o).unwrap();
    };
    commit(&a, 5);
    commit(&b, 6);
    single.shutdown();
    drop(single);
    let offset = |c: &Arc<Coordinator>, group: &str| {
        rt.block_on(c.fetch_offsets(group, None))
            .map(|o| o.first().and_then(|(_, _, o)| o.clone()).map(|o| o.offset))
    };

    let c = Coordinator::new(store.clone(), config());
    // Leading nothing: every group is another broker's.
    assert_eq!(offset(&c, &a), Err(NOT_COORDINATOR));
    assert_eq!(c.heartbeat_at(&a, "m", None, 1, T0), NOT_COORDINATOR);
    assert_eq!(c.describe_groups(std::slice::from_ref(&a))[0].error, NOT_COORDINATOR);
    // Leading a's partition: its groups are loaded and served, b's are not.
    rt.block_on(c.take_partitions(vec![(pa, 1)]));
    assert_eq!(offset(&c, &a), Ok(Some(5)));
    assert_eq!(offset(&c, &b), Err(NOT_COORDINATOR));
    c.owned.lock().insert(pb, ownership::Owned::Loading(2));
    assert_eq!(offset(&c, &b), Err(COORDINATOR_LOAD_IN_PROGRESS));
    rt.block_on(c.take_partitions(vec![(pa, 1), (pb, 2)]));
    assert_eq!(offset(&c, &b), Err(COORDINATOR_LOAD_IN_PROGRESS), "a partition already taken up stays");
    c.owned.lock().remove(&pb);
    rt.block_on(c.take_partitions(vec![(pa, 1), (pb, 2)]));
    assert_eq!(offset(&c, &b), Ok(Some(6)));
    // A member waiting for a rebalance when its partition goes is told NOT_COORDINATOR.
    let join_a = JoinGroup { group_id: a.clone(), ..range() };
    let first = waiting(join(&c, &join_a, T0)).try_recv().unwrap();
    assert_eq!(first.error, NONE);
    let mut second = waiting(join(&c, &join_a, T0 + 1));
    rt.block_on(c.take_partitions(vec![(pb, 2)]));
    assert_eq!(second.try_recv().unwrap().error, NOT_COORDINATOR);
    assert_eq!(c.group_state(&a), None);
    // Led again, in a new leadership: loaded afresh, with what another leader wrote meanwhile.
    commit(&a, 7);
    rt.block_on(c.take_partitions(vec![(pa, 3), (pb, 2)]));
    assert_eq!(offset(&c, &a), Ok(Some(7)));
    assert_eq!(offset(&c, &b), Ok(Some(6)));
}
