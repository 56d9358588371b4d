use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use seglog_core::client::consumer_read::DecodedBatch;
use seglog_core::error::{Error, Result};
use seglog_core::log::AppendOrigin;
use seglog_core::record::{parse_records_from, Compression, NewRecord};
use seglog_core::store::Store;

use super::*;

/// A record as the tests keep it: its offset.
struct Rec(i64);

impl Record for Rec {
    fn offset(&self) -> i64 {
        self.0
    }
}

struct Decoder;

impl Decode<Rec> for Decoder {
    fn decode(
        &mut self,
        _: &TopicPartition,
        batches: &[DecodedBatch],
        from: i64,
        limit: usize,
    ) -> Result<Vec<Rec>> {
        let mut out = Vec::new();
        for b in batches {
            for r in parse_records_from(&b.payload, b.records, b.last_offset_delta, 0)? {
                let offset = b.base_offset + i64::from(r.offset_delta);
                if offset >= from && out.len() < limit {
                    out.push(Rec(offset));
                }
            }
        }
        Ok(out)
    }
}

fn store_with(topics: &[(&str, i32, usize)]) -> (tempfile::TempDir, Arc<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &BTreeMap::new(), false).unwrap();
    for &(name, partitions, records) in topics {
        let t = store.create_topic(name, partitions, &BTreeMap::new()).unwrap();
        for p in 0..partitions {
            let values: Vec<Vec<u8>> = (0..records).map(|i| format!("{p}-{i}").into_bytes()).collect();
            let recs: Vec<NewRecord<'_>> = values
                .iter()
                .map(|v| NewRecord { timestamp: 1000, key: None, value: Some(v), headers: &[] })
                .collect();
            if !recs.is_empty() {
                t.partition(p)
                    .unwrap()
                    .append_records(&recs, Compression::None, false, AppendOrigin::Embedded)
                    .unwrap();
            }
        }
    }
    (dir, store)
}

fn consumer(store: &Arc<Store>, reset: OffsetReset) -> Consumer<Rec> {
    let config = ConsumerConfig { auto_offset_reset: reset, ..ConsumerConfig::default() };
    Consumer::new(Box::new(StoreSource::new(store.clone())), None, config).unwrap()
}

fn values(got: &[Taken<Rec>]) -> Vec<(i32, i64)> {
    got.iter()
        .flat_map(|(tp, chunk, range)| chunk.records()[range.clone()].iter().map(|r| (tp.1, r.0)))
        .collect()
}

#[test]
fn polls_take_at_most_the_limit_and_every_record_once_in_turn() {
    let (_dir, store) = store_with(&[("t", 3, 40)]);
    let mut c = consumer(&store, OffsetReset::Earliest);
    c.subscribe(&["t".to_string()], None).unwrap();
    let mut seen = Vec::new();
    loop {
        let got = c.poll(25, Duration::ZERO, &mut Decoder).unwrap();
        let got = values(&got);
        assert!(got.len() <= 25);
        if got.is_empty() {
            break;
        }
        seen.extend(got);
    }
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(sorted, (0..3).flat_map(|p| (0..40).map(move |o| (p, o))).collect::<Vec<_>>());
    for p in 0..3 {
        let offsets: Vec<i64> = seen.iter().filter(|(q, _)| *q == p).map(|(_, o)| *o).collect();
        assert_eq!(offsets, (0..40).collect::<Vec<_>>(), "partition {p} in order");
        assert_eq!(c.position(&("t".to_string(), p)).unwrap(), 40);
    }
}

#[test]
fn positions_resets_and_seeks() {
    let (_dir, store) = store_with(&[("t", 1, 10)]);
    let tp = ("t".to_string(), 0);
    let mut latest = consumer(&store, OffsetReset::Latest);
    latest.assign(vec![tp.clone()]).unwrap();
    assert_eq!(latest.position(&tp).unwrap(), 10);
    assert!(latest.poll(5, Duration::ZERO, &mut Decoder).unwrap().is_empty());
    latest.seek(&tp, 7).unwrap();
    assert_eq!(values(&latest.poll(5, Duration::ZERO, &mut Decoder).unwrap()), vec![(0, 7), (0, 8), (0, 9)]);

    let mut none = consumer(&store, OffsetReset::None);
    none.assign(vec![tp.clone()]).unwrap();
    assert!(matches!(none.position(&tp), Err(Error::NoOffsetForPartition(_))));

    // A position removed by DeleteRecords is reset (earliest: the new log start).
    let mut earliest = consumer(&store, OffsetReset::Earliest);
    earliest.assign(vec![tp.clone()]).unwrap();
    earliest.seek(&tp, 2).unwrap();
    store.delete_records("t", 0, 5).unwrap();
    assert_eq!(values(&earliest.poll(1, Duration::ZERO, &mut Decoder).unwrap()), Vec::<(i32, i64)>::new());
    assert_eq!(values(&earliest.poll(1, Duration::ZERO, &mut Decoder).unwrap()), vec![(0, 5)]);
}

#[test]
fn a_seek_drops_what_was_fetched_and_a_chunk_handed_out_stops() {
    let (_dir, store) = store_with(&[("t", 1, 100)]);
    let tp = ("t".to_string(), 0);
    let mut c = consumer(&store, OffsetReset::Earliest);
    c.assign(vec![tp.clone()]).unwrap();
    let chunk = c.next_chunk(Duration::ZERO, &mut Decoder).unwrap().expect("records");
    assert_eq!(chunk.next_record().map(|r| r.0), Some(0));
    assert_eq!(c.position(&tp).unwrap(), 1, "a record handed out counts as consumed");
    c.seek(&tp, 50).unwrap();
    assert!(chunk.next_record().is_none(), "the seek cleared the chunk");
    assert_eq!(values(&c.poll(1, Duration::ZERO, &mut Decoder).unwrap()), vec![(0, 50)]);
}

#[test]
fn a_pattern_matches_whole_names_and_never_internal_topics() {
    let (_dir, store) =
        store_with(&[("logs-a", 1, 1), ("logs-b", 2, 1), ("xlogs-c", 1, 1), ("__consumer_offsets", 1, 0)]);
    let mut c = consumer(&store, OffsetReset::Earliest);
    c.subscribe(&[], Some("logs-.*|__.*")).unwrap();
    let mut got = c.assignment().unwrap().to_vec();
    got.sort();
    assert_eq!(got, vec![("logs-a".to_string(), 0), ("logs-b".to_string(), 0), ("logs-b".to_string(), 1)]);
    assert!(matches!(c.subscribe(&[], Some("(")), Err(Error::InvalidArgument(_))));
    assert!(matches!(c.assign(vec![("logs-a".to_string(), 0)]), Err(Error::IllegalState(_))));
    assert!(matches!(c.position(&("xlogs-c".to_string(), 0)), Err(Error::IllegalState(_))));
}

#[test]
fn commits_go_to_the_stores_offsets_topic_and_survive() {
    let (_dir, store) = store_with(&[("t", 2, 5)]);
    let config = ConsumerConfig { auto_offset_reset: OffsetReset::Earliest, ..ConsumerConfig::default() };
    let (m, skipped) = Membership::on_store(store.clone(), "g").unwrap();
    assert_eq!(skipped, 0);
    let mut c: Consumer<Rec> =
        Consumer::new(Box::new(StoreSource::new(store.clone())), Some(m), config.clone()).unwrap();
    c.subscribe(&["t".to_string()], None).unwrap();
    while !c.poll(100, Duration::ZERO, &mut Decoder).unwrap().is_empty() {}
    assert_eq!(c.close(true).unwrap().map(|e| e.to_string()), None);
    assert!(matches!(c.poll(1, Duration::ZERO, &mut Decoder), Err(Error::ClientClosed(_))));
    let (m, _) = Membership::on_store(store.clone(), "g").unwrap();
    let c: Consumer<Rec> = Consumer::new(Box::new(StoreSource::new(store)), Some(m), config).unwrap();
    assert_eq!(c.committed(&("t".to_string(), 1)).unwrap(), Some((5, String::new())));
}
