//! Tests of `offset_for_leader_epoch`.

/// A store's partition holding `records` one-record batches, its log start
/// moved to `start`.
fn log_with(dir: &std::path::Path, records: usize, start: i64) -> std::sync::Arc<seglog_core::PartitionLog> {
    use seglog_core::log::AppendOrigin;
    use seglog_core::record::{BatchBuilder, Compression, NewRecord};
    let store = seglog_core::Store::open(dir, &Default::default(), false).unwrap();
    store.create_topic("t", 1, &Default::default()).unwrap();
    let log = store.partition("t", 0).unwrap();
    for _ in 0..records {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(&NewRecord { timestamp: 1, key: None, value: Some(b"v"), headers: &[] });
        log.append_as_leader(b.build().unwrap(), AppendOrigin::Embedded).unwrap();
    }
    log.delete_records_before(start).unwrap();
    log
}

#[test]
fn the_current_epoch_ends_at_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(log_with(&dir.path().join("a"), 42, 5).offset_for_leader_epoch(0), (0, 42));
    assert_eq!(log_with(&dir.path().join("b"), 0, 0).offset_for_leader_epoch(0), (0, 0), "an empty log");
}

#[test]
fn epochs_never_seen_are_undefined_or_end_at_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = log_with(dir.path(), 42, 5);
    assert_eq!(log.offset_for_leader_epoch(-1), (-1, -1), "undefined asked, undefined answered");
    assert_eq!(log.offset_for_leader_epoch(1), (-1, -1), "a later epoch is unknown");
    assert_eq!(log.offset_for_leader_epoch(7), (-1, -1));
    assert_eq!(log.offset_for_leader_epoch(-3), (-3, 5), "before the first epoch: its start");
}

#[test]
fn the_current_leader_epoch_fences_or_is_unknown() {
    use crate::replica_manager::check_current_epoch;
    use kafka_protocol::ResponseError;
    assert_eq!(check_current_epoch(-1), Ok(()), "not given");
    assert_eq!(check_current_epoch(0), Ok(()));
    assert_eq!(check_current_epoch(1), Err(ResponseError::UnknownLeaderEpoch.code()));
    assert_eq!(check_current_epoch(-2), Err(ResponseError::FencedLeaderEpoch.code()));
}
