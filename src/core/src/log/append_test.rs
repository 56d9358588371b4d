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
        // A client's batch: the record at fault named (KIP-467), the batch refused.
        let err = log.append_as_leader(batch(&["x"], ts), AppendOrigin::Client).unwrap_err();
        match &err {
            Error::RecordErrors { timestamp: true, errors } => {
                assert_eq!(errors.len(), 1, "{ts}: {err}");
                assert_eq!(errors[0].0, 0);
                assert!(errors[0].1.contains(&ts.to_string()), "{ts}: {err}");
            }
            _ => panic!("{ts}: {err}"),
        }
        assert_eq!(err.kafka_code(), Some(crate::error::kafka_codes::INVALID_TIMESTAMP));
        let rec = NewRecord { timestamp: ts, key: None, value: Some(b"x"), headers: &[] };
        let err = log.append_records(&[rec], Compression::None, false, AppendOrigin::Client).unwrap_err();
        assert!(matches!(err, Error::InvalidTimestamp(_)), "{ts}: {err}");
    }
    log.append_as_leader(batch(&["x"], now), AppendOrigin::Client).unwrap();
    assert_eq!(log.log_end_offset(), 1);
}

/// Every file of a partition directory, by name, with its bytes.
fn dir_contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap()))
        .collect();
    out.sort();
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]

    /// Batches appended in groups (one write per run of batches for a segment)
    /// leave the very files that the same batches appended one by one leave:
    /// the same segments rolled at the same offsets (by size, by time, by a
    /// full index), the same index entries, the same end offset. Small
    /// segments, indexes and index intervals make every rule fire inside runs.
    #[test]
    fn batches_written_in_runs_leave_the_files_one_by_one_leaves(
        batches in proptest::collection::vec((1usize..40, 0i64..3_000), 1..60),
        groups in proptest::collection::vec(1usize..12, 1..60),
        segment_bytes in 2_000u64..40_000,
        index_entries in 2usize..12,
        index_interval_bytes in 0u64..6_000,
    ) {
        let config = || LogConfig {
            segment_bytes,
            segment_ms: 4_000,
            segment_index_bytes: index_entries * 12,
            index_interval_bytes,
            ..LogConfig::default()
        };
        let one_by_one = tempfile::tempdir().unwrap();
        let in_runs = tempfile::tempdir().unwrap();
        let (a, b) = (open(one_by_one.path(), config()), open(in_runs.path(), config()));
        let mut ts = 1_000_000;
        let built: Vec<Vec<u8>> = batches
            .iter()
            .enumerate()
            .map(|(i, &(n, step))| {
                ts += step;
                let values: Vec<String> = (0..n).map(|j| format!("{i}-{j}-{}", "v".repeat(j % 50))).collect();
                batch(&values.iter().map(String::as_str).collect::<Vec<_>>(), ts)
            })
            .collect();
        for bytes in &built {
            a.append_as_leader(bytes.clone(), AppendOrigin::Embedded).unwrap();
        }
        let mut rest = &built[..];
        for &g in groups.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (now, later) = rest.split_at(g.min(rest.len()));
            let mut copies: Vec<Vec<u8>> = now.to_vec();
            let mut bufs: Vec<&mut [u8]> = copies.iter_mut().map(|c| &mut c[..]).collect();
            let info = b.append_buffers(&mut bufs, AppendOrigin::Embedded).unwrap();
            proptest::prop_assert_eq!(info.last_offset + 1, b.log_end_offset());
            rest = later;
        }
        proptest::prop_assert_eq!(a.log_end_offset(), b.log_end_offset());
        proptest::prop_assert_eq!(values(&a), values(&b));
        proptest::prop_assert_eq!(dir_contents(&one_by_one.path().join("t-0")), dir_contents(&in_runs.path().join("t-0")));
    }
}

#[test]
fn a_run_that_fails_part_way_leaves_nothing_and_the_log_goes_on() {
    let small = crate::small_fs::SmallFs::new(1 << 20).unwrap();
    let log = open(small.path(), LogConfig::default());
    log.append_as_leader(batch(&["a"], 1), AppendOrigin::Embedded).unwrap();
    let good = log.size_bytes();
    small.fill(64 << 10).unwrap();
    // Eight batches of ~12 KB, about 100 KB in one write: more than is left.
    let big: Vec<String> = (0..100).map(|i| format!("{i:03}{}", "x".repeat(117))).collect();
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    let mut copies: Vec<Vec<u8>> = (0..8).map(|_| batch(&big, 2)).collect();
    let mut bufs: Vec<&mut [u8]> = copies.iter_mut().map(|c| &mut c[..]).collect();
    let err = log.append_buffers(&mut bufs, AppendOrigin::Embedded).unwrap_err();
    assert!(
        matches!(&err, Error::IoAt { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    assert_eq!(log.log_end_offset(), 1, "no batch of the failed run stays");
    assert_eq!(log.size_bytes(), good, "nor any of its bytes");
    small.free();
    let mut copies: Vec<Vec<u8>> = (0..8).map(|_| batch(&big, 2)).collect();
    let mut bufs: Vec<&mut [u8]> = copies.iter_mut().map(|c| &mut c[..]).collect();
    let info = log.append_buffers(&mut bufs, AppendOrigin::Embedded).unwrap();
    assert_eq!((info.base_offset, info.last_offset), (1, 800));
    let got = values(&log);
    assert_eq!(got.len(), 801);
    assert_eq!(got[800], (800, big[99].to_string()));
}

/// Producer 7's first batch (epoch 2), gzip: records a, b, c keyed `k`, one header.
fn idempotent_gzip(now: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::Gzip).producer(crate::record::ProducerInfo {
        producer_id: 7,
        producer_epoch: 2,
        base_sequence: 0,
        transactional: false,
        control: false,
    });
    let header: &[(&[u8], Option<&[u8]>)] = &[(b"h", Some(b"x"))];
    for (i, v) in ["a", "b", "c"].iter().enumerate() {
        let record = NewRecord {
            timestamp: now + i as i64,
            key: Some(b"k"),
            value: Some(v.as_bytes()),
            headers: header,
        };
        b.append(&record);
    }
    b.build().unwrap()
}

#[test]
fn a_topic_codec_recompresses_what_clients_send() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig { compression_type: Some(Compression::Zstd), ..LogConfig::default() };
    let log = open(dir.path(), config);
    let now = now_ms();
    // An idempotent client's gzip batch, then an uncompressed one, in one append.
    let gzip = idempotent_gzip(now);
    let mut buf = gzip.clone();
    buf.extend(batch(&["d"], now));
    log.append_as_leader(buf, AppendOrigin::Client).unwrap();
    assert_eq!(values(&log).into_iter().map(|(_, v)| v).collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    let bytes = log.read(0, 1 << 20).unwrap().bytes().unwrap();
    let stored: Vec<_> = BatchIter::new(&bytes, true).map(|b| b.unwrap()).collect();
    assert_eq!(stored.len(), 2);
    for b in &stored {
        assert_eq!(b.compression().unwrap(), Compression::Zstd);
        b.check_crc().unwrap();
    }
    let first = &stored[0];
    assert_eq!((first.producer_id(), first.producer_epoch(), first.base_sequence()), (7, 2, 0));
    assert_eq!((first.base_offset(), first.last_offset_delta(), first.max_timestamp()), (0, 2, now + 2));
    let payload = first.records_payload().unwrap();
    let records = first.records(&payload).unwrap();
    assert_eq!(records[2].headers, vec![(&b"h"[..], Some(&b"x"[..]))]);
    assert_eq!(first.base_timestamp() + records[2].timestamp_delta, now + 2);
    // A retry of the idempotent batch is still known as one.
    assert!(log.append_as_leader(gzip, AppendOrigin::Client).unwrap().duplicate);
    // An embedded producer's batches, in several buffers, go the same way.
    let (mut e1, mut e2) = (batch(&["e"], now), batch(&["f"], now));
    log.append_buffers(&mut [&mut e1[..], &mut e2[..]], AppendOrigin::Embedded).unwrap();
    let bytes = log.read(0, 1 << 20).unwrap().bytes().unwrap();
    let stored: Vec<_> = BatchIter::new(&bytes, true).map(|b| b.unwrap()).collect();
    assert_eq!(stored.len(), 4);
    assert!(stored.iter().all(|b| b.compression().unwrap() == Compression::Zstd));
    assert_eq!(values(&log).into_iter().map(|(_, v)| v).collect::<Vec<_>>(), ["a", "b", "c", "d", "e", "f"]);
}

#[test]
fn segments_roll_sooner_by_their_jitter_and_a_compaction_lag() {
    let config = LogConfig { segment_ms: 10_000, segment_jitter_ms: 4_000, ..LogConfig::default() };
    let jitters: Vec<i64> = (0..200).map(|base| roll_jitter(base * 1000, &config)).collect();
    assert!(jitters.iter().all(|j| (0..4_000).contains(j)));
    assert!(jitters.iter().collect::<std::collections::BTreeSet<_>>().len() > 100, "spread out");
    assert_eq!(roll_jitter(5, &LogConfig { segment_jitter_ms: 0, ..config.clone() }), 0);
    assert_eq!(max_segment_ms(&config), 10_000);
    let compacted = LogConfig {
        cleanup_policy: crate::config::CleanupPolicy { delete: false, compact: true },
        max_compaction_lag_ms: 3_000,
        ..config.clone()
    };
    assert_eq!(max_segment_ms(&compacted), 3_000);

    // In a log: the second batch, 7 s after the first, rolls exactly when the
    // first segment's jitter is over 3 s.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), config.clone());
    log.append_as_leader(batch(&["a"], 1_000_000), AppendOrigin::Embedded).unwrap();
    log.append_as_leader(batch(&["b"], 1_007_000), AppendOrigin::Embedded).unwrap();
    let segments = fs::read_dir(dir.path().join("t-0"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".log"))
        .count();
    assert_eq!(segments, if roll_jitter(0, &config) > 3_000 { 2 } else { 1 });
}

#[test]
fn preallocate_reserves_each_new_segment_and_gives_back_the_rest_when_sealed() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let config =
        LogConfig { preallocate: true, segment_ms: 1_000, segment_bytes: 8 << 20, ..LogConfig::default() };
    let log = open(dir.path(), config);
    let blocks = |base: i64| {
        let m = fs::metadata(dir.path().join("t-0").join(file_name(base, ".log"))).unwrap();
        (m.len(), m.blocks() * 512)
    };
    log.append_as_leader(batch(&["a"], 1_000_000), AppendOrigin::Embedded).unwrap();
    // Rolled by time: the new segment has its 8 MiB reserved, its size that of its batch.
    log.append_as_leader(batch(&["b"], 1_002_000), AppendOrigin::Embedded).unwrap();
    let (len, reserved) = blocks(1);
    assert!(len < 200 && reserved >= 8 << 20, "{len} bytes, {reserved} reserved");
    log.append_as_leader(batch(&["c"], 1_004_000), AppendOrigin::Embedded).unwrap();
    let (len, reserved) = blocks(1);
    assert!(reserved < 64 << 10, "sealed: {len} bytes, {reserved} still reserved");
    assert_eq!(values(&log).into_iter().map(|(_, v)| v).collect::<Vec<_>>(), ["a", "b", "c"]);
}
