//! Tests of `epochs`: the cache kept with the log, the leader's stamping, the
//! high watermark, and what an embedded log writes (unchanged).

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::config::LogConfig;
use crate::leader_epoch::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
use crate::log::AppendOrigin;
use crate::record::batch::{set_base_offset, set_partition_leader_epoch};
use crate::record::{BatchBuilder, Compression, NewRecord, RecordBatch};

fn batch(n: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..n {
        let v = format!("value-{ts}-{i}");
        b.append(&NewRecord { timestamp: ts, key: None, value: Some(v.as_bytes()), headers: &[] });
    }
    b.build().unwrap()
}

fn small() -> Arc<LogConfig> {
    Arc::new(LogConfig { segment_bytes: 400, ..LogConfig::default() })
}

fn open(dir: &Path, clean: bool) -> (PartitionLog, crate::log::LoadReport) {
    PartitionLog::open(&dir.join("t-0"), "t", 0, small(), 0, None, clean).unwrap()
}

fn pairs(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epoch_entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

fn checkpoint_text(dir: &Path) -> String {
    fs::read_to_string(dir.join("t-0").join(LEADER_EPOCH_CHECKPOINT)).unwrap()
}

fn all_bytes(log: &PartitionLog) -> Vec<u8> {
    let mut out = Vec::new();
    for seg in log.segments() {
        out.extend(fs::read(log.dir().join(crate::segment::file_name(seg.base_offset, ".log"))).unwrap());
    }
    out
}

#[test]
fn an_embedded_log_writes_what_it_always_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 0\n");
    let mut want: Vec<u8> = Vec::new();
    let mut next = 0;
    for i in 0..6 {
        let b = batch(3, 1_000 + i);
        let mut expected = b.clone();
        set_base_offset(&mut expected, next);
        set_partition_leader_epoch(&mut expected, 0);
        want.extend(&expected);
        let info = log.append_as_leader(b, AppendOrigin::Embedded).unwrap();
        assert_eq!(info.base_offset, next);
        next = info.last_offset + 1;
    }
    assert!(log.segment_count() > 1, "the test should roll");
    assert_eq!(all_bytes(&log), want, "bytes as before: offsets assigned, epoch 0");
    assert_eq!(log.leader_epoch(), 0);
    assert_eq!(pairs(&log), [(0, 0)]);
    assert_eq!(log.high_watermark(), next);
    assert_eq!(log.checkpointed_high_watermark(), None);
    log.close().unwrap();
    drop(log);
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 0\n");
    let (log, _) = open(dir.path(), true);
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 0\n");
    assert_eq!(log.high_watermark(), next);
    assert_eq!(log.offset_for_leader_epoch(0), (0, next));
}

#[test]
fn set_leader_epoch_stamps_appends_and_records_where_each_epoch_began() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    log.append_as_leader(batch(2, 1), AppendOrigin::Embedded).unwrap();
    log.set_leader_epoch(3).unwrap();
    assert_eq!(log.leader_epoch(), 3);
    let info = log.append_as_leader(batch(2, 2), AppendOrigin::Embedded).unwrap();
    let bytes = log.read(info.base_offset, 1 << 20).unwrap().bytes().unwrap();
    assert_eq!(RecordBatch::parse(&bytes).unwrap().partition_leader_epoch(), 3);
    log.set_leader_epoch(5).unwrap();
    // A new epoch with nothing appended yet also begins at the log end.
    assert_eq!(pairs(&log), [(0, 0), (3, 2), (5, 4)]);
    assert_eq!(checkpoint_text(dir.path()), "0\n3\n0 0\n3 2\n5 4\n");
    assert!(matches!(log.set_leader_epoch(4), Err(Error::InvalidArgument(_))));
    assert!(matches!(log.set_leader_epoch(-1), Err(Error::InvalidArgument(_))));
    log.set_leader_epoch(5).unwrap();
    assert_eq!(log.offset_for_leader_epoch(0), (0, 2));
    assert_eq!(log.offset_for_leader_epoch(3), (3, 4));
    assert_eq!(log.offset_for_leader_epoch(4), (3, 4));
    assert_eq!(log.offset_for_leader_epoch(5), (5, 4));
    assert_eq!(log.offset_for_leader_epoch(6), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
    log.close().unwrap();
    drop(log);
    // As Kafka's loader does, an epoch that began at the log end with nothing
    // in it goes at reopen (a broker sets it again); the log leads from the
    // latest epoch it holds batches of.
    let (log, _) = open(dir.path(), true);
    assert_eq!(log.leader_epoch(), 3);
    assert_eq!(pairs(&log), [(0, 0), (3, 2)]);
    log.set_leader_epoch(5).unwrap();
    assert_eq!(pairs(&log), [(0, 0), (3, 2), (5, 4)]);
}

#[test]
fn truncation_and_a_moved_log_start_cut_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    for epoch in [1, 2, 3] {
        log.set_leader_epoch(epoch).unwrap();
        log.append_as_leader(batch(2, 1), AppendOrigin::Embedded).unwrap();
    }
    // Epoch 1 begins at 0, where the open's epoch 0 began: 0 goes.
    assert_eq!(pairs(&log), [(1, 0), (2, 2), (3, 4)]);
    log.truncate_to(3).unwrap();
    assert_eq!(log.high_watermark(), 2, "the cut falls to a batch boundary");
    assert_eq!(pairs(&log), [(1, 0)], "epoch 2 began at the cut");
    // The log still leads in epoch 3, and its next append says so.
    log.append_as_leader(batch(2, 1), AppendOrigin::Embedded).unwrap();
    log.append_as_leader(batch(2, 1), AppendOrigin::Embedded).unwrap();
    log.truncate_to(4).unwrap();
    assert_eq!(pairs(&log), [(1, 0), (3, 2)]);
    log.delete_records_before(1).unwrap();
    assert_eq!(pairs(&log), [(1, 1), (3, 2)]);
    log.delete_records_before(3).unwrap();
    assert_eq!(pairs(&log), [(3, 3)]);
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n3 3\n");
}

#[test]
fn a_missing_or_damaged_checkpoint_is_rebuilt_from_the_batches() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    for epoch in [0, 2, 7] {
        log.set_leader_epoch(epoch).unwrap();
        log.append_as_leader(batch(3, 1), AppendOrigin::Embedded).unwrap();
        log.append_as_leader(batch(1, 1), AppendOrigin::Embedded).unwrap();
    }
    let want = pairs(&log);
    assert_eq!(want, [(0, 0), (2, 4), (7, 8)]);
    log.close().unwrap();
    drop(log);
    let path = dir.path().join("t-0").join(LEADER_EPOCH_CHECKPOINT);
    for damage in [None, Some("0\n3\n0 0\n2 4\n"), Some("0\n1\n9 0\n1 5\n"), Some("garbage")] {
        match damage {
            None => fs::remove_file(&path).unwrap(),
            Some(text) => fs::write(&path, text).unwrap(),
        }
        let (log, report) = open(dir.path(), true);
        assert_eq!(report.damaged_epoch_checkpoints, usize::from(damage.is_some()), "{damage:?}");
        assert_eq!(pairs(&log), want, "{damage:?}");
        assert_eq!(checkpoint_text(dir.path()), "0\n3\n0 0\n2 4\n7 8\n");
        log.close().unwrap();
    }
}

#[test]
fn entries_past_the_recovered_end_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    log.append_as_leader(batch(2, 1), AppendOrigin::Embedded).unwrap();
    log.flush().unwrap();
    drop(log);
    // A crash after a later epoch was recorded but before its batches stayed.
    let path = dir.path().join("t-0").join(LEADER_EPOCH_CHECKPOINT);
    fs::write(&path, "0\n3\n0 0\n4 2\n6 9\n").unwrap();
    let (log, _) = open(dir.path(), false);
    assert_eq!(pairs(&log), [(0, 0)]);
    assert_eq!(log.leader_epoch(), 0);
    assert_eq!(checkpoint_text(dir.path()), "0\n1\n0 0\n");
}

#[test]
fn a_follower_high_watermark_never_passes_its_end_nor_goes_back() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    log.append_as_leader(batch(5, 1), AppendOrigin::Embedded).unwrap();
    assert_eq!(log.set_high_watermark(100).unwrap(), 5);
    assert_eq!(log.set_high_watermark(3).unwrap(), 5, "never backwards");
    assert!(log.set_high_watermark(-1).is_err());
    assert_eq!(log.checkpointed_high_watermark(), Some(5));
    log.restore_high_watermark(2);
    assert_eq!(log.high_watermark(), 2);
    log.restore_high_watermark(50);
    assert_eq!(log.high_watermark(), 5, "at most the log end");
}

#[test]
fn a_read_only_opener_sees_the_writers_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    log.set_leader_epoch(4).unwrap();
    log.append_as_leader(batch(2, 1), AppendOrigin::Embedded).unwrap();
    let ro = PartitionLog::open_read_only(&dir.path().join("t-0"), "t", 0, small()).unwrap();
    assert_eq!(ro.latest_epoch(), Some(4));
    assert_eq!(ro.offset_for_leader_epoch(0), (0, 0));
    assert!(ro.set_leader_epoch(5).is_err());
    assert!(ro.set_high_watermark(1).is_err());
}

#[test]
fn a_replicated_leaders_appends_leave_the_high_watermark_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), true);
    log.append_as_leader(batch(2, 1), AppendOrigin::Client).unwrap();
    assert_eq!(log.high_watermark(), 2, "alone, the high watermark follows the appends");
    log.set_replicated(true);
    assert!(log.is_replicated());
    log.append_as_leader(batch(3, 2), AppendOrigin::Client).unwrap();
    assert_eq!((log.log_end_offset(), log.high_watermark()), (5, 2));
    assert_eq!(log.set_high_watermark(4).unwrap(), 4, "moved by the leader once the ISR has the records");
    assert_eq!(log.set_high_watermark(9).unwrap(), 5, "never past the log end");
    assert_eq!(log.checkpointed_high_watermark(), Some(5));
    log.set_replicated(false);
    log.append_as_leader(batch(1, 3), AppendOrigin::Client).unwrap();
    assert_eq!(log.high_watermark(), 6);
}
