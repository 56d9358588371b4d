use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Decodable;
use seglog_core::log::AppendOrigin;
use seglog_core::record::{Compression, NewRecord};

use super::*;
use seglog_core::store::Store;

/// A single broker's replica manager over `store`.
fn manager(store: &std::sync::Arc<Store>) -> crate::replica_manager::ReplicaManager {
    crate::replica_manager::ReplicaManager::new(
        store.clone(),
        None,
        Default::default(),
        Default::default(),
        tokio::sync::watch::channel(false).1,
    )
}

/// Materialises the parts (reading file slices) as a client receives them.
fn flatten(parts: &[Part]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        match p {
            Part::Bytes(b) => out.extend_from_slice(b),
            Part::File(f) => out.extend(f.segment.read_bytes(f.position, f.length as usize).unwrap()),
        }
    }
    out
}

#[test]
fn the_hand_encoded_response_decodes_with_the_protocol_crate_at_every_version() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &BTreeMap::new(), false).unwrap();
    store.create_topic("t", 2, &BTreeMap::new()).unwrap();
    let log = store.partition("t", 1).unwrap();
    let recs: Vec<NewRecord<'_>> = (0..5)
        .map(|_| NewRecord { key: Some(b"k"), value: Some(b"value"), headers: &[], timestamp: 1 })
        .collect();
    log.append_records(&recs, Compression::None, false, AppendOrigin::Embedded).unwrap();
    let wanted = vec![
        Wanted { topic: "t".into(), partition: 0, offset: 0, max_bytes: 1 << 20, current_epoch: -1 },
        Wanted { topic: "t".into(), partition: 1, offset: 0, max_bytes: 1 << 20, current_epoch: -1 },
        Wanted { topic: "nope".into(), partition: 0, offset: 0, max_bytes: 1 << 20, current_epoch: -1 },
        Wanted { topic: "t".into(), partition: 1, offset: 99, max_bytes: 1 << 20, current_epoch: -1 },
    ];
    let (topics, total) = manager(&store).read(&wanted, 1 << 20, &Reader::consumer());
    let expected = log.read(0, 1 << 20).unwrap().bytes().unwrap();
    assert_eq!(total, expected.len() as u64);
    for version in VERSIONS.0..=VERSIONS.1 {
        for isolation in [0i8, 1] {
            let bytes = flatten(&encode(version, 0, 0, &topics, isolation));
            let r = FetchResponse::decode(&mut Bytes::from(bytes), version).unwrap();
            let names: Vec<_> = r.responses.iter().map(|t| t.topic.0.to_string()).collect();
            assert_eq!(names, ["t", "nope", "t"], "v{version}");
            let p0 = &r.responses[0].partitions[0];
            assert_eq!((p0.error_code, p0.high_watermark), (0, 0));
            let p1 = &r.responses[0].partitions[1];
            assert_eq!((p1.partition_index, p1.error_code, p1.high_watermark), (1, 0, 5));
            assert_eq!(p1.records.as_deref(), Some(&expected[..]), "v{version}");
            assert_eq!(r.responses[1].partitions[0].error_code, 3, "unknown topic");
            assert_eq!(r.responses[2].partitions[0].error_code, 1, "offset out of range");
            if version >= 5 {
                assert_eq!(p1.log_start_offset, 0);
            }
            assert_eq!(p1.aborted_transactions.is_none(), isolation == 0);
        }
    }
}

#[test]
fn only_the_first_partition_with_data_may_exceed_the_limits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &BTreeMap::new(), false).unwrap();
    store.create_topic("t", 2, &BTreeMap::new()).unwrap();
    let big = vec![7u8; 4000];
    for p in 0..2 {
        let rec = [NewRecord { key: None, value: Some(&big), headers: &[], timestamp: 1 }];
        store
            .partition("t", p)
            .unwrap()
            .append_records(&rec, Compression::None, false, AppendOrigin::Embedded)
            .unwrap();
    }
    let wanted: Vec<Wanted> = (0..2)
        .map(|p| Wanted { topic: "t".into(), partition: p, offset: 0, max_bytes: 100, current_epoch: -1 })
        .collect();
    let (topics, total) = manager(&store).read(&wanted, 1000, &Reader::consumer());
    let slices: Vec<_> = topics[0].partitions.iter().map(|p| p.records.as_ref().map(|f| f.length)).collect();
    assert!(slices[0].unwrap() > 4000, "the first batch goes out whole");
    assert_eq!(slices[1], None, "no room left for the second");
    assert_eq!(total, slices[0].unwrap());
}
