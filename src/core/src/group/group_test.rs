//! Tests of `group`.

use super::*;

#[test]
fn java_string_hash_matches_java() {
    // Values of "...".hashCode() in Java.
    assert_eq!(java_string_hash(""), 0);
    assert_eq!(java_string_hash("a"), 97);
    assert_eq!(java_string_hash("hello"), 99162322);
    assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    assert_eq!(offsets_partition("polygenelubricants", 50), 0);
    // Non-BMP characters count as two UTF-16 units.
    assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
}

#[test]
fn key_and_value_round_trip_in_kafkas_layout() {
    let k = OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 3 };
    let bytes = k.encode().unwrap();
    assert_eq!(bytes, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
    assert_eq!(OffsetCommitKey::decode(&bytes).unwrap(), Some(k));
    let v = OffsetCommitValue { offset: 42, leader_epoch: -1, metadata: "m".into(), commit_timestamp: 7 };
    let bytes = v.encode().unwrap();
    assert_eq!(&bytes[..2], &[0, 3]);
    assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), v);
}

#[test]
fn junk_is_an_error_not_a_panic() {
    for junk in
        [&b""[..], b"\x00", b"\x00\x01\x00\x05ab", b"\x00\x01\xff\xff", b"\x00\x01\x00\x01\xff\x00\x00"]
    {
        assert!(OffsetCommitKey::decode(junk).is_err(), "{junk:?}");
    }
    assert_eq!(OffsetCommitKey::decode(b"\x00\x02anything").unwrap(), None);
    for junk in [&b""[..], b"\x00\x03\x00", b"\x00\x09\x00\x00\x00\x00\x00\x00\x00\x01"] {
        assert!(OffsetCommitValue::decode(junk).is_err(), "{junk:?}");
    }
}

mod group_metadata {
    use super::*;
    use crate::group::{GroupMetadataKey, GroupMetadataValue, MemberMetadata};
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._\\-/ é]{0,12}"
    }

    fn arb_member() -> impl Strategy<Value = MemberMetadata> {
        (
            text(),
            prop::option::of(text()),
            text(),
            text(),
            any::<i32>(),
            any::<i32>(),
            prop::collection::vec(any::<u8>(), 0..40),
            prop::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(member_id, group_instance_id, client_id, client_host, r, s, sub, asg)| {
                MemberMetadata {
                    member_id,
                    group_instance_id,
                    client_id,
                    client_host,
                    rebalance_timeout: r,
                    session_timeout: s,
                    subscription: sub,
                    assignment: asg,
                }
            })
    }

    fn arb_value() -> impl Strategy<Value = GroupMetadataValue> {
        (
            text(),
            any::<i32>(),
            prop::option::of(text()),
            prop::option::of(text()),
            any::<i64>(),
            prop::collection::vec(arb_member(), 0..5),
        )
            .prop_map(|(protocol_type, generation, protocol, leader, ts, members)| {
                GroupMetadataValue {
                    protocol_type,
                    generation,
                    protocol,
                    leader,
                    current_state_timestamp: ts,
                    members,
                }
            })
    }

    fn sample() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 7,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 1_700_000_000_000,
            members: vec![MemberMetadata {
                member_id: "m-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout: 300_000,
                session_timeout: 45_000,
                subscription: vec![1, 2],
                assignment: vec![3],
            }],
        }
    }

    #[test]
    fn key_is_version_2_and_offset_keys_are_not_group_keys() {
        let k = GroupMetadataKey { group: "g".into() };
        let bytes = k.encode().unwrap();
        assert_eq!(bytes, [0, 2, 0, 1, b'g']);
        assert_eq!(GroupMetadataKey::decode(&bytes).unwrap(), Some(k));
        let offset_key =
            OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 0 }.encode().unwrap();
        assert_eq!(GroupMetadataKey::decode(&offset_key).unwrap(), None);
        assert_eq!(OffsetCommitKey::decode(&bytes).unwrap(), None);
    }

    #[test]
    fn value_version_3_layout() {
        let bytes = sample().encode().unwrap();
        let mut expected = vec![0, 3];
        expected.extend_from_slice(&[0, 8]);
        expected.extend_from_slice(b"consumer");
        expected.extend_from_slice(&7i32.to_be_bytes());
        expected.extend_from_slice(&[0, 5]);
        expected.extend_from_slice(b"range");
        expected.extend_from_slice(&[0, 3]);
        expected.extend_from_slice(b"m-1");
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 3]);
        expected.extend_from_slice(b"m-1");
        expected.extend_from_slice(&[0, 1, b'i', 0, 1, b'c', 0, 10]);
        expected.extend_from_slice(b"/127.0.0.1");
        expected.extend_from_slice(&300_000i32.to_be_bytes());
        expected.extend_from_slice(&45_000i32.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 2, 1, 2, 0, 0, 0, 1, 3]);
        assert_eq!(bytes, expected);
    }

    #[test]
    fn older_and_flexible_versions_decode() {
        // Version 0: no state timestamp, no instance id, no rebalance timeout.
        let mut v0 = vec![0, 0, 0, 1, b'c'];
        v0.extend_from_slice(&3i32.to_be_bytes());
        v0.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // null protocol and leader
        v0.extend_from_slice(&1i32.to_be_bytes());
        v0.extend_from_slice(&[0, 1, b'm', 0, 1, b'x', 0, 1, b'h']);
        v0.extend_from_slice(&10i32.to_be_bytes());
        v0.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1, 9]);
        let v = GroupMetadataValue::decode(&v0).unwrap();
        assert_eq!((v.generation, v.protocol.as_deref(), v.current_state_timestamp), (3, None, -1));
        assert_eq!((v.members[0].rebalance_timeout, v.members[0].session_timeout), (10, 10));
        assert_eq!(v.members[0].assignment, [9]);
        // Version 4: compact strings and bytes, tagged fields (one unknown, skipped).
        let mut v4 = vec![0, 4, 2, b'c'];
        v4.extend_from_slice(&1i32.to_be_bytes());
        v4.extend_from_slice(&[2, b'r', 0]); // protocol "r", null leader
        v4.extend_from_slice(&5i64.to_be_bytes());
        v4.push(2); // one member
        v4.extend_from_slice(&[2, b'm', 0, 2, b'x', 2, b'h']);
        v4.extend_from_slice(&7i32.to_be_bytes());
        v4.extend_from_slice(&8i32.to_be_bytes());
        v4.extend_from_slice(&[3, 1, 2, 1, 0]); // subscription [1,2], empty assignment, no tags
        v4.extend_from_slice(&[1, 0, 2, 0xaa, 0xbb]); // one tagged field of 2 bytes
        let v = GroupMetadataValue::decode(&v4).unwrap();
        assert_eq!(v.protocol.as_deref(), Some("r"));
        assert_eq!(v.leader, None);
        assert_eq!(v.members[0].group_instance_id, None);
        assert_eq!((v.members[0].rebalance_timeout, v.members[0].session_timeout), (7, 8));
        assert_eq!(v.members[0].subscription, [1, 2]);
    }

    #[test]
    fn records_round_trip_through_a_store() {
        use crate::group::{append_records, offsets_topic, read_records, CoordinatorRecord};
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path(), &Default::default(), false).unwrap();
        let topic = offsets_topic(&store, 3).unwrap();
        assert_eq!(topic.partitions.len(), 3);
        // A store that has the topic keeps its partition count.
        assert_eq!(offsets_topic(&store, 50).unwrap().partitions.len(), 3);
        let log = topic.partition(0).unwrap().clone();
        let records = vec![
            CoordinatorRecord::Group { key: GroupMetadataKey { group: "g".into() }, value: Some(sample()) },
            CoordinatorRecord::Offset {
                key: OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 1 },
                value: Some(OffsetCommitValue {
                    offset: 5,
                    leader_epoch: 0,
                    metadata: String::new(),
                    commit_timestamp: 1,
                }),
            },
            CoordinatorRecord::Group { key: GroupMetadataKey { group: "g".into() }, value: None },
        ];
        append_records(&log, &records).unwrap();
        let mut back = Vec::new();
        let (next, skipped) = read_records(&log, 0, |at, r| back.push((at, r))).unwrap();
        assert_eq!((next, skipped), (3, 0));
        assert_eq!(back.into_iter().map(|(_, r)| r).collect::<Vec<_>>(), records);
        let mut tail = Vec::new();
        read_records(&log, 2, |at, _| tail.push(at)).unwrap();
        assert_eq!(tail, [2]);
        store.close().unwrap();
    }

    proptest! {
        #[test]
        fn values_round_trip(v in arb_value()) {
            let bytes = v.encode().unwrap();
            prop_assert_eq!(GroupMetadataValue::decode(&bytes).unwrap(), v);
        }

        #[test]
        fn keys_round_trip(group in text()) {
            let k = GroupMetadataKey { group };
            prop_assert_eq!(GroupMetadataKey::decode(&k.encode().unwrap()).unwrap(), Some(k));
        }

        /// Every cut of a value is an error; any flipped byte is an error or a
        /// value, never a panic or a huge allocation.
        #[test]
        fn damaged_values_never_panic(
            v in arb_value(),
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let bytes = v.encode().unwrap();
            let cut = at.index(bytes.len());
            prop_assert!(GroupMetadataValue::decode(&bytes[..cut]).is_err());
            let mut damaged = bytes.clone();
            damaged[cut] ^= flip;
            let _ = GroupMetadataValue::decode(&damaged);
            let mut longer = bytes;
            longer.push(0);
            prop_assert!(GroupMetadataValue::decode(&longer).is_err());
        }

        #[test]
        fn junk_never_panics(junk in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = GroupMetadataValue::decode(&junk);
            let _ = GroupMetadataKey::decode(&junk);
            let mut v4 = vec![0u8, 4];
            v4.extend_from_slice(&junk);
            let _ = GroupMetadataValue::decode(&v4);
        }
    }
}

#[test]
fn consumer_assignments_decode_and_junk_is_an_error() {
    // Version 1: [("t", [0, 2])], null user data.
    let mut a = vec![0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2];
    a.extend_from_slice(&0i32.to_be_bytes());
    a.extend_from_slice(&2i32.to_be_bytes());
    a.extend_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(decode_consumer_assignment(&a).unwrap(), vec![("t".to_string(), vec![0, 2])]);
    assert_eq!(decode_consumer_assignment(&[0, 0, 0, 0, 0, 0]).unwrap(), vec![]);
    for junk in [&b""[..], b"\xff\xff", b"\x00\x00\x7f\xff\xff\xff", &a[..a.len() - 9]] {
        assert!(decode_consumer_assignment(junk).is_err(), "{junk:?}");
    }
}

mod catalog {
    use crate::group::{append_records, CoordinatorRecord, GroupMetadataKey, GroupMetadataValue};
    use crate::group::{commit, delete_group, load_committed, load_groups, offsets_topic, CommittedOffsets};
    use crate::store::Store;

    fn offsets(items: &[(&str, i32, i64)]) -> CommittedOffsets {
        items.iter().map(|(t, p, o)| ((t.to_string(), *p), (*o, String::new()))).collect()
    }

    fn metadata() -> GroupMetadataValue {
        GroupMetadataValue {
            protocol_type: "consumer".into(),
            generation: 2,
            protocol: Some("range".into()),
            leader: None,
            current_state_timestamp: 1,
            members: vec![],
        }
    }

    #[test]
    fn groups_list_with_their_latest_offsets_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Default::default(), false).unwrap();
        assert!(load_groups(&store, None).unwrap().0.is_empty());
        // Several partitions: groups land in different ones.
        let topic = offsets_topic(&store, 4).unwrap();
        commit(&store, "a", &offsets(&[("t", 0, 5), ("t", 1, 7)])).unwrap();
        commit(&store, "a", &offsets(&[("t", 0, 9)])).unwrap();
        commit(&store, "b", &offsets(&[("u", 0, 1)])).unwrap();
        let p = crate::group::offsets_partition("c", 4);
        let log = topic.partition(p).unwrap().clone();
        let key = GroupMetadataKey { group: "c".into() };
        append_records(&log, &[CoordinatorRecord::Group { key, value: Some(metadata()) }]).unwrap();

        let (groups, skipped) = load_groups(&store, None).unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["a", "b", "c"]);
        let a = &groups["a"];
        let got: Vec<_> = a.offsets.iter().map(|((t, p), v)| (t.as_str(), *p, v.offset)).collect();
        assert_eq!(got, [("t", 0, 9), ("t", 1, 7)]);
        assert!(a.offsets.values().all(|v| v.commit_timestamp > 0));
        assert_eq!(a.metadata, None);
        assert_eq!(groups["c"].metadata, Some(metadata()));
        assert!(groups["c"].offsets.is_empty());

        let (only, _) = load_groups(&store, Some("b")).unwrap();
        assert_eq!(only.keys().collect::<Vec<_>>(), ["b"]);
        assert!(load_groups(&store, Some("nope")).unwrap().0.is_empty());
        store.close().unwrap();
    }

    #[test]
    fn delete_writes_tombstones_for_offsets_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), &Default::default(), false).unwrap();
        assert_eq!(delete_group(&store, "a").unwrap(), 0);
        commit(&store, "a", &offsets(&[("t", 0, 5), ("t", 1, 7)])).unwrap();
        commit(&store, "b", &offsets(&[("t", 0, 3)])).unwrap();
        let topic = offsets_topic(&store, 1).unwrap();
        let log = topic.partition(0).unwrap().clone();
        let key = GroupMetadataKey { group: "a".into() };
        append_records(&log, &[CoordinatorRecord::Group { key, value: Some(metadata()) }]).unwrap();
        let end = log.log_end_offset();

        assert_eq!(delete_group(&store, "a").unwrap(), 3);
        assert_eq!(log.log_end_offset(), end + 3);
        let (groups, _) = load_groups(&store, None).unwrap();
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["b"]);
        assert!(load_committed(&store, "a").unwrap().0.is_empty());
        assert_eq!(load_committed(&store, "b").unwrap().0, offsets(&[("t", 0, 3)]));
        // Deleted is gone: a second delete writes nothing.
        assert_eq!(delete_group(&store, "a").unwrap(), 0);
        // A read-only view of the store sees it too.
        let ro = Store::open(dir.path(), &Default::default(), true).unwrap();
        assert_eq!(load_groups(&ro, None).unwrap().0.len(), 1);
        ro.close().unwrap();
        store.close().unwrap();
    }
}
