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
    // -3: the largest timestamp, none yet.
    assert_eq!(log.offset_for_time(-3).unwrap(), None);
    for i in 0..100 {
        // 1000, 1010, ..., with 1500 twice (offsets 100..103 and 104..105).
        let ts = if i == 51 { 1500 } else { 1000 + i * 10 };
        log.append_as_leader(batch(2, ts, Compression::Lz4), AppendOrigin::Embedded).unwrap();
    }
    assert_eq!(log.offset_for_time(-3).unwrap(), Some((198, 1990)));
    log.append_as_leader(batch(2, 1990, Compression::None), AppendOrigin::Embedded).unwrap();
    assert_eq!(log.offset_for_time(-3).unwrap(), Some((198, 1990)));
    assert!(log.offset_for_time(-4).is_err());
    assert_eq!(log.offset_for_time(0).unwrap(), Some((0, 1000)));
    assert_eq!(log.offset_for_time(1500).unwrap(), Some((100, 1500)));
    assert_eq!(log.offset_for_time(1501).unwrap(), Some((104, 1520)));
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

// --------------------------------------------------------------------------- damage on disk

fn seg_path(dir: &Path, base: i64, suffix: &str) -> PathBuf {
    dir.join("t-0").join(crate::segment::file_name(base, suffix))
}

/// Batch (position, size, base offset) of a segment file.
fn batches_of(bytes: &[u8]) -> Vec<(usize, usize, i64)> {
    crate::record::BatchIter::new(bytes, false)
        .scan(0usize, |pos, b| {
            let b = b.ok()?;
            let at = *pos;
            *pos += b.size();
            Some((at, b.size(), b.base_offset()))
        })
        .collect()
}

/// 100 batches of 2 records, timestamps 1000 + 10 i, over several segments, closed cleanly.
fn written(dir: &Path) -> Vec<i64> {
    let (log, _) = open(dir, 0, true);
    for i in 0..100 {
        log.append_as_leader(batch(2, 1000 + i * 10, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    let bases = log.segment_bases();
    assert!(bases.len() >= 3);
    log.close().unwrap();
    bases
}

/// Every offset reads back as the record written there, or fails as corrupt
/// naming a file; returns the offsets that failed.
fn exact_or_corrupt(log: &PartitionLog, end: i64) -> Vec<i64> {
    let mut bad = Vec::new();
    for off in 0..end {
        match log.read(off, 1).and_then(|s| s.bytes()) {
            Ok(bytes) => {
                let b = RecordBatch::parse(&bytes).unwrap_or_else(|e| panic!("offset {off}: {e}"));
                assert!(
                    b.base_offset() <= off && off <= b.last_offset(),
                    "offset {off} read as {}..={}",
                    b.base_offset(),
                    b.last_offset()
                );
                assert_eq!(b.base_offset() % 2, 0, "offset {off}: batches start at even offsets");
                assert_eq!(b.max_timestamp(), 1000 + b.base_offset() / 2 * 10, "offset {off}: another batch");
            }
            Err(e @ Error::Corrupt(_)) => {
                assert!(e.to_string().contains(".log"), "names the file: {e}");
                bad.push(off);
            }
            Err(e) => panic!("offset {off}: {e}"),
        }
    }
    bad
}

#[test]
fn recovery_with_a_smaller_index_keeps_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let big =
        Arc::new(LogConfig { segment_bytes: 1 << 20, index_interval_bytes: 4096, ..LogConfig::default() });
    let (log, _) = PartitionLog::open(&dir.path().join("t-0"), "t", 0, big, 0, None, true).unwrap();
    for i in 0..100 {
        log.append_as_leader(batch(1, i, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    log.close().unwrap();
    drop(log);
    // Reopened uncleanly with an index that fills after two entries.
    let tiny =
        Arc::new(LogConfig { index_interval_bytes: 0, segment_index_bytes: 16, ..LogConfig::default() });
    let (log, report) = PartitionLog::open(&dir.path().join("t-0"), "t", 0, tiny, 0, None, false).unwrap();
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(log.log_end_offset(), 100);
    check_all(&log, 100);
}

#[test]
fn a_base_offset_flipped_in_a_sealed_segment_is_corrupt_not_relabelled() {
    for xor in [1i64 << 58, 64, 1] {
        let dir = tempfile::tempdir().unwrap();
        let bases = written(dir.path());
        let p = seg_path(dir.path(), bases[0], ".log");
        let mut bytes = fs::read(&p).unwrap();
        let bs = batches_of(&bytes);
        for &(pos, _, base) in bs.iter().step_by(3) {
            bytes[pos..pos + 8].copy_from_slice(&(base ^ xor).to_be_bytes());
        }
        fs::write(&p, &bytes).unwrap();
        for clean in [true, false] {
            let (log, _) = open(dir.path(), 200, clean);
            let bad = exact_or_corrupt(&log, 200);
            assert!(bad.contains(&0), "xor {xor}: offset 0 sits in a damaged batch: {bad:?}");
            assert!(bad.iter().all(|&o| o < bases[1]), "only the damaged segment: {bad:?}");
            log.close().unwrap();
        }
    }
}

#[test]
fn a_sealed_segment_cut_short_or_zeroed_is_corrupt_not_skipped() {
    for how in ["truncate", "zero", "length"] {
        let dir = tempfile::tempdir().unwrap();
        let bases = written(dir.path());
        let p = seg_path(dir.path(), bases[0], ".log");
        let mut bytes = fs::read(&p).unwrap();
        let bs = batches_of(&bytes);
        let (pos, _, lost) = bs[bs.len() - 3];
        match how {
            "truncate" => bytes.truncate(pos),
            "zero" => bytes[pos..].fill(0),
            _ => bytes[pos + 8..pos + 12].copy_from_slice(&10_000i32.to_be_bytes()),
        }
        fs::write(&p, &bytes).unwrap();
        let (log, report) = open(dir.path(), 200, true);
        if how != "length" {
            // (A damaged length mid-segment shows on reads, not at the end.)
            assert_eq!(report.damaged_segments, 1, "{how}: the open notices the gap");
        }
        let bad = exact_or_corrupt(&log, 200);
        if how == "length" {
            // Batches after the damaged one may still be found through the index.
            assert!(bad.contains(&lost) && bad.iter().all(|&o| o >= lost && o < bases[1]), "{bad:?}");
        } else {
            assert_eq!(bad, (lost..bases[1]).collect::<Vec<_>>(), "{how}");
        }
        let err = log.read(lost, 1 << 20).err().unwrap().to_string();
        assert!(err.contains(&p.file_name().unwrap().to_string_lossy().to_string()), "{err}");
        assert!(err.contains(&format!("position {pos}")), "{err}");
    }
}

#[test]
fn damaged_index_entries_are_hints_checked_against_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let bases = written(dir.path());
    let idx = seg_path(dir.path(), bases[0], ".index");
    let mut bytes = fs::read(&idx).unwrap();
    assert!(bytes.len() >= 16);
    let n = bytes.len() - 8;
    for (i, b) in bytes.iter_mut().enumerate().take(n) {
        *b ^= (i as u8).wrapping_mul(37) | 1;
    }
    fs::write(&idx, &bytes).unwrap();
    let (log, _) = open(dir.path(), 200, true);
    assert!(exact_or_corrupt(&log, 200).is_empty());
}

#[test]
fn a_damaged_time_index_gives_right_offset_for_time_answers() {
    let dir = tempfile::tempdir().unwrap();
    let bases = written(dir.path());
    for &base in &bases[..bases.len() - 1] {
        let p = seg_path(dir.path(), base, ".timeindex");
        let mut bytes = fs::read(&p).unwrap();
        assert!(bytes.len() >= 24, "entries to damage");
        let n = bytes.len() / 12;
        // The first entries point at later offsets, the last one is kept.
        for i in 0..n - 1 {
            let rel = i32::from_be_bytes(bytes[i * 12 + 8..i * 12 + 12].try_into().unwrap());
            bytes[i * 12 + 8..i * 12 + 12].copy_from_slice(&(rel + 6).to_be_bytes());
            let ts = i64::from_be_bytes(bytes[i * 12..i * 12 + 8].try_into().unwrap());
            bytes[i * 12..i * 12 + 8].copy_from_slice(&(ts - 25).to_be_bytes());
        }
        fs::write(&p, &bytes).unwrap();
    }
    let (log, _) = open(dir.path(), 200, true);
    for i in 0..100 {
        let ts = 1000 + i * 10;
        assert_eq!(log.offset_for_time(ts).unwrap(), Some((2 * i, ts)), "timestamp {ts}");
        assert_eq!(log.offset_for_time(ts - 3).unwrap(), Some((2 * i, ts)), "timestamp {}", ts - 3);
    }
}

#[test]
fn a_garbage_swap_does_not_replace_an_intact_segment() {
    let dir = tempfile::tempdir().unwrap();
    let bases = written(dir.path());
    let swap = dir.path().join("t-0").join(format!("{}.swap", crate::segment::file_name(bases[0], ".log")));
    // Garbage, and a valid batch followed by garbage.
    for content in [vec![0x5a; 700], [batch(2, 1000, Compression::None), vec![1; 100]].concat()] {
        fs::write(&swap, &content).unwrap();
        let (log, _) = open(dir.path(), 200, true);
        assert!(!swap.exists());
        assert_eq!(log.segment_bases(), bases);
        assert!(exact_or_corrupt(&log, 200).is_empty());
        log.close().unwrap();
    }
    // A whole swap whose offsets run past what it replaces is refused too.
    let mut b = BatchBuilder::new(Compression::None).base_offset(0);
    b.append(&NewRecord { timestamp: 1000, key: None, value: Some(b"x"), headers: &[] });
    let mut bytes = b.build().unwrap();
    crate::record::batch::set_base_offset(&mut bytes, 1000);
    fs::write(&swap, &bytes).unwrap();
    let (log, _) = open(dir.path(), 200, true);
    assert_eq!(log.segment_bases(), bases);
    assert!(exact_or_corrupt(&log, 200).is_empty());
}

#[test]
fn a_last_batch_moved_past_the_next_segment_is_damage_not_an_overlap() {
    // baseOffset (outside the CRC) moved up, or lastOffsetDelta (inside it) grown.
    for (at, value) in [(0usize, 64i64), (23, 1 << 16)] {
        let dir = tempfile::tempdir().unwrap();
        let bases = written(dir.path());
        let p = seg_path(dir.path(), bases[0], ".log");
        let mut bytes = fs::read(&p).unwrap();
        let &(pos, _, base) = batches_of(&bytes).last().unwrap();
        if at == 0 {
            bytes[pos..pos + 8].copy_from_slice(&(base + value).to_be_bytes());
        } else {
            bytes[pos + at..pos + at + 4].copy_from_slice(&(value as i32 + 1).to_be_bytes());
        }
        fs::write(&p, &bytes).unwrap();
        for clean in [true, false] {
            let (log, report) = open(dir.path(), 200, clean);
            assert_eq!(report.damaged_segments, 1, "field at {at}");
            assert_eq!(exact_or_corrupt(&log, 200), vec![base, base + 1], "field at {at}");
            log.close().unwrap();
        }
    }
}

#[test]
fn a_damaged_last_batch_of_the_active_segment_is_cut_at_a_clean_open() {
    let dir = tempfile::tempdir().unwrap();
    let bases = written(dir.path());
    let p = seg_path(dir.path(), *bases.last().unwrap(), ".log");
    let mut bytes = fs::read(&p).unwrap();
    let &(pos, _, base) = batches_of(&bytes).last().unwrap();
    // lastOffsetDelta grown: the header alone would claim offsets far past 200.
    bytes[pos + 23..pos + 27].copy_from_slice(&(1i32 << 20).to_be_bytes());
    fs::write(&p, &bytes).unwrap();
    let (log, report) = open(dir.path(), 200, true);
    assert!(report.truncated_bytes > 0);
    assert_eq!(log.log_end_offset(), base);
    assert!(exact_or_corrupt(&log, base).is_empty());
}

#[test]
fn a_segment_renamed_to_an_overlapping_base_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bases = written(dir.path());
    let from = seg_path(dir.path(), bases[1], ".log");
    let to = seg_path(dir.path(), bases[1] - 4, ".log");
    fs::rename(&from, &to).unwrap();
    let err = PartitionLog::open(&dir.path().join("t-0"), "t", 0, small(), 200, None, true).err().unwrap();
    let msg = err.to_string();
    assert!(matches!(err, Error::Corrupt(_)), "{msg}");
    assert!(msg.contains(&crate::segment::file_name(bases[0], ".log")), "{msg}");
    assert!(msg.contains(&crate::segment::file_name(bases[1] - 4, ".log")), "{msg}");
}

#[test]
fn truncation_forgets_the_timestamps_it_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    for i in 0..100 {
        log.append_as_leader(batch(2, 1000 + i * 10, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    let bases = log.segment_bases();
    // Into the middle of the second segment, which becomes the active one.
    let cut = (bases[1] + bases[2]) / 2 / 2 * 2;
    log.truncate_to(cut).unwrap();
    let last = log.segments().pop().unwrap();
    assert_eq!(last.max_timestamp(), 1000 + (cut / 2 - 1) * 10);
    // Sealed by a roll, it keeps the right maximum.
    log.close().unwrap();
    let (log, _) = PartitionLog::open(&dir.path().join("t-0"), "t", 0, small(), cut, None, true)
        .unwrap_or_else(|e| panic!("{e}"));
    let seg = log.segments().pop().unwrap();
    assert_eq!(seg.max_timestamp(), 1000 + (cut / 2 - 1) * 10);
    assert_eq!(log.offset_for_time(1000 + (cut / 2) * 10).unwrap(), None);
}

#[test]
fn truncation_reuses_the_active_segment_and_does_not_wait_for_maintenance() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    for i in 0..100 {
        log.append_as_leader(batch(2, 1000 + i * 10, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    let log = Arc::new(log);
    let active = log.segments().pop().unwrap();
    let guard = log.lock_maintenance();
    let (tx, rx) = std::sync::mpsc::channel();
    let l = log.clone();
    let t = std::thread::spawn(move || tx.send(l.truncate_to(198)).unwrap());
    let done = rx.recv_timeout(std::time::Duration::from_secs(20));
    drop(guard);
    t.join().unwrap();
    assert!(matches!(done, Ok(Ok(()))), "truncation finished while a maintenance task ran");
    assert_eq!(log.log_end_offset(), 198);
    assert!(Arc::ptr_eq(&active, &log.segments().pop().unwrap()), "no second mapping of its indexes");
}

#[test]
fn offsets_near_the_limit_are_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let err =
        PartitionLog::open(&dir.path().join("t-0"), "t", 0, small(), 0, Some(i64::MAX), true).err().unwrap();
    assert!(err.to_string().contains(&i64::MAX.to_string()), "{err}");
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("t-0")).unwrap();
    fs::write(seg_path(dir.path(), i64::MAX, ".log"), batch(2, 0, Compression::None)).unwrap();
    for clean in [true, false] {
        let err = PartitionLog::open(&dir.path().join("t-0"), "t", 0, small(), 0, None, clean).err().unwrap();
        assert!(err.to_string().contains("09223372036854775807.log"), "{err}");
    }
}

#[test]
fn read_upto_serves_whole_batches_below_the_bound_and_the_high_watermark_follows_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path(), 0, true);
    assert_eq!(log.high_watermark(), 0);
    for i in 0..10 {
        log.append_as_leader(batch(3, 1000 + i, Compression::None), AppendOrigin::Embedded).unwrap();
    }
    assert_eq!(log.high_watermark(), 30);
    let upto = |offset, max| {
        let s = log.read_upto(offset, 1 << 20, max).unwrap();
        crate::record::BatchIter::new(&s.bytes().unwrap(), true)
            .map(|b| b.unwrap().base_offset())
            .collect::<Vec<_>>()
    };
    let all: Vec<i64> = upto(0, i64::MAX);
    assert_eq!(all.first(), Some(&0));
    let bounded = upto(0, 9);
    assert!(bounded.iter().all(|&b| b < 9) && bounded.contains(&6), "{bounded:?}");
    assert_eq!(upto(4, 5), vec![3], "a batch starting below the bound is whole");
    assert!(upto(9, 9).is_empty(), "at the bound: nothing yet");
    assert!(upto(29, 9).is_empty(), "past the bound but within the log: nothing yet");
    assert!(matches!(log.read_upto(31, 100, 9), Err(Error::OffsetOutOfRange { .. })));
    // `read` is the same with the log end as its bound.
    assert_eq!(log.read(0, 1 << 20).unwrap().range, log.read_upto(0, 1 << 20, 30).unwrap().range);
    log.truncate_to(12).unwrap();
    assert_eq!(log.high_watermark(), 12);
    drop(log);
    let (log, _) = open(dir.path(), 0, false);
    assert_eq!(log.high_watermark(), log.log_end_offset());
}
