use std::io::Write;

use super::*;

fn file_with(bytes: &[u8]) -> (tempfile::TempDir, File) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
    let f = File::open(&path).unwrap();
    (dir, f)
}

#[test]
fn serves_only_committed_bytes() {
    let (_d, f) = file_with(b"0123456789");
    let map = LogMap::new(true);
    assert_eq!(map.with(&f, || 10, 2, 3, <[u8]>::to_vec).ok(), Some(b"234".to_vec()));
    // Past the committed size (even inside the file): handed back.
    assert!(map.with(&f, || 4, 2, 3, <[u8]>::to_vec).is_err());
    assert!(map.with(&f, || 10, u64::MAX, 3, <[u8]>::to_vec).is_err());
}

#[test]
fn off_for_a_reader_process() {
    let (_d, f) = file_with(b"0123456789");
    assert!(LogMap::new(false).with(&f, || 10, 0, 1, <[u8]>::to_vec).is_err());
}

#[test]
fn follows_a_growing_file_and_a_shortened_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log");
    let mut w =
        std::fs::OpenOptions::new().create(true).truncate(true).read(true).write(true).open(&path).unwrap();
    w.write_all(&[1u8; 100]).unwrap();
    let map = LogMap::new(true);
    assert_eq!(map.with(&w, || 100, 99, 1, |b| b[0]).ok(), Some(1));
    // Grown past the first map's length: remapped.
    let grown = MAP_STEP as usize + 10;
    w.set_len(grown as u64).unwrap();
    assert_eq!(map.with(&w, || grown as u64, grown as u64 - 1, 1, |b| b[0]).ok(), Some(0));
    // Cut short under `shorten`, then read within the new size only.
    let cut = map.shorten();
    w.set_len(50).unwrap();
    drop(cut);
    assert_eq!(map.with(&w, || 50, 0, 50, |b| b.iter().map(|&x| u32::from(x)).sum::<u32>()).ok(), Some(50));
    assert!(map.with(&w, || 50, 40, 20, |b| b.len()).is_err());
}

#[test]
fn released_pages_read_the_same_again() {
    let bytes: Vec<u8> = (0..3 * 4096 + 100).map(|i| (i % 251) as u8).collect();
    let (_d, f) = file_with(&bytes);
    let map = LogMap::new(true);
    let n = bytes.len() as u64;
    // Nothing mapped yet, and ranges past the map or the end: no-ops.
    map.release(0, n);
    assert_eq!(map.with(&f, || n, 0, bytes.len(), <[u8]>::to_vec).ok(), Some(bytes.clone()));
    map.release(100, 5000);
    map.release(n - 1, u64::MAX);
    map.release(u64::MAX, 1);
    map.release(MAP_STEP * 2, 10);
    assert_eq!(map.with(&f, || n, 0, bytes.len(), <[u8]>::to_vec).ok(), Some(bytes.clone()));
    map.release(0, n);
    assert_eq!(map.with(&f, || n, 4000, 300, <[u8]>::to_vec).ok(), Some(bytes[4000..4300].to_vec()));
}

#[test]
fn a_release_starts_at_the_lowest_read_since_the_last() {
    let bytes = vec![7u8; 4 * FAULT_AROUND as usize];
    let (_d, f) = file_with(&bytes);
    let map = LogMap::new(true);
    let n = bytes.len() as u64;
    assert_eq!(map.with(&f, || n, 10, 1, |b| b[0]).ok(), Some(7));
    assert_eq!(map.with(&f, || n, 3 * FAULT_AROUND, 1, |b| b[0]).ok(), Some(7));
    assert_eq!(map.touched_from.load(Ordering::Relaxed), 10);
    map.release(3 * FAULT_AROUND, 1);
    assert_eq!(map.touched_from.load(Ordering::Relaxed), u64::MAX);
    assert_eq!(map.with(&f, || n, 0, bytes.len(), |b| b.iter().all(|&x| x == 7)).ok(), Some(true));
}
