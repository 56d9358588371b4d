//! Tests of `segment`.

use super::*;
use crate::record::{BatchBuilder, Compression, NewRecord};
use std::os::unix::fs::FileExt;

const NO_GAPS: Expect = Expect { next_base: i64::MAX, allow_gaps: false };

fn batch(base: i64, n: usize, ts: i64) -> (Vec<u8>, BatchInfo) {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base);
    let v = vec![7u8; 100];
    for i in 0..n {
        b.append(&NewRecord { timestamp: ts + i as i64, key: None, value: Some(&v), headers: &[] });
    }
    let bytes = b.build().unwrap();
    let info = BatchInfo::from_batch(0, &RecordBatch::parse(&bytes).unwrap());
    (bytes, info)
}

fn filled(dir: &Path, batches: i64) -> Segment {
    let seg = Segment::open(dir, 0, 1 << 20, SegmentMode::Active).unwrap();
    for i in 0..batches {
        let (bytes, info) = batch(i * 10, 10, 1000 + i * 100);
        seg.append(&bytes, &info, 4096).unwrap();
    }
    seg
}

#[test]
fn names_are_twenty_digits() {
    assert_eq!(file_name(42, ".log"), "00000000000000000042.log");
    assert_eq!(parse_file_name("00000000000000000042.log", ".log"), Some(42));
    assert_eq!(parse_file_name("42.log", ".log"), None);
    assert_eq!(parse_file_name("0000000000000000004x.log", ".log"), None);
}

#[test]
fn append_index_and_find() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 100);
    let end = seg.size();
    assert!(seg.indexes.lock().offsets.len() > 10, "sparse index written");
    for target in [0, 5, 9, 10, 555, 999] {
        let b = seg.find_batch(target, end, NO_GAPS).unwrap().unwrap();
        assert!(b.base_offset <= target && target <= b.last_offset, "{target}");
    }
    assert!(seg.find_batch(1000, end, NO_GAPS).unwrap().is_none());
    let r = seg.range_from(500, 3000, end, NO_GAPS).unwrap().unwrap();
    assert_eq!(r.length % (batch(0, 10, 0).0.len() as u64), 0, "whole batches only");
    let t = seg.find_by_timestamp(1000 + 50 * 100 + 5, end, NO_GAPS).unwrap().unwrap();
    assert_eq!(t.base_offset, 500);
    assert_eq!(seg.last_batch(end, NO_GAPS).unwrap().unwrap().last_offset, 999);
}

#[test]
fn recover_truncates_torn_tail_and_rebuilds_index() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 50);
    let good = seg.size();
    let entries = seg.indexes.lock().offsets.len();
    // A torn write: half a batch after the good data.
    let (bytes, _) = batch(500, 10, 0);
    seg.log.write_all_at(&bytes[..bytes.len() / 2], good).unwrap();
    drop(seg);
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    let r = seg.recover(4096, 1 << 20, false).unwrap();
    assert_eq!(r.valid_bytes, good);
    assert_eq!(r.next_offset, Some(500));
    assert_eq!(r.truncated_bytes, bytes.len() as u64 / 2);
    assert_eq!(seg.log.metadata().unwrap().len(), good);
    assert_eq!(seg.indexes.lock().offsets.len(), entries);
}

#[test]
fn recover_stops_at_a_negative_or_huge_batch_length() {
    for bad_len in [-1i32, i32::MIN, i32::MAX, 10] {
        let dir = tempfile::tempdir().unwrap();
        let seg = filled(dir.path(), 5);
        let one = batch(0, 10, 0).0.len() as u64;
        seg.log.write_all_at(&bad_len.to_be_bytes(), one * 3 + 8).unwrap();
        let r = seg.recover(4096, 1 << 20, false).unwrap();
        assert_eq!(r.next_offset, Some(30), "length {bad_len}");
        assert_eq!(r.valid_bytes, one * 3);
    }
}

#[test]
fn recover_stops_at_crc_error() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 20);
    let one = batch(0, 10, 0).0.len() as u64;
    // A baseOffset moved up (outside the CRC) is caught by contiguity.
    let mut head = [0u8; 8];
    seg.read_exact_at(&mut head, one * 12).unwrap();
    head[7] ^= 0x80; // 120 becomes 248
    seg.log.write_all_at(&head, one * 12).unwrap();
    // A compacted log allows the jump (and stops at the batch after it)...
    assert!(seg.recover(4096, 1 << 20, true).unwrap().next_offset.is_some_and(|o| o > 130));
    // ...any other log cuts it off.
    assert_eq!(seg.recover(4096, 1 << 20, false).unwrap().next_offset, Some(120));
    // Flip a byte inside the 8th batch.
    seg.log.write_all_at(&[0xff], one * 7 + 100).unwrap();
    let r = seg.recover(4096, 1 << 20, false).unwrap();
    assert_eq!(r.valid_bytes, one * 7);
    assert_eq!(r.next_offset, Some(70));
}

#[test]
fn seal_trims_indexes_and_truncate_cuts_batches() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 100);
    seg.seal().unwrap();
    let (_, idx, _) = Segment::paths(dir.path(), 0);
    let n = seg.indexes.lock().offsets.len() as u64;
    assert_eq!(fs::metadata(idx).unwrap().len(), n * 8);
    drop(seg);
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    let removed = seg.truncate_to(555).unwrap();
    assert!(removed > 0);
    assert_eq!(seg.last_batch(seg.size(), NO_GAPS).unwrap().unwrap().last_offset, 549);
}

#[test]
fn a_write_that_fails_part_way_leaves_the_segment_as_it_was() {
    let small = crate::small_fs::SmallFs::new(1 << 20).unwrap();
    let seg = Segment::open(small.path(), 0, 4096, SegmentMode::Active).unwrap();
    let (first, info) = batch(0, 10, 1000);
    seg.append(&first, &info, 4096).unwrap();
    let good = seg.size();
    small.fill(8192).unwrap();
    // About 110 KB: more than is left and than the segment allocated ahead.
    let (big, info) = batch(10, 1000, 2000);
    let err = seg.append(&big, &info, 4096).unwrap_err();
    assert!(
        matches!(&err, Error::IoAt { path, source }
            if path == seg.log_path() && source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    assert_eq!(seg.size(), good);
    assert_eq!(fs::metadata(seg.log_path()).unwrap().len(), good, "the partial bytes are cut off");
    small.free();
    seg.append(&big, &info, 4096).unwrap();
    assert_eq!(fs::metadata(seg.log_path()).unwrap().len(), good + big.len() as u64);
    let b = seg.find_batch(10, seg.size(), NO_GAPS).unwrap().unwrap();
    assert_eq!((b.position, b.base_offset, b.last_offset), (good, 10, 1009));
}

#[test]
fn a_new_segment_that_cannot_be_set_up_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let (log, index, time) = Segment::paths(dir.path(), 0);
    fs::create_dir(&time).unwrap(); // the time index cannot be opened
    let err = Segment::open(dir.path(), 0, 4096, SegmentMode::Active).err().unwrap();
    assert!(matches!(&err, Error::IoAt { path, .. } if path == &time), "{err}");
    assert!(!log.exists() && !index.exists());
}

/// A reader reads the log's length before the index: if the writer moved on in
/// between, the last index entry lies past that length, which itself may fall
/// inside a batch being written. The committed size must be a batch boundary.
#[test]
fn a_reader_racing_the_writer_starts_at_a_batch_boundary() {
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    let mut bounds = Vec::new();
    for i in 0..3 {
        let (bytes, info) = batch(i * 10, 10, 1000);
        bounds.push(seg.size());
        seg.append(&bytes, &info, 0).unwrap();
    }
    seg.sync().unwrap();
    let third = bounds[2];
    assert!(seg.indexes.lock().offsets.last_entry().is_some_and(|e| u64::from(e.1) == third));
    // What the reader's length look saw: the first batch whole, the second half written.
    let cut = bounds[1] + (third - bounds[1]) / 2;
    seg.log.set_len(cut).unwrap();
    let reader = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Reader).unwrap();
    assert_eq!(reader.size(), 0, "a position inside a batch was taken for committed");
    assert_eq!(reader.catch_up_tail().unwrap(), Some(10));
    assert_eq!(reader.size(), bounds[1]);
    assert_eq!(reader.find_batch(5, reader.size(), NO_GAPS).unwrap().map(|b| b.position), Some(0));
}

/// A reader checks each batch past its last index entry piece by piece: a
/// batch longer than a piece is taken in whole and valid, and a byte changed
/// past its first piece is found, as damage if a valid batch follows and as a
/// batch still being written if it is the last.
#[test]
fn a_reader_checks_batches_longer_than_a_piece_to_their_last_byte() {
    let big = |base: i64| {
        let mut b = BatchBuilder::new(Compression::None).base_offset(base);
        let v = vec![3u8; 9000];
        for i in 0..5 {
            b.append(&NewRecord { timestamp: 1000 + i, key: None, value: Some(&v), headers: &[] });
        }
        let bytes = b.build().unwrap();
        let info = BatchInfo::from_batch(0, &RecordBatch::parse(&bytes).unwrap());
        (bytes, info)
    };
    let dir = tempfile::tempdir().unwrap();
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    let mut bounds = Vec::new();
    for i in 0..3 {
        let (bytes, info) = big(i * 5);
        assert!(bytes.len() > tail::TAIL_PIECE, "a batch of {} bytes fits one piece", bytes.len());
        bounds.push(seg.size());
        seg.append(&bytes, &info, u64::MAX).unwrap(); // no index entry: readers start at 0
    }
    bounds.push(seg.size());
    seg.sync().unwrap();
    let reader = || Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Reader).unwrap();
    let r = reader();
    assert_eq!(r.catch_up_tail().unwrap(), Some(15));
    assert_eq!((r.size(), r.damaged_at()), (bounds[3], None));

    let flip = |at: u64| {
        let mut bytes = fs::read(&seg.log_path).unwrap();
        bytes[at as usize] ^= 0x40;
        fs::write(&seg.log_path, bytes).unwrap();
    };
    // Past the first piece of the second batch, a valid third one after it: damage.
    let in_second = bounds[1] + tail::TAIL_PIECE as u64 + 100;
    flip(in_second);
    let r = reader();
    assert_eq!(r.catch_up_tail().unwrap(), Some(5));
    assert_eq!((r.size(), r.damaged_at()), (bounds[1], Some(bounds[1])));
    flip(in_second);
    // The same in the last batch: taken for one still being written.
    flip(bounds[2] + tail::TAIL_PIECE as u64 + 100);
    let r = reader();
    assert_eq!(r.catch_up_tail().unwrap(), Some(10));
    assert_eq!((r.size(), r.damaged_at()), (bounds[2], None));
}

/// A read into unzeroed memory returns exactly the file's bytes, from a
/// writer's map or with pread, and a read past the end is an error naming the
/// file, not bytes nobody wrote.
#[test]
fn a_read_into_unzeroed_memory_gives_the_files_bytes_or_an_error() {
    use std::mem::MaybeUninit;
    let dir = tempfile::tempdir().unwrap();
    let writer = filled(dir.path(), 4);
    writer.sync().unwrap();
    let size = writer.size();
    let want = fs::read(&writer.log_path).unwrap();
    let reader = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Reader).unwrap();
    for seg in [&writer, &reader] {
        let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
        for (pos, len) in [(0u64, 1usize), (7, 100), (0, size as usize), (size - 10, 10)] {
            let got = seg.read_exact_at_uninit(&mut buf[..len], pos).unwrap();
            assert_eq!(got, &want[pos as usize..pos as usize + len]);
        }
    }
    let mut buf = [MaybeUninit::<u8>::uninit(); 64];
    let err = reader.read_exact_at_uninit(&mut buf, size - 10).err().unwrap();
    assert!(err.to_string().contains("00000000000000000000.log"), "{err}");
}

#[test]
fn the_log_fd_reads_a_range_and_outlives_unlinking_and_shows_a_truncation_as_short() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let seg = std::sync::Arc::new(filled(dir.path(), 10));
    let range = seg.range_from(35, 1 << 20, seg.size(), NO_GAPS).unwrap().unwrap();
    let held = seg.clone();
    let pread = |len: usize, pos: u64| {
        let mut buf = vec![0u8; len];
        // SAFETY: `buf` is a live, writable buffer of `len` bytes, and the fd
        // is borrowed from a Segment that `held` keeps alive for the call.
        let n = unsafe {
            libc::pread(held.log_fd().as_raw_fd(), buf.as_mut_ptr().cast(), len, pos as libc::off_t)
        };
        buf.truncate(n.max(0) as usize);
        buf
    };
    let want = seg.read_bytes(range.position, range.length as usize).unwrap();
    assert_eq!(pread(range.length as usize, range.position), want);
    // Retention or a cleaning unlinks (or renames) the path: the fd reads on.
    seg.delete_files().unwrap();
    assert_eq!(pread(range.length as usize, range.position), want);
    assert_eq!(held.as_fd().as_raw_fd(), held.log_fd().as_raw_fd());
    // A truncation cuts the same file: a range read before it comes up short.
    seg.truncate_to(30).unwrap();
    assert!(pread(range.length as usize, range.position).len() < range.length as usize);
}

#[test]
fn range_upto_stops_before_batches_at_or_past_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 10);
    let end = seg.size();
    let all = seg.range_from(0, u64::MAX, end, NO_GAPS).unwrap().unwrap();
    assert_eq!(all.length, end);
    let three = seg.range_upto(5, u64::MAX, end, NO_GAPS, 30).unwrap().unwrap();
    assert_eq!((three.position, three.length), (0, end * 3 / 10));
    // A bound inside a batch lets that batch through (its base is below it).
    let four = seg.range_upto(5, u64::MAX, end, NO_GAPS, 31).unwrap().unwrap();
    assert_eq!(four.length, end * 4 / 10);
    assert!(seg.range_upto(30, u64::MAX, end, NO_GAPS, 30).unwrap().is_none());
}

/// The disk space a file holds (its blocks), as `du` counts it.
fn disk_bytes(path: &Path) -> u64 {
    crate::small_fs::allocated_bytes(&File::open(path).unwrap()).unwrap()
}

/// `size` in whole blocks, and a few more the file system may keep for itself
/// (an extent tree's): far less than a segment allocates ahead.
fn blocks_for(size: u64) -> u64 {
    size.next_multiple_of(4096) + 16 * 1024
}

/// Whether the file system under `dir` allocates blocks past a file's end.
fn allocates_ahead(dir: &Path) -> bool {
    let probe = dir.join("probe");
    let f = File::create(&probe).unwrap();
    // SAFETY: a plain system call on a file this function owns.
    let r = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, 4096) };
    drop(f);
    fs::remove_file(probe).unwrap();
    r == 0
}

#[test]
fn the_active_segment_is_allocated_ahead_and_sealing_gives_the_blocks_back() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 300);
    let path = seg.log_path().to_path_buf();
    let size = seg.size();
    assert_eq!(fs::metadata(&path).unwrap().len(), size, "the file is as long as the log");
    assert!(allocates_ahead(dir.path()), "the test directory's file system allocates ahead");
    assert!(disk_bytes(&path) >= size + ALLOCATE_AHEAD_MIN, "{} for {size}", disk_bytes(&path));
    let bytes = fs::read(&path).unwrap();
    seg.seal().unwrap();
    assert!(disk_bytes(&path) <= blocks_for(size), "{} for {size}", disk_bytes(&path));
    assert_eq!(fs::read(&path).unwrap(), bytes);
    // A cut gives back what lay past it too; appends then go on from the cut.
    drop(seg);
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    let (more, info) = batch(3000, 10, 9000);
    seg.append(&more, &info, 4096).unwrap();
    seg.truncate_to(1500).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), seg.size());
    assert!(disk_bytes(&path) <= blocks_for(seg.size()));
    let (more, info) = batch(1500, 10, 9000);
    seg.append(&more, &info, 4096).unwrap();
    assert_eq!(seg.last_batch(seg.size(), NO_GAPS).unwrap().unwrap().last_offset, 1509);
}

/// A writer that stopped without sealing (a crash) leaves blocks past the end;
/// the next writer gives them back when it seals the segment, and a segment
/// with none is sealed without its file being touched.
#[test]
fn blocks_left_past_the_end_by_a_crash_are_given_back_and_others_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let seg = filled(dir.path(), 300);
    let (path, size) = (seg.log_path().to_path_buf(), seg.size());
    drop(seg); // not sealed
    assert!(disk_bytes(&path) > size.next_multiple_of(4096) + ALLOCATE_AHEAD_MIN);
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    seg.seal().unwrap();
    assert!(disk_bytes(&path) <= blocks_for(size));
    assert_eq!(fs::metadata(&path).unwrap().len(), size);
    drop(seg);
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    File::options().write(true).open(&path).unwrap().set_modified(old).unwrap();
    let seg = Segment::open(dir.path(), 0, 1 << 20, SegmentMode::Active).unwrap();
    seg.seal().unwrap();
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), old, "the log file was left alone");
}
