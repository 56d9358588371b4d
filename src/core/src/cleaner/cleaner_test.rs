//! Tests of `cleaner`.

use super::*;
use crate::config::{CleanupPolicy, LogConfig};
use crate::log::AppendOrigin;
use crate::record::NewRecord;
use crate::record::{BatchIter, Compression};
use std::path::Path;

fn open(dir: &Path) -> PartitionLog {
    let config = LogConfig {
        segment_bytes: 2000,
        cleanup_policy: CleanupPolicy { delete: false, compact: true },
        delete_retention_ms: 1000,
        min_cleanable_dirty_ratio: 0.5,
        ..LogConfig::default()
    };
    PartitionLog::open(&dir.join("t-0"), "t", 0, Arc::new(config), 0, None, true).unwrap().0
}

fn put(log: &PartitionLog, key: &str, value: Option<&str>) {
    let mut b = BatchBuilder::new(Compression::Lz4);
    b.append(&NewRecord {
        timestamp: 1,
        key: Some(key.as_bytes()),
        value: value.map(str::as_bytes),
        headers: &[],
    });
    log.append_as_leader(b.build().unwrap(), AppendOrigin::Embedded).unwrap();
}

/// (offset, key, value) of every record, in order.
fn all(log: &PartitionLog) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut pos = log.log_start_offset();
    while pos < log.log_end_offset() {
        let bytes = log.read(pos, 1 << 20).unwrap().bytes().unwrap();
        for b in BatchIter::new(&bytes, true) {
            let b = b.unwrap();
            let payload = b.records_payload().unwrap();
            for r in b.records(&payload).unwrap() {
                let off = b.base_offset() + i64::from(r.offset_delta);
                if off >= pos {
                    let s = |x: &[u8]| String::from_utf8(x.to_vec()).unwrap();
                    out.push((off, s(r.key.unwrap()), r.value.map(s)));
                }
            }
            pos = b.last_offset() + 1;
        }
    }
    out
}

#[test]
fn keeps_the_latest_value_per_key_and_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for round in 0..30 {
        for k in 0..5 {
            put(&log, &format!("k{k}"), Some(&format!("v{round}")));
        }
    }
    let end = log.log_end_offset();
    let r = clean(&log, 0, 10_000, 1 << 20, 1 << 20, false).unwrap().unwrap();
    assert!(r.bytes_out < r.bytes_in / 2, "{r:?}");
    assert_eq!(log.log_end_offset(), end, "offsets never change");
    let recs = all(&log);
    // Every key's latest value survives, at its original offset.
    for k in 0..5 {
        let latest = recs.iter().rev().find(|(_, key, _)| key == &format!("k{k}")).unwrap();
        assert_eq!(latest.2.as_deref(), Some("v29"));
        assert_eq!(latest.0, 145 + k);
    }
    assert!(recs.windows(2).all(|w| w[0].0 < w[1].0), "offset order");
    assert!(recs.len() < 40, "older values removed: {}", recs.len());
    // The cleaned layout survives a reopen (no .cleaned/.swap left).
    drop(log);
    let names: Vec<String> = fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".cleaned") || n.ends_with(".swap")), "{names:?}");
    let log = open(dir.path());
    assert_eq!(all(&log), recs);
}

#[test]
fn tombstones_stay_until_their_delete_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for i in 0..20 {
        put(&log, "gone", Some(&format!("{i}")));
        put(&log, "kept", Some(&format!("{i}")));
    }
    put(&log, "gone", None);
    for i in 0..40 {
        put(&log, "filler", Some(&format!("{i}")));
    }
    clean(&log, 0, 10_000, 1 << 20, 1 << 20, true).unwrap();
    let recs = all(&log);
    assert!(recs.iter().any(|(_, k, v)| k == "gone" && v.is_none()), "tombstone kept at first");
    assert!(!recs.iter().any(|(_, k, v)| k == "gone" && v.is_some()));
    // The horizon is now + delete.retention.ms (1 s): a cleaning before it keeps
    // the tombstone, one after drops it.
    clean(&log, 0, 10_500, 1 << 20, 1 << 20, true).unwrap();
    assert!(all(&log).iter().any(|(_, k, _)| k == "gone"));
    clean(&log, 0, 11_001, 1 << 20, 1 << 20, true).unwrap();
    let recs = all(&log);
    assert!(!recs.iter().any(|(_, k, _)| k == "gone"), "tombstone dropped past its horizon");
    assert!(recs.iter().any(|(_, k, v)| k == "kept" && v.as_deref() == Some("19")));
}

#[test]
fn a_small_buffer_cleans_in_passes() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for round in 0..3 {
        for k in 0..200 {
            put(&log, &format!("key-{k:04}"), Some(&format!("{round}")));
        }
    }
    let first = clean(&log, 0, 0, 100 * ENTRY_BYTES, 1 << 20, true).unwrap().unwrap();
    assert!(first.cleaned_to < log.segment_bases().last().copied().unwrap());
    let mut to = first.cleaned_to;
    while let Some(r) = clean(&log, to, 0, 100 * ENTRY_BYTES, 1 << 20, true).unwrap() {
        assert!(r.cleaned_to > to);
        to = r.cleaned_to;
    }
    let recs = all(&log);
    for k in 0..200 {
        let key = format!("key-{k:04}");
        let latest = recs.iter().rev().find(|(_, kk, _)| kk == &key).unwrap();
        if latest.0 < to {
            assert_eq!(latest.2.as_deref(), Some("2"));
        }
    }
}

#[test]
fn an_interrupted_swap_is_completed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for round in 0..20 {
        for k in 0..5 {
            put(&log, &format!("k{k}"), Some(&format!("v{round}")));
        }
    }
    let expected_latest: Vec<_> = {
        let recs = all(&log);
        (0..5)
            .map(|k| recs.iter().rev().find(|(_, kk, _)| kk == &format!("k{k}")).cloned().unwrap())
            .collect()
    };
    let bases = log.segment_bases();
    let end = log.log_end_offset();
    drop(log);
    let pdir = dir.path().join("t-0");
    // A cleaned copy of the first two segments, left as a .swap by a crash
    // before the old segments were renamed away.
    let mut cleaned = Vec::new();
    for base in &bases[..2] {
        cleaned.extend(fs::read(pdir.join(file_name(*base, ".log"))).unwrap());
    }
    fs::write(pdir.join(format!("{}.swap", file_name(bases[0], ".log"))), &cleaned).unwrap();
    fs::write(pdir.join(format!("{}.cleaned", file_name(bases[2], ".log"))), b"half").unwrap();
    let log = open(dir.path());
    assert_eq!(log.segment_bases()[0], bases[0]);
    assert!(!log.segment_bases().contains(&bases[1]), "covered by the swap");
    assert_eq!(log.log_end_offset(), end);
    let recs = all(&log);
    for e in &expected_latest {
        assert!(recs.contains(e));
    }
    let leftovers: Vec<String> = fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".cleaned") || n.ends_with(".deleted"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_segment_is_read_through_a_bounded_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for i in 0..200 {
        put(&log, &format!("k{}", i % 7), Some(&"v".repeat(i % 50 + 1)));
    }
    let seg = log.segments()[0].clone();
    let whole = seg.read_bytes(0, seg.size() as usize).unwrap();
    let expected: Vec<Vec<u8>> =
        BatchIter::new(&whole, true).map(|b| b.unwrap().as_bytes().to_vec()).collect();
    let largest = expected.iter().map(Vec::len).max().unwrap();
    assert!(expected.len() > 5);
    for buffer in [0, 61, 100, 1000, 1 << 20] {
        let mut reader = reader::BatchReader::new(&seg, buffer);
        let (mut got, mut lasts) = (Vec::new(), Vec::new());
        while let Some((b, last)) = reader.next_batch().unwrap() {
            got.push(b.as_bytes().to_vec());
            lasts.push(last);
        }
        assert_eq!(got, expected, "buffer {buffer}");
        assert_eq!(lasts.iter().filter(|&&l| l).count(), 1);
        assert_eq!(lasts.last(), Some(&true));
        assert!(reader.buffer_len() <= buffer.max(largest), "buffer {buffer}: held {}", reader.buffer_len());
    }
}

#[test]
fn cleaning_through_a_tiny_io_buffer_keeps_the_same_records() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (big, tiny) = (open(a.path()), open(b.path()));
    for round in 0..20 {
        for k in 0..6 {
            let v = format!("{round}-{}", "x".repeat(k * 40));
            put(&big, &format!("k{k}"), Some(&v));
            put(&tiny, &format!("k{k}"), Some(&v));
        }
    }
    let r1 = clean(&big, 0, 10_000, 1 << 20, 1 << 20, true).unwrap().unwrap();
    let r2 = clean(&tiny, 0, 10_000, 1 << 20, 100, true).unwrap().unwrap();
    assert_eq!(r1, r2);
    assert!(r1.records_out < r1.records_in);
    assert_eq!(all(&big), all(&tiny));
}

#[test]
fn compaction_lags_hold_young_records_back_and_clean_old_ones_whatever_the_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path());
    for round in 0..30 {
        for k in 0..5 {
            put(&log, &format!("k{k}"), Some(&format!("v{round}")));
        }
    }
    let with = |f: &dyn Fn(&mut LogConfig)| {
        let mut c = (*log.config()).clone();
        f(&mut c);
        log.set_config(Arc::new(c));
    };
    // Every record (timestamp 1) is younger than a lag of 10 s at 5 s: nothing to clean.
    with(&|c| c.min_compaction_lag_ms = 10_000);
    assert!(clean(&log, 0, 5_000, 1 << 20, 1 << 20, false).unwrap().is_none());
    with(&|c| c.min_compaction_lag_ms = 0);
    let cleaned_to = clean(&log, 0, 5_000, 1 << 20, 1 << 20, false).unwrap().unwrap().cleaned_to;
    // More of the same keys: with part of the log clean, a dirty ratio of 1 is never
    // reached, but records older than max.compaction.lag.ms are cleaned anyway.
    for round in 30..60 {
        for k in 0..5 {
            put(&log, &format!("k{k}"), Some(&format!("v{round}")));
        }
    }
    with(&|c| c.min_cleanable_dirty_ratio = 1.0);
    assert!(clean(&log, cleaned_to, 5_000, 1 << 20, 1 << 20, false).unwrap().is_none());
    with(&|c| c.max_compaction_lag_ms = 1_000);
    let r = clean(&log, cleaned_to, 5_000, 1 << 20, 1 << 20, false).unwrap().unwrap();
    assert!(r.cleaned_to > cleaned_to, "{r:?}");
}
