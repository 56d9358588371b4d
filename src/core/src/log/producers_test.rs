//! Tests of the log's producer state: duplicates, fencing, sequence gaps,
//! snapshots, recovery, truncation, retention and expiry.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::config::LogConfig;
use crate::log::{AppendInfo, AppendOrigin};
use crate::producer_state::snapshot;
use crate::record::{BatchBuilder, Compression, NewRecord, ProducerInfo};

/// A client's batch of `n` records from producer `pid` at `epoch`, sequences from `seq`.
fn batch(pid: i64, epoch: i16, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(ProducerInfo {
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
        transactional: false,
        control: false,
    });
    for i in 0..n {
        let v = format!("p{pid}-e{epoch}-s{seq}-{i}");
        b.append(&NewRecord { timestamp: now_ms(), key: None, value: Some(v.as_bytes()), headers: &[] });
    }
    b.build().unwrap()
}

fn plain(n: usize) -> Vec<u8> {
    batch(-1, -1, -1, n)
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 128,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open_with(dir: &Path, config: LogConfig, rp: i64, clean: bool) -> (PartitionLog, crate::log::LoadReport) {
    PartitionLog::open(&dir.join("t-0"), "t", 0, Arc::new(config), rp, None, clean).unwrap()
}

fn open(dir: &Path, clean: bool) -> PartitionLog {
    open_with(dir, small(), 0, clean).0
}

fn send(log: &PartitionLog, pid: i64, epoch: i16, seq: i32, n: usize) -> crate::Result<AppendInfo> {
    log.append_as_leader(batch(pid, epoch, seq, n), AppendOrigin::Client)
}

fn snapshots(dir: &Path) -> Vec<i64> {
    snapshot::list(&dir.join("t-0")).unwrap()
}

#[test]
fn a_retry_gets_the_first_copys_offsets_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    log.append_as_leader(plain(2), AppendOrigin::Client).unwrap();
    let first = send(&log, 7, 0, 0, 3).unwrap();
    assert_eq!((first.base_offset, first.last_offset, first.duplicate), (2, 4, false));
    let end = log.log_end_offset();
    let size = log.size_bytes();
    let again = send(&log, 7, 0, 0, 3).unwrap();
    assert!(again.duplicate);
    assert_eq!((again.base_offset, again.last_offset, again.records), (2, 4, 0));
    assert_eq!((log.log_end_offset(), log.size_bytes()), (end, size), "nothing written");
    let next = send(&log, 7, 0, 3, 1).unwrap();
    assert_eq!((next.base_offset, next.duplicate), (5, false));
    assert_eq!(log.high_watermark(), 6);
}

#[test]
fn fenced_epochs_and_sequence_gaps_are_refused_with_kafkas_codes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    send(&log, 7, 2, 0, 1).unwrap();
    let e = send(&log, 7, 1, 1, 1).unwrap_err();
    assert_eq!(e.kafka_code(), Some(47), "{e}");
    let e = send(&log, 7, 2, 5, 1).unwrap_err();
    assert_eq!(e.kafka_code(), Some(45), "{e}");
    let e = send(&log, 7, 3, 1, 1).unwrap_err();
    assert!(matches!(e, Error::OutOfOrderSequence { expected: 0, new_epoch: true, .. }), "{e}");
    assert_eq!(log.log_end_offset(), 1, "refused appends write nothing");
    // A refused batch in a multi-batch append refuses all of it.
    let mut two = batch(8, 0, 0, 1);
    two.extend(batch(7, 2, 9, 1));
    assert!(log.append_as_leader(two, AppendOrigin::Client).is_err());
    assert_eq!(log.log_end_offset(), 1);
    assert!(log.producer_state(8).is_none());
    // seglog's own writers are not sequence-checked (as Kafka's coordinator).
    log.append_as_leader(batch(7, 2, 9, 1), AppendOrigin::Embedded).unwrap();
}

#[test]
fn duplicates_are_found_after_a_clean_reopen_and_after_a_crash() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), true);
        let mut infos = Vec::new();
        for i in 0..20 {
            log.append_as_leader(plain(1), AppendOrigin::Client).unwrap();
            infos.push(send(&log, 3, 0, i * 2, 2).unwrap());
        }
        assert!(log.segment_count() > 3, "rolled");
        if clean {
            log.close().unwrap();
        } // else: a crash, nothing flushed or snapshotted at the end
        drop(log);
        let (log, report) = open_with(dir.path(), small(), 0, clean);
        assert_eq!(report.damaged_snapshots, 0);
        let last = infos.last().unwrap();
        let again = send(&log, 3, 0, 38, 2).unwrap();
        assert!(again.duplicate, "clean {clean}");
        assert_eq!((again.base_offset, again.last_offset), (last.base_offset, last.last_offset));
        assert_eq!(send(&log, 3, 0, 40, 1).unwrap().base_offset, log.log_end_offset() - 1);
    }
}

#[test]
fn snapshots_are_taken_at_rolls_and_at_close_and_a_clean_reopen_scans_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    for i in 0..20 {
        send(&log, 1, 0, i, 1).unwrap();
    }
    let bases = log.segment_bases();
    assert!(bases.len() > 2);
    let snaps = snapshots(dir.path());
    assert_eq!(snaps, bases[1..].to_vec(), "one per roll, named for the new segment");
    log.close().unwrap();
    let end = log.log_end_offset();
    assert_eq!(snapshots(dir.path()).last(), Some(&end), "one at the log end on close");
    drop(log);
    let log = open(dir.path(), true);
    assert_eq!(log.producer_state(1).unwrap().last_seq(), 19);
    assert_eq!(log.producer_snapshot_offsets().last(), Some(&end));
}

#[test]
fn a_damaged_snapshot_is_deleted_and_the_state_rebuilt_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    for i in 0..20 {
        send(&log, 1, 0, i, 1).unwrap();
    }
    let want = log.producer_state(1).unwrap();
    log.close().unwrap();
    drop(log);
    let snaps = snapshots(dir.path());
    for &s in &snaps {
        let p = snapshot::path(&dir.path().join("t-0"), s);
        let mut bytes = fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x55;
        fs::write(&p, bytes).unwrap();
    }
    let (log, report) = open_with(dir.path(), small(), 0, true);
    assert_eq!(report.damaged_snapshots, snaps.len(), "every one was tried and refused");
    // Rebuilt from the whole log: the same state, with all five batches.
    assert_eq!(log.producer_state(1).unwrap(), want);
    assert!(send(&log, 1, 0, 15, 1).unwrap().duplicate);
}

#[test]
fn truncation_cuts_the_producer_state_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    let mut ends = Vec::new();
    for i in 0..20 {
        ends.push(send(&log, 1, 0, i, 1).unwrap().last_offset + 1);
    }
    log.truncate_to(ends[9]).unwrap();
    assert_eq!(log.log_end_offset(), ends[9]);
    assert_eq!(log.high_watermark(), ends[9], "the high watermark comes back with the end");
    assert!(snapshots(dir.path()).iter().all(|&s| s <= ends[9]), "{:?}", snapshots(dir.path()));
    assert_eq!(log.producer_state(1).unwrap().last_seq(), 9);
    // Sequence 10 is expected again; 10..19's retries are no longer duplicates.
    let info = send(&log, 1, 0, 10, 1).unwrap();
    assert!(!info.duplicate);
    assert_eq!(info.base_offset, ends[9]);
}

#[test]
fn a_truncation_to_before_a_producers_first_batch_forgets_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    log.append_as_leader(plain(1), AppendOrigin::Client).unwrap();
    send(&log, 4, 0, 0, 1).unwrap();
    log.truncate_to(1).unwrap();
    assert!(log.producer_state(4).is_none());
}

#[test]
fn retention_deletes_the_snapshots_of_deleted_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { retention_bytes: 1200, file_delete_delay_ms: 0, ..small() };
    let (log, _) = open_with(dir.path(), config, 0, true);
    for i in 0..30 {
        send(&log, 1, 0, i, 1).unwrap();
    }
    let r = log.apply_retention(now_ms()).unwrap();
    assert!(r.deleted_segments > 0);
    // What is left: one snapshot per segment (the first one's too, now the
    // log start), as Kafka keeps them.
    let bases = log.segment_bases();
    assert_eq!(snapshots(dir.path()), bases);
    assert_eq!(log.producer_snapshot_offsets(), bases);
    assert_eq!(log.producer_state(1).unwrap().last_seq(), 29, "producers stay known");
}

#[test]
fn idle_producers_expire_at_producer_id_expiration_ms() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open_with(dir.path(), LogConfig { producer_id_expiration_ms: 1000, ..small() }, 0, true);
    send(&log, 1, 0, 0, 1).unwrap();
    assert_eq!(log.remove_expired_producers(now_ms()), 0);
    assert_eq!(log.remove_expired_producers(now_ms() + 2000), 1);
    assert_eq!(log.producer_count(), 0);
    // Forgotten, it may start anywhere again.
    send(&log, 1, 0, 5, 1).unwrap();
}

#[test]
fn a_read_only_opener_builds_no_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), true);
    send(&log, 1, 0, 0, 1).unwrap();
    let reader = PartitionLog::open_read_only(&dir.path().join("t-0"), "t", 0, Arc::new(small())).unwrap();
    assert_eq!(reader.producer_count(), 0);
    assert_eq!(reader.high_watermark(), 1);
}

#[test]
fn the_cleaner_keeps_each_producers_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = small();
    config.cleanup_policy.compact = true;
    let (log, _) = open_with(dir.path(), config, 0, true);
    // Producer 1 writes key k once; producer 2 overwrites it many times after.
    let p1 = log.append_as_leader(keyed(1, 0), AppendOrigin::Client).unwrap();
    for i in 0..30 {
        log.append_as_leader(keyed(2, i), AppendOrigin::Client).unwrap();
    }
    let c = crate::cleaner::clean(&log, 0, now_ms(), 1 << 20, 1 << 16, true).unwrap().unwrap();
    assert!(c.records_out < c.records_in);
    let slice = log.read(p1.base_offset, 1 << 20).unwrap();
    let bytes = slice.bytes().unwrap();
    let b = crate::record::RecordBatch::parse(&bytes).unwrap();
    assert_eq!((b.base_offset(), b.producer_id(), b.base_sequence()), (p1.base_offset, 1, 0));
    assert_eq!(b.records_count(), 0, "kept as an empty batch: its record was superseded");
    // A rebuild from the log alone (no snapshots) still knows producer 1.
    log.close().unwrap();
    drop(log);
    for s in snapshots(dir.path()) {
        fs::remove_file(snapshot::path(&dir.path().join("t-0"), s)).unwrap();
    }
    let mut config = small();
    config.cleanup_policy.compact = true;
    let (log, _) = open_with(dir.path(), config, 0, false);
    assert!(log.append_as_leader(keyed(1, 0), AppendOrigin::Client).unwrap().duplicate);
}

/// A one-record batch with key `k`, from producer `pid` at epoch 0.
fn keyed(pid: i64, seq: i32) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(ProducerInfo {
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: seq,
        transactional: false,
        control: false,
    });
    b.append(&NewRecord { timestamp: now_ms(), key: Some(b"k"), value: Some(b"v"), headers: &[] });
    b.build().unwrap()
}

/// What can happen next to a producer in the property test.
#[derive(Debug, Clone)]
enum Op {
    /// The producer's next batch, of `n` records.
    Next(i64, usize),
    /// A retry of one of its last batches (`back` from the end).
    Retry(i64, usize),
    /// A new epoch (from sequence 0).
    Bump(i64),
    Plain,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3i64, 1..4usize).prop_map(|(p, n)| Op::Next(p, n)),
        2 => (0..3i64, 0..5usize).prop_map(|(p, b)| Op::Retry(p, b)),
        1 => (0..3i64).prop_map(Op::Bump),
        1 => Just(Op::Plain),
    ]
}

/// Per producer: epoch, next sequence, and its batches (seq, records, base offset).
type Model = (i16, i32, Vec<(i32, usize, i64)>);

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A crash at any point, then recovery, rebuilds the producer state the
    /// log had: each producer's epoch and last batch, and its retries still
    /// get the first copy's offsets.
    #[test]
    fn recovery_after_a_crash_rebuilds_the_same_producer_state(
        ops in prop::collection::vec(op(), 1..60),
        close_first in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), true);
        let mut model: Vec<Model> = vec![(0, 0, Vec::new()); 3];
        for op in &ops {
            match *op {
                Op::Next(p, n) => {
                    let (epoch, seq, sent) = &mut model[p as usize];
                    let info = send(&log, p, *epoch, *seq, n).unwrap();
                    prop_assert!(!info.duplicate);
                    sent.push((*seq, n, info.base_offset));
                    *seq += n as i32;
                }
                Op::Retry(p, back) => {
                    let (epoch, _, sent) = &model[p as usize];
                    if let Some(&(seq, n, base)) = sent.iter().rev().nth(back) {
                        let info = send(&log, p, *epoch, seq, n).unwrap();
                        prop_assert!(info.duplicate);
                        prop_assert_eq!(info.base_offset, base);
                    }
                }
                Op::Bump(p) => {
                    let m = &mut model[p as usize];
                    *m = (m.0 + 1, 0, Vec::new());
                }
                Op::Plain => {
                    log.append_as_leader(plain(2), AppendOrigin::Client).unwrap();
                }
            }
        }
        let before: Vec<_> = (0..3).map(|p| log.producer_state(p)).collect();
        if close_first {
            log.close().unwrap();
        }
        drop(log);
        let log = open(dir.path(), false);
        for p in 0..3i64 {
            let after = log.producer_state(p);
            let b = &before[p as usize];
            prop_assert_eq!(after.as_ref().map(|e| e.epoch), b.as_ref().map(|e| e.epoch));
            prop_assert_eq!(
                after.as_ref().and_then(|e| e.last_batch().copied()),
                b.as_ref().and_then(|e| e.last_batch().copied())
            );
            let (epoch, _, sent) = &model[p as usize];
            if let Some(&(seq, n, base)) = sent.last() {
                let info = send(&log, p, *epoch, seq, n).unwrap();
                prop_assert!(info.duplicate);
                prop_assert_eq!(info.base_offset, base);
            }
        }
    }
}
