//! Tests of `log`.

use super::*;
use crate::log::AppendOrigin;
use crate::record::RecordBatch;
use crate::record::{BatchBuilder, Compression, NewRecord};

fn batch(n: usize, ts: i64, c: Compression) -> Vec<u8> {
    let mut b = BatchBuilder::new(c);
    for i in 0..n {
        let v = format!("value-{ts}-{i}");
        b.append(&NewRecord { timestamp: ts, key: None, value: Some(v.as_bytes()), headers: &[] });
    }
    b.build().unwrap()
}

fn small() -> Arc<LogConfig> {
    Arc::new(LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        segment_index_bytes: 4096,
        ..LogConfig::default()
    })
}

fn open(dir: &Path, rp: i64, clean: bool) -> (PartitionLog, LoadReport) {
    PartitionLog::open(&dir.join("t-0"), "t", 0, small(), rp, None, clean).unwrap()
}

/// Every offset reads back as the batch holding it, across segment rolls.
fn check_all(log: &PartitionLog, end: i64) {
    for off in 0..end {
        let slice = log.read(off, 1).unwrap();
        let bytes = slice.bytes().unwrap();
        let b = RecordBatch::parse(&bytes).unwrap();
        assert!(b.base_offset() <= off && off <= b.last_offset(), "offset {off}");
    }
}

#[test]
fn append_roll_read_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    for i in 0..200 {
        let info =
            log.append_as_leader(batch(3, 1000 + i, Compression::None), AppendOrigin::Embedded).unwrap();
        assert_eq!(info.base_offset, i * 3);
        assert_eq!(info.last_offset, i * 3 + 2);
    }
    assert_eq!(log.log_end_offset(), 600);
    assert!(log.segment_count() > 5, "rolled on segment.bytes");
    check_all(&log, 600);
    assert!(log.read(600, 100).unwrap().range.is_none());
    assert!(matches!(log.read(601, 100), Err(Error::OffsetOutOfRange { .. })));
    let segs = log.segment_count();
    log.close().unwrap();
    // Inactive segments' indexes were trimmed to their entries.
    for base in log.segment_bases() {
        let (_, idx, _) = Segment::paths(&dir.path().join("t-0"), base);
        assert!(fs::metadata(idx).unwrap().len() < 4096);
    }
    drop(log);
    let (log, report) = open(dir.path(), 600, true);
    assert_eq!(report.recovered_segments, 0, "clean open scans nothing");
    assert_eq!(log.log_end_offset(), 600);
    assert_eq!(log.segment_count(), segs);
    check_all(&log, 600);
    assert_eq!(
        log.append_as_leader(batch(1, 5000, Compression::Zstd), AppendOrigin::Embedded).unwrap().base_offset,
        600
    );
}

#[test]
fn unclean_open_cuts_torn_tail_and_drops_later_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    for i in 0..100 {
        log.append_as_leader(batch(2, i, Compression::Gzip), AppendOrigin::Embedded).unwrap();
    }
    let bases = log.segment_bases();
    drop(log);
    // Damage a batch in the middle of the second segment.
    let p = dir.path().join("t-0").join(crate::segment::file_name(bases[1], ".log"));
    let mut bytes = fs::read(&p).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    fs::write(&p, &bytes).unwrap();
    let (log, report) = open(dir.path(), 0, false);
    assert!(report.truncated_bytes > 0);
    assert_eq!(report.deleted_segments, bases.len() - 2);
    assert_eq!(log.segment_count(), 2);
    let end = log.log_end_offset();
    assert!(end > bases[1] && end < 200);
    check_all(&log, end);
    // The log goes on from the cut.
    assert_eq!(
        log.append_as_leader(batch(1, 0, Compression::None), AppendOrigin::Embedded).unwrap().base_offset,
        end
    );
}

#[test]
fn truncate_to_removes_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    for i in 0..100 {
        log.append_as_leader(batch(2, i, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    log.truncate_to(51).unwrap();
    assert_eq!(log.log_end_offset(), 50, "cut to the batch boundary");
    check_all(&log, 50);
    assert_eq!(
        log.append_as_leader(batch(1, 0, Compression::None), AppendOrigin::Embedded).unwrap().base_offset,
        50
    );
    log.truncate_to(0).unwrap();
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.segment_count(), 1);
}

#[test]
fn offset_for_time_finds_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    for i in 0..100 {
        log.append_as_leader(batch(2, 1000 + i * 10, Compression::Lz4), AppendOrigin::Embedded).unwrap();
    }
    assert_eq!(log.offset_for_time(0).unwrap(), Some((0, 1000)));
    assert_eq!(log.offset_for_time(1500).unwrap(), Some((100, 1500)));
    assert_eq!(log.offset_for_time(1501).unwrap(), Some((102, 1510)));
    assert_eq!(log.offset_for_time(99_999).unwrap(), None);
}

#[test]
fn concurrent_durable_appends_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    let log = Arc::new(log);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let log = log.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let info =
                        log.append_as_leader(batch(1, 1, Compression::None), AppendOrigin::Embedded).unwrap();
                    log.wait_durable(info.last_offset + 1).unwrap();
                    assert!(log.recovery_point() > info.last_offset);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(log.log_end_offset(), 400);
}

#[test]
fn rolls_on_segment_ms_measured_from_first_batch_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let config = Arc::new(LogConfig { segment_ms: 1000, ..LogConfig::default() });
    let (log, _) = PartitionLog::open(&dir.path().join("t-0"), "t", 0, config, 0, None, true).unwrap();
    log.append_as_leader(batch(1, 10_000, Compression::None), AppendOrigin::Embedded).unwrap();
    log.append_as_leader(batch(1, 10_900, Compression::None), AppendOrigin::Embedded).unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append_as_leader(batch(1, 11_001, Compression::None), AppendOrigin::Embedded).unwrap();
    assert_eq!(log.segment_bases(), vec![0, 2]);
}

#[test]
fn rolls_when_the_index_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        Arc::new(LogConfig { index_interval_bytes: 0, segment_index_bytes: 8 * 4, ..LogConfig::default() });
    let (log, _) = PartitionLog::open(&dir.path().join("t-0"), "t", 0, config, 0, None, true).unwrap();
    for _ in 0..20 {
        log.append_as_leader(batch(1, 0, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    assert!(log.segment_count() >= 4, "{:?}", log.segment_bases());
    check_all(&log, 20);
}

#[test]
fn flush_messages_policy_advances_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = (*small()).clone();
    c.flush_messages = 10;
    let (log, _) = PartitionLog::open(&dir.path().join("t-0"), "t", 0, Arc::new(c), 0, None, true).unwrap();
    for _ in 0..4 {
        log.append_as_leader(batch(2, 0, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    assert_eq!(log.recovery_point(), 0);
    log.append_as_leader(batch(2, 0, Compression::None), AppendOrigin::Embedded).unwrap();
    assert_eq!(log.recovery_point(), 10);
}

#[test]
fn reader_follows_writer_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    log.append_as_leader(batch(2, 0, Compression::None), AppendOrigin::Embedded).unwrap();
    let reader = PartitionLog::open_read_only(&dir.path().join("t-0"), "t", 0, small()).unwrap();
    assert_eq!(reader.log_end_offset(), 2);
    for i in 0..100 {
        log.append_as_leader(batch(2, i, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    // A half-written batch at the tail is not visible to the reader.
    let active = log.active().unwrap();
    let torn = batch(5, 0, Compression::None);
    use std::os::unix::fs::FileExt;
    fs::OpenOptions::new()
        .write(true)
        .open(active.log_path())
        .unwrap()
        .write_all_at(&torn[..torn.len() - 3], active.size())
        .unwrap();
    assert!(reader.read(202, 100).unwrap().range.is_none());
    assert_eq!(reader.log_end_offset(), 202);
    check_all(&reader, 202);
    assert!(matches!(
        reader.append_as_leader(batch(1, 0, Compression::None), AppendOrigin::Embedded),
        Err(Error::ReadOnly(_))
    ));
}

#[test]
fn external_batches_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    let mut bad = batch(2, 0, Compression::None);
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert!(matches!(log.append_as_leader(bad, AppendOrigin::Client), Err(Error::Corrupt(_))));
    assert!(matches!(log.append_as_leader(vec![1, 2, 3], AppendOrigin::Client), Err(Error::Corrupt(_))));
    let mut c = (*small()).clone();
    c.max_message_bytes = 100;
    log.set_config(Arc::new(c));
    assert!(matches!(
        log.append_as_leader(batch(20, 0, Compression::None), AppendOrigin::Client),
        Err(Error::RecordTooLarge { .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
}
