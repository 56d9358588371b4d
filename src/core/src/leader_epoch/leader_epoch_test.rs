//! Tests of `leader_epoch`: the facts of Kafka's `LeaderEpochFileCacheTest`.

use std::fs;

use super::*;

fn cache() -> (tempfile::TempDir, LeaderEpochFileCache) {
    let dir = tempfile::tempdir().unwrap();
    let c = LeaderEpochFileCache::new(&dir.path().join("leader-epoch-checkpoint"), Vec::new());
    (dir, c)
}

fn pairs(c: &LeaderEpochFileCache) -> Vec<(i32, i64)> {
    c.entries().iter().map(|e| (e.epoch, e.start_offset)).collect()
}

fn file(dir: &tempfile::TempDir) -> String {
    fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap()
}

#[test]
fn assign_records_epochs_and_writes_the_file() {
    let (dir, mut c) = cache();
    assert!(c.assign(2, 6).unwrap());
    assert_eq!(c.latest_epoch(), Some(2));
    assert_eq!(c.end_offset_for(2, 10), (2, 10));
    assert_eq!(file(&dir), "0\n1\n2 6\n");
}

#[test]
fn the_same_epoch_at_a_later_offset_changes_nothing() {
    let (dir, mut c) = cache();
    c.assign(2, 6).unwrap();
    assert!(!c.assign(2, 7).unwrap());
    assert_eq!(pairs(&c), [(2, 6)]);
    assert_eq!(file(&dir), "0\n1\n2 6\n");
}

#[test]
fn negative_epochs_or_offsets_are_ignored() {
    let (dir, mut c) = cache();
    assert!(!c.assign(-1, 5).unwrap());
    assert!(!c.assign(1, -1).unwrap());
    assert!(c.is_empty());
    assert!(!dir.path().join("leader-epoch-checkpoint").exists());
}

#[test]
fn an_older_epoch_drops_the_later_ones_keeping_offsets_monotonic() {
    // Kafka's shouldEnforceMonotonicallyIncreasingStartOffsets.
    let (_dir, mut c) = cache();
    c.assign(2, 6).unwrap();
    c.assign(1, 7).unwrap();
    assert_eq!(pairs(&c), [(1, 7)]);
    assert_eq!(c.end_offset_for(1, 20), (1, 20));
    assert_eq!(c.end_offset_for(2, 20), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
}

#[test]
fn a_new_epoch_at_a_lower_offset_drops_the_entries_it_contradicts() {
    let (_dir, mut c) = cache();
    c.assign(2, 6).unwrap();
    c.assign(3, 5).unwrap();
    assert_eq!(pairs(&c), [(3, 5)]);
}

#[test]
fn the_same_epoch_at_an_earlier_offset_moves_its_start() {
    // Kafka's shouldTruncateIfMatchingEpochButEarlierStartingOffset.
    let (_dir, mut c) = cache();
    c.assign(5, 11).unwrap();
    c.assign(6, 12).unwrap();
    c.assign(7, 13).unwrap();
    c.assign(7, 12).unwrap();
    assert_eq!(pairs(&c), [(5, 11), (7, 12)]);
    assert_eq!(c.end_offset_for(5, 0), (5, 12));
    assert_eq!(c.end_offset_for(6, 0), (5, 12));
}

#[test]
fn end_offset_for_answers_as_kafka() {
    let (_dir, mut c) = cache();
    // Empty: nothing is known (shouldReturnUnsupportedIfNoEpochRecorded).
    assert_eq!(c.end_offset_for(0, 0), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
    assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, 73), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
    c.assign(5, 11).unwrap();
    c.assign(6, 12).unwrap();
    c.assign(7, 13).unwrap();
    // Below the first: the requested epoch, ending where the first began.
    assert_eq!(c.end_offset_for(4, 0), (4, 11));
    // An older epoch ends where the next one begins.
    assert_eq!(c.end_offset_for(5, 20), (5, 12));
    assert_eq!(c.end_offset_for(6, 20), (6, 13));
    // The current epoch ends at the log end.
    assert_eq!(c.end_offset_for(7, 20), (7, 20));
    // A later one is unknown.
    assert_eq!(c.end_offset_for(8, 20), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
    assert_eq!(c.end_offset_for(UNDEFINED_EPOCH, 20), (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET));
}

#[test]
fn an_epoch_missing_between_two_gets_the_floor_epoch() {
    // Kafka's shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested.
    let (_dir, mut c) = cache();
    c.assign(0, 10).unwrap();
    c.assign(2, 13).unwrap();
    c.assign(4, 17).unwrap();
    assert_eq!(c.end_offset_for(1, 30), (0, 13));
    assert_eq!(c.end_offset_for(2, 30), (2, 17));
    assert_eq!(c.end_offset_for(3, 30), (2, 17));
}

#[test]
fn truncate_from_end_drops_epochs_starting_at_or_after_the_offset() {
    let (dir, mut c) = cache();
    c.assign(2, 6).unwrap();
    c.assign(3, 8).unwrap();
    c.assign(4, 11).unwrap();
    c.truncate_from_end(9).unwrap();
    assert_eq!(pairs(&c), [(2, 6), (3, 8)]);
    c.truncate_from_end(8).unwrap();
    assert_eq!(pairs(&c), [(2, 6)]);
    // Past the latest start: nothing to drop.
    c.truncate_from_end(100).unwrap();
    assert_eq!(pairs(&c), [(2, 6)]);
    c.truncate_from_end(0).unwrap();
    assert!(c.is_empty());
    assert_eq!(file(&dir), "0\n0\n");
}

#[test]
fn truncate_from_start_moves_the_first_epoch_up() {
    let (dir, mut c) = cache();
    c.assign(2, 6).unwrap();
    c.assign(3, 8).unwrap();
    c.assign(4, 11).unwrap();
    // Below the first entry: nothing changes.
    c.truncate_from_start(5).unwrap();
    assert_eq!(pairs(&c), [(2, 6), (3, 8), (4, 11)]);
    // Inside epoch 2: its start moves up.
    c.truncate_from_start(7).unwrap();
    assert_eq!(pairs(&c), [(2, 7), (3, 8), (4, 11)]);
    // Exactly at epoch 3's start: epoch 2 goes.
    c.truncate_from_start(8).unwrap();
    assert_eq!(pairs(&c), [(3, 8), (4, 11)]);
    // Past the last start: only the last epoch is left, starting there.
    c.truncate_from_start(15).unwrap();
    assert_eq!(pairs(&c), [(4, 15)]);
    assert_eq!(file(&dir), "0\n1\n4 15\n");
}

#[test]
fn persisted_entries_reload() {
    let (dir, mut c) = cache();
    c.assign(0, 0).unwrap();
    c.assign(3, 40).unwrap();
    let path = dir.path().join("leader-epoch-checkpoint");
    let read = LeaderEpochFileCache::read(&path).unwrap().unwrap();
    assert_eq!(read, c.entries());
    assert!(LeaderEpochFileCache::read(&dir.path().join("missing")).unwrap().is_none());
    fs::write(&path, "0\n2\n0 0\n").unwrap();
    assert!(LeaderEpochFileCache::read(&path).is_err());
}
