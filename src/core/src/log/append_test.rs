//! Tests of `append`.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::record::batch::set_log_append_time;
use crate::record::{BatchBuilder, BatchIter};
use crate::segment::file_name;

fn batch(values: &[&str], ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for v in values {
        b.append(&NewRecord { timestamp: ts, key: None, value: Some(v.as_bytes()), headers: &[] });
    }
    b.build().unwrap()
}

fn open(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(&dir.join("t-0"), "t", 0, Arc::new(config), 0, None, true).unwrap().0
}

fn values(log: &PartitionLog) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let bytes = log.read(offset, 1 << 20).unwrap().bytes().unwrap();
        for b in BatchIter::new(&bytes, true) {
            let b = b.unwrap();
            let payload = b.records_payload().unwrap();
            for r in b.records(&payload).unwrap() {
                let o = b.base_offset() + i64::from(r.offset_delta);
                if o >= offset {
                    out.push((o, String::from_utf8(r.value.unwrap().to_vec()).unwrap()));
                }
            }
            offset = b.last_offset() + 1;
        }
    }
    out
}

#[test]
fn a_multi_batch_append_that_fails_part_way_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Each batch fills a segment, so the second one of a request rolls.
    let log = open(dir.path(), LogConfig { segment_bytes: 100, ..LogConfig::default() });
    log.append_as_leader(batch(&["a"], 1), AppendOrigin::Client).unwrap();
    // The roll to offset 2 cannot create its log file.
    let blocker = dir.path().join("t-0").join(file_name(2, ".log"));
    fs::create_dir(&blocker).unwrap();
    let mut request = batch(&["b"], 1);
    request.extend(batch(&["c"], 1));
    let err = log.append_as_leader(request, AppendOrigin::Client).unwrap_err();
    assert!(matches!(err, Error::IoAt { .. }), "{err}");
    assert_eq!(log.log_end_offset(), 1, "the first batch of the failed request must not stay");
    assert_eq!(values(&log), [(0, "a".to_string())]);
    assert_eq!(log.size_bytes(), batch(&["a"], 1).len() as u64, "no bytes of it stay either");
    fs::remove_dir(&blocker).unwrap();
    let mut retry = batch(&["B"], 1);
    retry.extend(batch(&["C"], 1));
    let info = log.append_as_leader(retry, AppendOrigin::Client).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (1, 2));
    let want: Vec<(i64, String)> = vec![(0, "a".into()), (1, "B".into()), (2, "C".into())];
    assert_eq!(values(&log), want);
    log.close().unwrap();
    let log = open(dir.path(), LogConfig { segment_bytes: 100, ..LogConfig::default() });
    assert_eq!(values(&log), want);
}

#[test]
fn a_clients_timestamp_type_and_max_timestamp_are_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), LogConfig::default());
    let mut b = batch(&["a", "b"], 5_000);
    // The client claims LogAppendTime and a maxTimestamp of its choosing.
    set_log_append_time(&mut b, 9_000_000);
    log.append_as_leader(b, AppendOrigin::Client).unwrap();
    let bytes = log.read(0, 1 << 20).unwrap().bytes().unwrap();
    let stored = RecordBatch::parse(&bytes).unwrap();
    assert_eq!(stored.timestamp_type(), TimestampType::CreateTime);
    assert_eq!(stored.max_timestamp(), 5_000);
}

#[test]
fn timestamps_follow_the_topics_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_before_max_ms: 60_000,
        message_timestamp_after_max_ms: 60_000,
        ..LogConfig::default()
    };
    let log = open(dir.path(), config);
    let now = now_ms();
    for ts in [now - 3_600_000, now + 3_600_000, -5] {
        let err = log.append_as_leader(batch(&["x"], ts), AppendOrigin::Client).unwrap_err();
        assert!(matches!(err, Error::InvalidTimestamp(_)), "{ts}: {err}");
        let rec = NewRecord { timestamp: ts, key: None, value: Some(b"x"), headers: &[] };
        let err = log.append_records(&[rec], Compression::None, false, AppendOrigin::Client).unwrap_err();
        assert!(matches!(err, Error::InvalidTimestamp(_)), "{ts}: {err}");
    }
    log.append_as_leader(batch(&["x"], now), AppendOrigin::Client).unwrap();
    assert_eq!(log.log_end_offset(), 1);
}
