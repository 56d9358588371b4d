//! Tests of `producer_state`.

use super::*;

/// A batch of `n` records from producer `pid` at `epoch`, sequences from `seq`,
/// written at `offset`.
fn pb(pid: i64, epoch: i16, seq: i32, n: i32, offset: i64) -> ProducerBatch {
    ProducerBatch {
        producer_id: pid,
        epoch,
        first_seq: seq,
        last_seq: increment_sequence(seq, n - 1),
        first_offset: offset,
        last_offset: offset + i64::from(n - 1),
        max_timestamp: 1000 + offset,
        control: false,
    }
}

fn state() -> ProducerStateManager {
    ProducerStateManager::new(Path::new("/nonexistent"))
}

fn accept(s: &mut ProducerStateManager, b: ProducerBatch) {
    assert_eq!(s.check_append(&[b], Validation::Client).unwrap(), AppendCheck::Ok, "{b:?}");
    s.apply(&b);
}

#[test]
fn sequences_must_follow_within_an_epoch() {
    let mut s = state();
    accept(&mut s, pb(1, 0, 0, 3, 0));
    accept(&mut s, pb(1, 0, 3, 2, 3));
    match s.check_append(&[pb(1, 0, 6, 1, 5)], Validation::Client) {
        Err(Error::OutOfOrderSequence { sequence: 6, expected: 5, new_epoch: false, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(s.entry(1).unwrap().last_seq(), 4);
    assert_eq!(s.map_end(), 5);
}

#[test]
fn each_of_the_last_five_batches_is_a_duplicate_and_an_older_one_is_out_of_order() {
    let mut s = state();
    for i in 0..7 {
        accept(&mut s, pb(1, 0, i * 2, 2, 100 + i64::from(i) * 2));
    }
    for i in 2..7 {
        let retry = pb(1, 0, i * 2, 2, 999);
        match s.check_append(&[retry], Validation::Client).unwrap() {
            AppendCheck::Duplicate(m) => {
                assert_eq!((m.first_offset, m.last_offset), (100 + i64::from(i) * 2, 101 + i64::from(i) * 2));
            }
            other => panic!("batch {i}: {other:?}"),
        }
    }
    // The sixth from last is forgotten: no longer recognised as a retry.
    assert!(matches!(
        s.check_append(&[pb(1, 0, 2, 2, 999)], Validation::Client),
        Err(Error::OutOfOrderSequence { expected: 14, .. })
    ));
    // A different range over the same sequences is no retry either.
    assert!(s.check_append(&[pb(1, 0, 12, 1, 999)], Validation::Client).is_err());
}

#[test]
fn an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero() {
    let mut s = state();
    accept(&mut s, pb(1, 5, 0, 1, 0));
    match s.check_append(&[pb(1, 4, 1, 1, 1)], Validation::Client) {
        Err(e @ Error::InvalidProducerEpoch { epoch: 4, current_epoch: 5, .. }) => {
            assert_eq!(e.kafka_code(), Some(47))
        }
        other => panic!("{other:?}"),
    }
    // Even a coordinator's write (epoch only) is fenced.
    assert!(s.check_append(&[pb(1, 4, 1, 1, 1)], Validation::EpochOnly).is_err());
    match s.check_append(&[pb(1, 6, 3, 1, 1)], Validation::Client) {
        Err(e @ Error::OutOfOrderSequence { expected: 0, new_epoch: true, .. }) => {
            assert_eq!(e.kafka_code(), Some(45))
        }
        other => panic!("{other:?}"),
    }
    accept(&mut s, pb(1, 6, 0, 1, 1));
    assert_eq!(s.entry(1).unwrap().epoch, 6);
    assert_eq!(s.entry(1).unwrap().batches().count(), 1, "a new epoch forgets the old one's batches");
}

#[test]
fn an_unknown_producer_may_start_anywhere_as_in_kafka() {
    let mut s = state();
    accept(&mut s, pb(9, 0, 42, 2, 0));
    accept(&mut s, pb(9, 0, 44, 1, 2));
    assert!(s.check_append(&[pb(9, 0, 46, 1, 3)], Validation::Client).is_err());
}

#[test]
fn sequences_wrap_after_i32_max() {
    let mut s = state();
    // A batch ending exactly at i32::MAX (an unknown producer may start there).
    accept(&mut s, pb(1, 0, i32::MAX - 1, 2, 0));
    assert!(s.check_append(&[pb(1, 0, 1, 1, 2)], Validation::Client).is_err());
    accept(&mut s, pb(1, 0, 0, 1, 2));
    // One that wraps inside the batch.
    let mut s = state();
    accept(&mut s, pb(1, 0, i32::MAX - 1, 4, 0));
    assert_eq!(s.entry(1).unwrap().last_seq(), 1);
    accept(&mut s, pb(1, 0, 2, 1, 4));
}

#[test]
fn the_batches_of_one_append_are_checked_in_order_and_change_nothing() {
    let mut s = state();
    accept(&mut s, pb(1, 0, 0, 1, 0));
    let ok = [pb(1, 0, 1, 1, 1), pb(2, 0, 0, 1, 2), pb(1, 0, 2, 1, 3)];
    assert_eq!(s.check_append(&ok, Validation::Client).unwrap(), AppendCheck::Ok);
    let bad = [pb(1, 0, 1, 1, 1), pb(1, 0, 1, 1, 2)];
    assert!(s.check_append(&bad, Validation::Client).is_err());
    assert_eq!(s.entry(1).unwrap().last_seq(), 0, "checking applies nothing");
    assert!(s.entry(2).is_none());
}

#[test]
fn idle_producers_expire() {
    let mut s = state();
    accept(&mut s, pb(1, 0, 0, 1, 0)); // timestamp 1000
    accept(&mut s, pb(2, 0, 0, 1, 5000)); // timestamp 6000
    assert_eq!(s.remove_expired(5000, 4000), 1);
    assert!(s.entry(1).is_none() && s.entry(2).is_some());
}

#[test]
fn snapshots_reload_and_a_damaged_one_is_deleted_for_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = ProducerStateManager::new(dir.path());
    accept(&mut s, pb(1, 0, 0, 2, 0));
    assert!(s.take_snapshot(true).unwrap());
    assert!(!s.take_snapshot(true).unwrap(), "nothing new since");
    accept(&mut s, pb(1, 0, 2, 2, 2));
    assert!(s.take_snapshot(false).unwrap());
    assert_eq!(s.take_unsynced(), vec![snapshot::path(dir.path(), 4)]);
    assert_eq!(s.snapshot_offsets(), vec![2, 4]);

    let mut r = ProducerStateManager::new(dir.path());
    r.load_snapshot_list().unwrap();
    assert!(r.truncate_and_reload(-1, 4, 0, i64::MAX).unwrap().is_empty());
    assert_eq!(
        r.entry(1),
        s.entry(1)
            .map(|e| {
                let last = e.last_batch().copied();
                ProducerStateEntry::with_last_batch(1, 0, -1, e.last_timestamp, None, last)
            })
            .as_ref(),
        "a snapshot keeps the last batch"
    );
    assert_eq!(r.map_end(), 4);

    std::fs::write(snapshot::path(dir.path(), 4), b"torn").unwrap();
    let mut r = ProducerStateManager::new(dir.path());
    r.load_snapshot_list().unwrap();
    let damaged = r.truncate_and_reload(-1, 4, 0, i64::MAX).unwrap();
    assert_eq!(damaged.len(), 1);
    assert!(!snapshot::path(dir.path(), 4).exists(), "a damaged snapshot is deleted");
    assert_eq!(r.map_end(), 2, "the older one is used: the caller replays from 2");
    assert_eq!(r.entry(1).unwrap().last_seq(), 1);
}

#[test]
fn stray_snapshots_go_but_the_clean_shutdown_one_past_the_last_segment_stays() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = ProducerStateManager::new(dir.path());
    for o in [0, 5, 7, 10, 12] {
        s.set_map_end(o);
        s.take_snapshot(true).unwrap();
    }
    s.remove_stray_snapshots(&[0, 10]).unwrap();
    assert_eq!(s.snapshot_offsets(), vec![10, 12]);
    assert_eq!(snapshot::list(dir.path()).unwrap(), vec![10, 12]);
}
