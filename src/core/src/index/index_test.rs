//! Tests of `index`.

use super::*;

#[test]
fn offset_index_lookup_trim_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000000000000000100.index");
    let mut idx = OffsetIndex::open(&p, 100, 80, true).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 80, "preallocated");
    assert_eq!(idx.lookup(150), (100, 0));
    for i in 1..=5 {
        idx.append(100 + i * 10, (i * 1000) as u32).unwrap();
    }
    assert_eq!(idx.lookup(129), (120, 2000));
    assert_eq!(idx.lookup(130), (130, 3000));
    assert_eq!(idx.lookup(99), (100, 0));
    assert_eq!(idx.lookup(10_000), (150, 5000));
    // Big-endian on disk: relative offset 10, position 1000.
    idx.flush().unwrap();
    let raw = std::fs::read(&p).unwrap();
    assert_eq!(&raw[0..8], &[0, 0, 0, 10, 0, 0, 0x03, 0xe8]);
    idx.trim().unwrap();
    drop(idx);
    assert_eq!(std::fs::metadata(&p).unwrap().len(), 40, "trimmed to entries");
    let ro = OffsetIndex::open(&p, 100, 80, false).unwrap();
    assert_eq!(ro.len(), 5);
    assert_eq!(ro.lookup(141), (140, 4000));
    let mut rw = OffsetIndex::open(&p, 100, 80, true).unwrap();
    assert_eq!(rw.len(), 5);
    rw.truncate_to(130);
    assert_eq!(rw.last_entry(), Some((120, 2000)));
    rw.truncate_to_position(1500);
    assert_eq!(rw.len(), 1);
}

#[test]
fn zero_filled_tail_after_crash_is_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000000000000000000.index");
    let mut idx = OffsetIndex::open(&p, 0, 800, true).unwrap();
    idx.append(7, 4100).unwrap();
    idx.append(15, 8300).unwrap();
    idx.flush().unwrap();
    drop(idx); // no trim: as after a kill
    assert_eq!(OffsetIndex::open(&p, 0, 800, true).unwrap().len(), 2);
    assert_eq!(OffsetIndex::open(&p, 0, 800, false).unwrap().len(), 2);
}

#[test]
fn full_index_reports_full() {
    let dir = tempfile::tempdir().unwrap();
    let mut idx = OffsetIndex::open(&dir.path().join("a.index"), 0, 16, true).unwrap();
    idx.append(1, 10).unwrap();
    assert!(!idx.is_full());
    idx.append(2, 20).unwrap();
    assert!(idx.is_full());
}

#[test]
fn time_index_is_monotonic_and_searchable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000000000000000000.timeindex");
    let mut t = TimeIndex::open(&p, 0, 120, true).unwrap();
    t.maybe_append(1000, 5, false).unwrap();
    t.maybe_append(900, 8, false).unwrap(); // older timestamp: skipped
    t.maybe_append(2000, 9, false).unwrap();
    t.maybe_append(3000, 20, false).unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(t.lookup(500), 0);
    assert_eq!(t.lookup(1000), 0);
    assert_eq!(t.lookup(1001), 5);
    assert_eq!(t.lookup(2500), 9);
    t.flush().unwrap();
    let raw = std::fs::read(&p).unwrap();
    assert_eq!(&raw[0..12], &[0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 5]);
    t.truncate_to(9);
    assert_eq!(t.len(), 1);
}

#[test]
fn an_entry_on_a_full_disk_is_an_error_naming_the_file_not_a_sigbus() {
    // Room well beyond one allocation chunk once freed: tmpfs counts its blocks
    // per CPU, and on a busy machine a 1 MiB mount still looked full just after
    // the filler went.
    let small = crate::small_fs::SmallFs::new(8 << 20).unwrap();
    let p = small.path().join("00000000000000000000.index");
    let mut idx = OffsetIndex::open(&p, 0, 1 << 20, true).unwrap();
    small.fill(0).unwrap();
    // Entries land in pages the disk cannot back: writing one through the
    // mapping would kill the process with SIGBUS.
    let err = (1..=20_000).try_for_each(|i| idx.append(i, i as u32 * 100)).unwrap_err();
    assert!(
        matches!(&err, crate::Error::IoAt { path, source }
            if path == &p && source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    small.free();
    let n = idx.len() as i64;
    idx.append(n + 1, 7).unwrap();
    assert_eq!(idx.last_entry(), Some((n + 1, 7)));
}

#[test]
fn a_preallocated_index_takes_disk_only_as_entries_need_it() {
    let small = crate::small_fs::SmallFs::new(256 << 10).unwrap();
    let p = small.path().join("00000000000000000000.timeindex");
    let mut idx = TimeIndex::open(&p, 0, 10 << 20, true).unwrap();
    let f = std::fs::File::open(&p).unwrap();
    assert_eq!(f.metadata().unwrap().len(), (10 << 20) / 12 * 12, "sparse, whole entries");
    for i in 1..=1000 {
        idx.maybe_append(i, i, false).unwrap();
    }
    assert!(crate::small_fs::allocated_bytes(&f).unwrap() >= 1000 * 12, "the entries' pages are backed");
    assert!(crate::small_fs::allocated_bytes(&f).unwrap() <= 256 << 10);
}

#[test]
fn a_reader_takes_in_what_a_writer_appends_and_sees_where_it_cut_back() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000000000000000000.index");
    let mut w = OffsetIndex::open(&p, 0, 8 * 100, true).unwrap();
    for i in 1..=3 {
        w.append(i * 10, (i * 100) as u32).unwrap();
    }
    let mut r = OffsetIndex::open(&p, 0, 8 * 100, false).unwrap();
    assert_eq!(r.len(), 3);
    // Appended: read after what the reader has.
    for i in 4..=6 {
        w.append(i * 10, (i * 100) as u32).unwrap();
    }
    r.reload().unwrap();
    assert_eq!((r.len(), r.lookup(55)), (6, (50, 500)));
    // Cut back below the reader's last entry, then others appended.
    w.truncate_to(25);
    w.append(30, 333).unwrap();
    w.append(40, 444).unwrap();
    r.reload().unwrap();
    assert_eq!((r.len(), r.lookup(35), r.lookup(45)), (4, (30, 333), (40, 444)));
    // Cut back by one and another entry in the reader's last one's place.
    w.truncate_to(35);
    w.append(40, 999).unwrap();
    r.reload().unwrap();
    assert_eq!((r.len(), r.lookup(45)), (4, (40, 999)));
    // Cut back to fewer entries than the reader has.
    w.truncate_to(15);
    r.reload().unwrap();
    assert_eq!((r.len(), r.lookup(45)), (1, (10, 100)));
}

#[test]
fn a_reader_of_a_preallocated_index_holds_about_its_entries() {
    // A live writer's index is 10 MiB of preallocated file with its entries a
    // prefix; a reader following it keeps a copy the size of the entries, and a
    // catch-up does not grow that copy by more room than it reads.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("00000000000000000000.index");
    let mut w = OffsetIndex::open(&p, 0, 10 << 20, true).unwrap();
    for i in 1..=1800 {
        w.append(i * 10, (i * 4096) as u32).unwrap();
    }
    let mut r = OffsetIndex::open(&p, 0, 10 << 20, false).unwrap();
    assert_eq!(r.len(), 1800);
    for i in 1801..=1810 {
        w.append(i * 10, (i * 4096) as u32).unwrap();
    }
    r.reload().unwrap();
    assert_eq!((r.len(), r.lookup(18_095)), (1810, (18_090, 1809 * 4096)));
    assert!(r.file.loaded_capacity() <= 256 << 10, "{} bytes held", r.file.loaded_capacity());
}

#[test]
fn a_reader_finds_where_a_preallocated_index_ends_for_any_fill() {
    // An index inside a reader's first read, and one past it (8,192 entries),
    // where the end is searched for entry by entry.
    for room in [3000, 20_000] {
        reader_finds_the_end(room, &[0, 1, 2, 255, 256, 257, 258, 700, 1800, room - 2, room - 1, room]);
    }
    reader_finds_the_end(20_000, &[8191, 8192, 8193, 8192 + 255, 8192 + 256, 8192 + 257, 12_345]);
}

fn reader_finds_the_end(room: usize, fills: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    for &filled in fills {
        let p = dir.path().join(format!("{filled:020}.index"));
        let mut w = OffsetIndex::open(&p, 0, 8 * room, true).unwrap();
        for i in 1..=filled {
            w.append(i as i64, i as u32 * 100).unwrap();
        }
        let mut r = OffsetIndex::open(&p, 0, 8 * room, false).unwrap();
        assert_eq!(r.len(), filled, "filled {filled}");
        if filled > 0 {
            assert_eq!(r.lookup(filled as i64), (filled as i64, filled as u32 * 100));
        }
        // And from any point a catch-up starts at.
        let more = (room - filled).min(37);
        for i in filled + 1..=filled + more {
            w.append(i as i64, i as u32 * 100).unwrap();
        }
        r.reload().unwrap();
        assert_eq!(r.len(), filled + more, "filled {filled} + {more}");
    }
}
