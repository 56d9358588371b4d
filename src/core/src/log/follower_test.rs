//! Tests of `follower`.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::clock::now_ms;
use crate::config::LogConfig;
use crate::log::{AppendOrigin, LEADER_EPOCH_CHECKPOINT};
use crate::record::batch::set_base_offset;
use crate::record::{BatchBuilder, Compression, NewRecord, ProducerInfo};

fn batch(n: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..n {
        let v = format!("value-{ts}-{i}");
        b.append(&NewRecord { timestamp: ts, key: None, value: Some(v.as_bytes()), headers: &[] });
    }
    b.build().unwrap()
}

fn idempotent(pid: i64, seq: i32, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).producer(ProducerInfo {
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: seq,
        transactional: false,
        control: false,
    });
    for i in 0..n {
        let v = format!("{i}");
        b.append(&NewRecord { timestamp: now_ms(), key: None, value: Some(v.as_bytes()), headers: &[] });
    }
    b.build().unwrap()
}

fn small() -> Arc<LogConfig> {
    Arc::new(LogConfig { segment_bytes: 400, ..LogConfig::default() })
}

fn open_at(dir: &Path, name: &str, clean: bool) -> PartitionLog {
    PartitionLog::open(&dir.join(name), "t", 0, small(), 0, None, clean).unwrap().0
}

fn pairs(log: &PartitionLog) -> Vec<(i32, i64)> {
    log.leader_epoch_entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

/// The log's batches as they are on disk, back to back.
fn log_bytes(log: &PartitionLog) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        let bytes = log.read(at, 1 << 20).unwrap().bytes().unwrap();
        let mut pos = 0;
        while pos < bytes.len() {
            let b = RecordBatch::parse(&bytes[pos..]).unwrap();
            if b.base_offset() >= at {
                out.extend(b.as_bytes());
                at = b.last_offset() + 1;
            }
            pos += b.size();
        }
    }
    out
}

#[test]
fn a_follower_writes_the_leaders_batches_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open_at(dir.path(), "leader-0", true);
    for (seq, (epoch, n)) in [(0, 2), (2, 3), (5, 1)].into_iter().enumerate() {
        leader.set_leader_epoch(epoch).unwrap();
        leader.append_as_leader(batch(n, 100 + i64::from(epoch)), AppendOrigin::Embedded).unwrap();
        leader.append_as_leader(idempotent(7, seq as i32, 1), AppendOrigin::Client).unwrap();
    }
    assert!(leader.producer_state(7).is_some());
    let bytes = log_bytes(&leader);
    let follower = open_at(dir.path(), "follower-0", true);
    let info = follower.append_as_follower(bytes.clone()).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (0, leader.log_end_offset() - 1));
    assert_eq!(log_bytes(&follower), bytes, "offsets, epochs and timestamps as the leader wrote them");
    // Written in runs, one write each, rolled where the leader's batch-by-batch appends rolled.
    assert!(leader.segment_count() > 2);
    assert_eq!(follower.segment_bases(), leader.segment_bases());
    assert_eq!(pairs(&follower), pairs(&leader));
    assert_eq!(follower.offset_for_leader_epoch(2), leader.offset_for_leader_epoch(2));
    assert_eq!(follower.producer_state(7), leader.producer_state(7), "producer state follows too");
    assert_eq!(follower.high_watermark(), 0, "a follower's high watermark waits for its leader's");
    assert_eq!(follower.set_high_watermark(leader.high_watermark()).unwrap(), follower.log_end_offset());
    follower.close().unwrap();
    drop(follower);
    let follower = open_at(dir.path(), "follower-0", true);
    assert_eq!(pairs(&follower), pairs(&leader));
    assert_eq!(
        fs::read_to_string(dir.path().join("follower-0").join(LEADER_EPOCH_CHECKPOINT)).unwrap(),
        fs::read_to_string(dir.path().join("leader-0").join(LEADER_EPOCH_CHECKPOINT)).unwrap()
    );
}

#[test]
fn gaps_overlaps_and_bad_crcs_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let follower = open_at(dir.path(), "f-0", true);
    let mut first = batch(2, 1);
    set_base_offset(&mut first, 0);
    follower.append_as_follower(first).unwrap();
    // A gap after the log end.
    let mut gap = batch(1, 1);
    set_base_offset(&mut gap, 5);
    let err = follower.append_as_follower(gap).unwrap_err();
    assert!(err.to_string().contains("expected 2"), "{err}");
    // An overlap with what the log holds.
    let mut overlap = batch(1, 1);
    set_base_offset(&mut overlap, 1);
    assert!(follower.append_as_follower(overlap).is_err());
    // A good batch then a gap: nothing of it is written.
    let mut good = batch(1, 1);
    set_base_offset(&mut good, 2);
    let mut bad_next = batch(1, 1);
    set_base_offset(&mut bad_next, 9);
    good.extend(bad_next);
    assert!(follower.append_as_follower(good).is_err());
    // A flipped byte inside the CRC's range.
    let mut corrupt = batch(1, 1);
    set_base_offset(&mut corrupt, 2);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x40;
    let err = follower.append_as_follower(corrupt).unwrap_err();
    assert!(err.to_string().to_lowercase().contains("crc"), "{err}");
    // Torn and empty input.
    let mut torn = batch(1, 1);
    set_base_offset(&mut torn, 2);
    torn.truncate(torn.len() - 3);
    assert!(follower.append_as_follower(torn).is_err());
    assert!(follower.append_as_follower(Vec::new()).is_err());
    assert_eq!(follower.log_end_offset(), 2, "nothing of a refused append stays");
}

#[test]
fn a_log_holding_newer_epochs_refuses_to_lead_in_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let leader = open_at(dir.path(), "l-0", true);
    leader.set_leader_epoch(4).unwrap();
    leader.append_as_leader(batch(1, 1), AppendOrigin::Embedded).unwrap();
    let follower = open_at(dir.path(), "f-0", true);
    follower.append_as_follower(log_bytes(&leader)).unwrap();
    assert!(follower.append_as_leader(batch(1, 1), AppendOrigin::Embedded).is_err());
    assert!(follower.set_leader_epoch(3).is_err());
    follower.set_leader_epoch(5).unwrap();
    follower.append_as_leader(batch(1, 1), AppendOrigin::Embedded).unwrap();
    assert_eq!(pairs(&follower), [(4, 0), (5, 1)]);
}

/// Batches of random epochs (rising, sometimes the same for several batches)
/// and sizes, as a leader wrote them.
fn leader_batches(steps: &[(u8, u8)]) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut epoch, mut next) = (0i32, 0i64);
    for &(bump, n) in steps {
        epoch += i32::from(bump % 3);
        let mut b = batch(usize::from(n % 4) + 1, 1);
        set_base_offset(&mut b, next);
        crate::record::batch::set_partition_leader_epoch(&mut b, epoch);
        next += i64::from(n % 4) + 1;
        out.extend(b);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A follower's cache after random epochs is what the batches say, and a
    /// crash (no close, the checkpoint possibly lost) brings back the same.
    #[test]
    fn a_followers_cache_survives_a_crash(
        steps in prop::collection::vec((any::<u8>(), any::<u8>()), 1..30),
        split in any::<prop::sample::Index>(),
        lose_file in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let bytes = leader_batches(&steps);
        let follower = open_at(dir.path(), "f-0", true);
        // In two fetches, split at a batch boundary.
        let mut bounds = vec![0];
        let mut pos = 0;
        while pos < bytes.len() {
            pos += RecordBatch::parse(&bytes[pos..]).unwrap().size();
            bounds.push(pos);
        }
        let cut = bounds[split.index(bounds.len())];
        if cut > 0 {
            follower.append_as_follower(bytes[..cut].to_vec()).unwrap();
        }
        if cut < bytes.len() {
            follower.append_as_follower(bytes[cut..].to_vec()).unwrap();
        }
        let before = pairs(&follower);
        let end = follower.log_end_offset();
        follower.flush().unwrap();
        drop(follower);
        if lose_file {
            fs::remove_file(dir.path().join("f-0").join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        }
        let reopened = open_at(dir.path(), "f-0", false);
        prop_assert_eq!(reopened.log_end_offset(), end);
        prop_assert_eq!(pairs(&reopened), before);
    }
}

#[test]
fn a_follower_behind_its_leaders_log_start_starts_again_there() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_at(dir.path(), "t-0", true);
    for pid_seq in 0..6 {
        log.append_as_leader(idempotent(7, pid_seq * 3, 3), AppendOrigin::Client).unwrap();
    }
    assert!(log.segment_count() > 1);
    assert_eq!(log.log_end_offset(), 18);
    log.truncate_fully_and_start_at(40).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.high_watermark()), (40, 40, 40));
    assert_eq!((log.segment_bases(), log.recovery_point()), (vec![40], 40));
    assert!(log.leader_epoch_entries().is_empty());
    assert_eq!(log.producer_count(), 0, "the producer state starts empty");
    let names: Vec<String> = fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("00000000000000000000.")), "{names:?}");
    // The leader's batches from there on are taken as they are.
    let mut b = batch(2, now_ms());
    set_base_offset(&mut b, 40);
    log.append_as_follower(b).unwrap();
    log.set_high_watermark(42).unwrap();
    assert_eq!((log.log_end_offset(), log.high_watermark()), (42, 42));
    log.close().unwrap();
    // Reopened (after a clean close or a crash), it starts at 40.
    for clean in [true, false] {
        let again =
            PartitionLog::open(&dir.path().join("t-0"), "t", 0, small(), 40, Some(40), clean).unwrap().0;
        assert_eq!((again.log_start_offset(), again.log_end_offset()), (40, 42));
        again.close().unwrap();
    }
    // A crash before the store's checkpoints were written again: they still say 0.
    let again = PartitionLog::open(&dir.path().join("t-0"), "t", 0, small(), 0, Some(0), false).unwrap().0;
    assert_eq!((again.log_start_offset(), again.log_end_offset()), (40, 42));
    assert!(again.truncate_fully_and_start_at(-1).unwrap_err().to_string().contains("start offset -1"));
}
