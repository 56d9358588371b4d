//! Tests of `maintenance`.

use super::*;
use crate::config::{CleanupPolicy, LogConfig};
use crate::log::AppendOrigin;
use crate::record::{BatchBuilder, Compression, NewRecord, RecordBatch};
use std::path::Path;

fn batch(ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(&NewRecord { timestamp: ts, key: Some(b"k"), value: Some(&[7u8; 200]), headers: &[] });
    b.build().unwrap()
}

fn open(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(&dir.join("t-0"), "t", 0, Arc::new(config), 0, None, true).unwrap().0
}

#[test]
fn retention_by_time_deletes_old_segments_and_moves_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 1000,
            retention_ms: 10_000,
            file_delete_delay_ms: 0,
            ..LogConfig::default()
        },
    );
    for i in 0..40 {
        log.append_as_leader(batch(100_000 + i * 1000), AppendOrigin::Embedded).unwrap();
    }
    let before = log.segment_count();
    // Segments whose newest record is more than 10 s older than "now" go.
    let r = log.apply_retention(100_000 + 40 * 1000).unwrap();
    assert!(r.deleted_segments > 0 && r.deleted_segments < before);
    let start = log.log_start_offset();
    assert_eq!(start, log.segment_bases()[0]);
    assert!(start > 0);
    assert!(matches!(log.read(0, 100), Err(Error::OffsetOutOfRange { .. })));
    assert!(log.read(start, 100).unwrap().range.is_some());
    // Deleted files wait as .deleted until removed.
    let leftovers = || {
        fs::read_dir(dir.path().join("t-0"))
            .unwrap()
            .filter(|e| {
                e.as_ref().unwrap().file_name().to_string_lossy().ends_with(crate::segment::files::DELETED)
            })
            .count()
    };
    assert!(leftovers() > 0);
    assert_eq!(log.remove_deleted_files(false).unwrap(), r.deleted_segments * 3);
    assert_eq!(leftovers(), 0);
}

#[test]
fn retention_by_size_keeps_the_newest_bytes_and_never_the_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log =
        open(dir.path(), LogConfig { segment_bytes: 1000, retention_bytes: 3000, ..LogConfig::default() });
    for i in 0..40 {
        log.append_as_leader(batch(i), AppendOrigin::Embedded).unwrap();
    }
    let held = log.read(0, 100).unwrap(); // a reader holding the first segment
    log.apply_retention(0).unwrap();
    assert!(log.size_bytes() <= 3000 + 1000 && log.size_bytes() >= 3000 - 1000, "{}", log.size_bytes());
    // The holder still reads its segment after the files were renamed.
    let bytes = held.bytes().unwrap();
    assert_eq!(RecordBatch::parse(&bytes).unwrap().base_offset(), 0);
    // A tiny limit still leaves the active segment.
    let log2 = open(
        &dir.path().join("b"),
        LogConfig { segment_bytes: 1000, retention_bytes: 0, ..LogConfig::default() },
    );
    for i in 0..10 {
        log2.append_as_leader(batch(i), AppendOrigin::Embedded).unwrap();
    }
    log2.apply_retention(0).unwrap();
    assert_eq!(log2.segment_count(), 1);
    assert_eq!(log2.log_end_offset(), 10);
}

#[test]
fn compact_only_topics_are_not_deleted_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 1000,
            retention_bytes: 0,
            cleanup_policy: CleanupPolicy { delete: false, compact: true },
            ..LogConfig::default()
        },
    );
    for i in 0..10 {
        log.append_as_leader(batch(i), AppendOrigin::Embedded).unwrap();
    }
    assert_eq!(log.apply_retention(0).unwrap().deleted_segments, 0);
}

#[test]
fn segments_wholly_below_the_log_start_offset_are_deleted() {
    for policy in
        [CleanupPolicy { delete: true, compact: false }, CleanupPolicy { delete: false, compact: true }]
    {
        let dir = tempfile::tempdir().unwrap();
        let log = open(
            dir.path(),
            LogConfig { segment_bytes: 1000, cleanup_policy: policy, ..LogConfig::default() },
        );
        for i in 0..40 {
            log.append_as_leader(batch(i), AppendOrigin::Embedded).unwrap();
        }
        let bases = log.segment_bases();
        assert!(bases.len() > 5);
        log.delete_records_before(bases[3] + 1).unwrap();
        let r = log.apply_retention(0).unwrap();
        assert_eq!(r.deleted_segments, 3, "{policy:?}");
        assert_eq!(log.segment_bases()[0], bases[3]);
        assert_eq!(log.log_start_offset(), bases[3] + 1);
        log.delete_records_before(log.log_end_offset()).unwrap();
        log.apply_retention(0).unwrap();
        assert_eq!(log.segment_count(), 1, "all but the active segment");
        assert_eq!(log.log_start_offset(), 40);
    }
}
